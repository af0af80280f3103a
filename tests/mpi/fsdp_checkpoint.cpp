// Checkpoint sets (issue 14): a set mixing files of different saves, a header edited outside
// the payload, and a set whose save never committed are refused on every rank before any
// tensor is read; an older committed set is used when the newest has no marker; and resuming
// is bit-exact against the uninterrupted run for every compression policy on every strategy
// (error-feedback residuals, PowerSGD's Q, stochastic-rounding generators are saved).
#include <filesystem>
#include <fstream>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::fsdp::Engine;
using sb::fsdp::EngineConfig;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kB = 12, kT = 16;

EngineConfig config(const std::string& strategy) { return engine_config(strategy); }


bool has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos;
}

std::string shared_tmpdir(const std::string& tag) { return sbtest::shared_tmpdir("sb_ckpt", tag); }

// Runs f on rank 0 only, between two barriers (file surgery between collective steps: no
// rank still looks at the files, and every rank sees the result).
void on_rank0(const std::function<void()>& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) f();
  MPI_Barrier(MPI_COMM_WORLD);
}

std::unique_ptr<sb::models::Model> tiny() { return sb::models::make_model("gpt2-tiny"); }

TEST(CheckpointSet, MixedStepsAreRefusedOnEveryRankBeforeAnyTensorIsRead) {
  const std::string a = shared_tmpdir("mixA"), b = shared_tmpdir("mixB");
  auto model = tiny();
  Communicator comm(MPI_COMM_WORLD, 0);
  Engine e(*model, comm, config("full_shard"), sb::models::init_params(model->units(), 3));
  run_engine(*model, comm, config("full_shard"), kB, kT, 2, 1, 0, &e);
  e.save(a);  // a/step-00000002
  run_engine(*model, comm, config("full_shard"), kB, kT, 2, 1, 2, &e);
  e.save(b);  // b/step-00000004
  // What a crash in the middle of a save leaves: the last rank's file is from another step.
  const int last = world_size() - 1;
  const std::string file = fmt::format("/rank{}.sbck", last);
  on_rank0([&] {
    fs::copy_file(a + "/step-00000002" + file, b + "/step-00000004" + file,
                  fs::copy_options::overwrite_existing);
  });
  Engine fresh(*model, comm, config("full_shard"), sb::models::init_params(model->units(), 9));
  const auto before = fresh.full_params();
  const auto msg = error_of([&] { fresh.load(b); });
  if (world_rank() == 0) std::printf("[ refused ] %s\n", msg.c_str());
  EXPECT_TRUE(has(msg, fmt::format("rank {}: ", last))) << msg;
  EXPECT_TRUE(has(msg, "step-00000004" + file + " is not the rank-")) << msg;
  EXPECT_TRUE(has(msg, "the file is rank " + std::to_string(last) + " of step 2")) << msg;
  EXPECT_TRUE(has(msg, "the marker lists step 4")) << msg;
  EXPECT_TRUE(has(msg, "mixes files from different saves. Delete")) << msg;
  EXPECT_EQ(fresh.steps_done(), 0);
  EXPECT_EQ(max_param_diff(fresh.full_params(), before), 0.0) << "a refused set changed weights";
  on_rank0([&] { fs::remove_all(a), fs::remove_all(b); });
}

// The step sits in the header (byte 24), outside the payload: the checksum covers it too.
TEST(CheckpointSet, AnEditedHeaderStepFailsTheChecksum) {
  const std::string d = shared_tmpdir("header");
  auto model = tiny();
  Communicator comm(MPI_COMM_WORLD, 0);
  Engine e(*model, comm, config("zero1"), sb::models::init_params(model->units(), 3));
  run_engine(*model, comm, config("zero1"), kB, kT, 1, 1, 0, &e);
  e.save(d);
  const int last = world_size() - 1;
  on_rank0([&] {
    std::fstream io(d + fmt::format("/step-00000001/rank{}.sbck", last),
                    std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(24);
    io.put('\x05');  // step 1 -> 5
  });
  Engine fresh(*model, comm, config("zero1"), sb::models::init_params(model->units(), 3));
  const auto msg = error_of([&] { fresh.load(d); });
  EXPECT_TRUE(has(msg, fmt::format("rank {}: ", last))) << msg;
  EXPECT_TRUE(has(msg, fmt::format("rank{}.sbck is corrupt: checksum", last))) << msg;
  on_rank0([&] { fs::remove_all(d); });
}

TEST(CheckpointSet, ASetWithoutItsCommitMarkerIsNeverLoaded) {
  const std::string old = shared_tmpdir("old"), d = shared_tmpdir("nomarker");
  auto model = tiny();
  Communicator comm(MPI_COMM_WORLD, 0);
  Engine e(*model, comm, config("full_shard"), sb::models::init_params(model->units(), 4));
  run_engine(*model, comm, config("full_shard"), kB, kT, 2, 1, 0, &e);
  e.save(old);
  const auto at2 = e.full_params();
  run_engine(*model, comm, config("full_shard"), kB, kT, 2, 1, 2, &e);
  e.save(d);
  e.save(d);  // a re-save of the same step replaces the set and commits it again
  EXPECT_EQ(sb::fsdp::committed_checkpoint_step(d), 4);
  // The save of step 4 interrupted before its marker: nothing to resume from.
  on_rank0([&] { fs::remove(d + "/step-00000004/COMMIT"); });
  EXPECT_EQ(sb::fsdp::committed_checkpoint_step(d), -1);
  Engine f1(*model, comm, config("full_shard"), sb::models::init_params(model->units(), 4));
  const auto msg = error_of([&] { f1.load(d); });
  EXPECT_TRUE(has(msg, "no complete checkpoint in " + d)) << msg;
  EXPECT_TRUE(has(msg, "step-00000004 has no commit marker")) << msg;
  EXPECT_EQ(f1.steps_done(), 0);
  // With an older committed set beside it, that one is used.
  on_rank0([&] { fs::copy(old + "/step-00000002", d + "/step-00000002", fs::copy_options::recursive); });
  Engine f2(*model, comm, config("full_shard"), sb::models::init_params(model->units(), 4));
  f2.load(d);
  EXPECT_EQ(f2.steps_done(), 2);
  EXPECT_EQ(max_param_diff(f2.full_params(), at2), 0.0);
  // A committed save removes every other set.
  f2.save(d);
  MPI_Barrier(MPI_COMM_WORLD);
  int sets = 0;
  for (const auto& ent : fs::directory_iterator(d)) sets += ent.is_directory() ? 1 : 0;
  EXPECT_EQ(sets, 1);
  EXPECT_TRUE(fs::exists(d + "/step-00000002/COMMIT"));
  on_rank0([&] { fs::remove_all(old), fs::remove_all(d); });
}

// The custom policies: every kind of compression state there is. Kinds the strategy never
// runs are left uncompressed, as the suite validator demands.
std::vector<std::pair<std::string, sb::comm::Policy>> policies(const std::string& strategy) {
  std::vector<std::pair<std::string, sb::comm::Policy>> out;
  for (const auto& name : sb::comm::policy_names())
    if (name != "custom") out.emplace_back(name, sb::comm::policy_preset(name));
  // What the strategy's record says it runs (zero1's after-step gather of the fp32 replica is
  // left exact: only gathers of sharded parameters are compressed here).
  const auto& info = sb::fsdp::strategy_info(strategy);
  const bool reduce_scatter = info.issues(sb::comm::CollectiveKind::GradReduceScatter);
  const bool all_reduce = info.issues(sb::comm::CollectiveKind::GradAllReduce);
  const bool params = info.layout.params_sharded;
  sb::comm::CompressorConfig sto;  // stochastic int8
  sto.name = "int8";
  sto.set("block", 64);
  sto.set("stochastic", true);
  for (const bool powersgd : {true, false}) {
    sb::comm::Policy p;
    p.preset = "custom";
    if (params) p.param_all_gather = sto;
    if (reduce_scatter) {
      p.grad_reduce_scatter = sto;
      p.grad_reduce_scatter.error_feedback = true;
    }
    if (all_reduce) {
      p.grad_all_reduce = sto;
      if (powersgd) {
        p.grad_all_reduce.name = "powersgd";
        p.grad_all_reduce.set("rank", 2);
      }
      p.grad_all_reduce.set("stochastic", !powersgd);
      p.grad_all_reduce.error_feedback = true;
    }
    for (auto* c : {&p.param_all_gather, &p.grad_reduce_scatter, &p.grad_all_reduce}) c->seed = 5;
    out.emplace_back(powersgd ? "custom(powersgd)" : "custom(stochastic int8)", p);
  }
  return out;
}

TEST(Checkpoint, ResumeIsBitExactForEveryCompressionPolicyOnEveryStrategy) {
  const std::string dir = shared_tmpdir("policies");
  const int n = world_size();
  auto model = tiny();
  for (const std::string& s : sb::fsdp::strategy_names())
    for (const auto& [name, policy] : policies(s)) {
      Communicator comm(MPI_COMM_WORLD, replicates(s) ? (n == 4 ? 2 : 1) : 0);
      auto cfg = config(s);
      cfg.compression = policy;
      const auto straight = run_engine(*model, comm, cfg, kB, kT, 4);
      {
        Engine a(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
        run_engine(*model, comm, cfg, kB, kT, 2, 1, 0, &a);
        a.save(dir);
      }
      Engine b(*model, comm, cfg, sb::models::init_params(model->units(), 99));
      b.load(dir);
      const auto resumed = run_engine(*model, comm, cfg, kB, kT, 2, 1, 2, &b);
      for (int i = 0; i < 2; ++i)
        EXPECT_EQ(resumed.losses[i], straight.losses[2 + i]) << s << " " << name << " step "
                                                             << 2 + i;
      EXPECT_EQ(max_param_diff(resumed.params, straight.params), 0.0) << s << " " << name;
    }
  on_rank0([&] { fs::remove_all(dir); });
}

}  // namespace
