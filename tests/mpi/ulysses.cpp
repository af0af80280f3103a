// DeepSpeed-Ulysses sequence parallelism (models/sequence_parallel.h) under the FSDP engine
// equals the one-process trainer: gpt2-tiny (4 heads), 10 steps of B 8 x T 16, at sp = 2 and
// sp = 4 alone, sp 2 x dp_shard 2 (full_shard, zero1, no_shard), sp 2 x tp 2, and FPDT inside
// Ulysses at sp 2 and 4: its attention (attention = "fpdt", 4 chunks, keys and values on disk)
// and its pipeline of whole blocks (activation_checkpoint = "chunked", 4 chunks, each rank's
// slice in stripes, keys, values and block inputs on disk; also sp 2 x dp_shard 2 and sp 2 x
// tp 2); losses and
// gradient norms within 1e-5 relative, final parameters within 2e-5. Per layer and micro-step
// the sp group runs two all-to-alls forward ("sp_act": q, k, v to heads; the output back) and
// two backward ("sp_grad"), of exactly (sp - 1) / sp of 4 R A x 4 bytes each way (R this rank's
// tokens, A the attention width per tp rank); chunked blocks run them per chunk and forward's
// twice (the recomputation), the same bytes in all. The engine's model state equals the memory
// model's with the shard group spanning dp_shard x sp. Dropout (residual and attention) gives
// the one-process losses on any sp (masks follow the token), and splits that cannot run are
// refused naming the fix. A suite point with mesh.sp = 2, run by the registered train task
// (its data sliced per rank, the model and engine set up from the point), gives the
// one-process trainer's losses, and the memory it records equals its prediction.
#include "harness/spec/suite.h"
#include "harness/trace/recorder.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "tests/mpi/train_point.h"
#include "workloads/data/batches.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/checkpoint.h"
#include "workloads/parallel/sp_layers.h"
#include "workloads/parallel/tp_layers.h"

#include <mutex>

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

constexpr int kSteps = 10;
constexpr std::int64_t kB = 8, kT = 16;

struct Case {
  int sp = 1, tp = 1, dp_shard = 1;
  std::string strategy = "full_shard";
  double dropout = 0;
  // FPDT inside Ulysses (as in the paper): each rank's whole-sequence heads in 4 chunks, their
  // keys and values in a file until backward.
  bool fpdt = false;
  // FPDT's pipeline of whole blocks inside Ulysses: 4 chunks, everything on disk.
  bool chunked = false;
};

sb::Mesh mesh_of(const Case& c) {
  sb::Mesh m;
  m.sp = c.sp, m.tp = c.tp, m.dp_shard = c.dp_shard;
  return m;
}

std::string describe(const Case& c) {
  return fmt::format("sp {} tp {} dp_shard {} {}{}{}{}", c.sp, c.tp, c.dp_shard, c.strategy,
                     c.dropout > 0 ? " dropout" : "", c.fpdt ? " fpdt (kv on disk)" : "",
                     c.chunked ? " chunked blocks (on disk)" : "");
}

struct SpRun {
  RunResult r;
  std::size_t act = 0, grad = 0;
  std::uint64_t act_bytes = 0, grad_bytes = 0;
  sb::fsdp::MemoryStats memory;
  std::vector<sb::models::UnitSpec> units;
};

// This rank's micro-batch of global batch g: its data-parallel rows, then its sequence slice
// (in stripes of `stripe` tokens when > 0).
sb::models::Batch mine(const sb::models::Batch& g, const sb::Mesh& mesh, const Communicator& comm,
                       std::int64_t stripe = 0) {
  return sb::data::sequence_slice(slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size()),
                                  comm.rank(Group::Sp), comm.size(Group::Sp), stripe);
}

SpRun run(const Case& c, int steps = kSteps) {
  const sb::Mesh mesh = mesh_of(c);
  Communicator comm(MPI_COMM_WORLD, mesh);
  SpRun out;
  std::mutex mu;
  comm.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (e.kind == "sp_act") ++out.act, out.act_bytes += e.logical_bytes;
    if (e.kind == "sp_grad") ++out.grad, out.grad_bytes += e.logical_bytes;
  }, MPI_Wtime());
  auto cfg = sb::models::preset_config("gpt2-tiny");
  if (c.fpdt) cfg.attention = "fpdt", cfg.seq_chunks = 4, cfg.kv_offload = "disk";
  if (c.chunked) cfg.seq_chunks = 4, cfg.kv_offload = "disk", cfg.kv_offload_dir = ::testing::TempDir();
  auto model = sb::models::make_model(cfg);
  if (c.chunked) model->set_activation_checkpoint({sb::models::CheckpointMode::Chunked, 1});
  if (c.tp > 1) model->set_tensor_parallel(sb::parallel::tensor_parallel(comm));
  model->set_sequence_parallel(sb::parallel::sequence_parallel(comm));
  if (c.dropout > 0) model->set_dropout({c.dropout, c.dropout, 5});
  sb::fsdp::Engine engine(*model, comm, engine_config(c.strategy, steps),
                          sb::models::init_params(model->units(), 1234));
  for (int s = 0; s < steps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    if (c.dropout > 0) g.dropout_step = s;
    const auto st = engine.step({mine(g, mesh, comm, model->sequence_stripe(kT))}, sb::fsdp::loss_terms(g));
    out.r.losses.push_back(st.loss);
    out.r.norms.push_back(st.grad_norm);
  }
  out.r.params = engine.full_params();
  out.memory = engine.memory();
  out.units = model->units();
  return out;
}

std::vector<Case> cases(int n) {
  std::vector<Case> out;
  if (n == 2)
    out = {{2, 1, 1, "full_shard"}, {2, 1, 1, "zero1"}, {2, 1, 1, "no_shard"},
           {2, 1, 1, "full_shard", 0, true}, {2, 1, 1, "full_shard", 0, false, true}};
  if (n == 4)
    out = {{4, 1, 1, "full_shard"}, {2, 1, 2, "full_shard"}, {2, 1, 2, "zero1"},
           {2, 1, 2, "no_shard"}, {2, 2, 1, "full_shard"}, {4, 1, 1, "full_shard", 0, true},
           {4, 1, 1, "full_shard", 0, false, true}, {2, 1, 2, "full_shard", 0, false, true},
           {2, 2, 1, "full_shard", 0, false, true}};
  return out;
}

TEST(Ulysses, MatchesOneProcessTrainer) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-tiny's 4 heads do not split over 3 sp ranks";
  const auto& ref = cached_reference("gpt2-tiny", kSteps, kB, kT);
  for (const Case& c : cases(n)) {
    const std::string what = describe(c);
    const SpRun got = run(c);
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(got.r.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << what << " step " << s;
      EXPECT_NEAR(got.r.norms[s], ref.norms[s], 1e-5 * ref.norms[s]) << what << " step " << s;
    }
    double d = 0;
    for (std::size_t u = 0; u < got.units.size(); ++u)
      for (std::size_t i = 0; i < got.units[u].params.size(); ++i) {
        const auto want = sb::models::tp_slice(got.units[u].params[i], ref.params[u][i]);
        ASSERT_EQ(got.r.params[u][i].sizes(), want.sizes()) << got.units[u].params[i].name;
        d = std::max(d, (got.r.params[u][i] - want).abs().max().item<double>());
      }
    EXPECT_LT(d, 2e-5) << what << ": final parameters differ by " << d;
    // Traffic: 2 all-to-alls a layer (a chunk) each way, (sp - 1) / sp of their buffers;
    // chunked blocks run forward's again in backward.
    const auto cfg = sb::models::preset_config("gpt2-tiny");
    const std::size_t L = static_cast<std::size_t>(cfg.n_layer), C = c.chunked ? 4 : 1, again = c.chunked ? 2 : 1;
    EXPECT_EQ(got.act, 2 * L * C * again * kSteps) << what;
    EXPECT_EQ(got.grad, 2 * L * C * kSteps) << what;
    const std::int64_t R = kB / c.dp_shard * kT / c.sp, A = cfg.attn_width() / c.tp;
    const std::uint64_t per_layer = static_cast<std::uint64_t>(4 * R * A * 4 * (c.sp - 1) / c.sp);
    EXPECT_EQ(got.act_bytes, per_layer * L * again * kSteps) << what;
    EXPECT_EQ(got.grad_bytes, per_layer * L * kSteps) << what;
    // The memory model: FSDP spans dp_shard x sp.
    sb::fsdp::MemoryInputs in;
    in.units = got.units;
    in.model = cfg;
    in.strategy = c.strategy;
    in.world = c.dp_shard * c.sp;
    in.tp = c.tp;
    in.sp = c.sp;
    in.shard_group = c.dp_shard * c.sp;
    const auto pm = sb::fsdp::predict_memory(in);
    EXPECT_EQ(got.memory.param, pm.param) << what;
    EXPECT_EQ(got.memory.optim, pm.optim) << what;
    EXPECT_EQ(got.memory.model_state, pm.model_state) << what;
    if (world_rank() == 0)
      std::printf("[ ulysses ] %-36s loss %.6f -> %.6f (ref %.6f), max |dp| %.2e\n", what.c_str(),
                  got.r.losses.front(), got.r.losses.back(), ref.losses.back(), d);
  }
}

// Residual and attention dropout: the same masks for a token whatever its sp rank.
TEST(Ulysses, DropoutFollowsTheToken) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-tiny's 4 heads do not split over 3 sp ranks";
  constexpr int kDropSteps = 3;
  Communicator self(MPI_COMM_SELF, 1);
  auto model = sb::models::make_model("gpt2-tiny");
  model->set_dropout({0.1, 0.1, 5});
  sb::fsdp::Engine e(*model, self, engine_config("no_shard", kDropSteps),
                     sb::models::init_params(model->units(), 1234));
  std::vector<double> want;
  for (int s = 0; s < kDropSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    g.dropout_step = s;
    want.push_back(e.step({g}, sb::fsdp::loss_terms(g)).loss);
  }
  const auto plain = cached_reference("gpt2-tiny", kSteps, kB, kT);
  EXPECT_GT(std::abs(want[1] - plain.losses[1]), 1e-4) << "dropout changed nothing";
  Case c;
  c.sp = n == 4 ? 2 : n, c.dp_shard = n / c.sp, c.dropout = 0.1;
  const SpRun got = run(c, kDropSteps);
  for (int s = 0; s < kDropSteps; ++s)
    EXPECT_NEAR(got.r.losses[s], want[s], 1e-5 * std::abs(want[s])) << describe(c) << " step " << s;
}

TEST(Ulysses, ASuitePointTrainsLikeOneProcess) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-tiny's 4 heads do not split over 3 sp ranks";
  const std::string text = fmt::format(R"([suite]
name = "ulysses"
[base]
task = "train"
model = "gpt2-tiny"
dtype = "fp32"
world = {}
"mesh.sp" = 2
threads = 1
batch = 8
seq = 16
steps = 4
warmup = 0
lr = 3e-3
eval_batches = 1
peak_gflops = 1.0
)", n);
  const sb::Suite s = sb::load_suite_text(text, "ulysses.toml");
  const sb::Point& p = s.points.at(0);
  sb::Recorder rec;
  run_train_point(p, rec);
  ASSERT_EQ(rec.steps().size(), 4u);
  const std::vector<double> ref = reference_losses(p, rec);
  for (const auto& st : rec.steps()) {
    const double want = ref.at(static_cast<std::size_t>(st.step));
    EXPECT_NEAR(st.loss, want, 1e-5 * std::abs(want)) << "step " << st.step;
  }
  ASSERT_EQ(rec.memories().size(), 1u);
  const sb::RankMemory& m = rec.memories()[0];
  EXPECT_EQ(m.param_bytes, m.predicted_param_bytes);
  EXPECT_EQ(m.grad_bytes, m.predicted_grad_bytes);
  EXPECT_EQ(m.optim_bytes, m.predicted_optim_bytes);
}

TEST(Ulysses, RefusesWhatCannotSplit) {
  auto gpt = sb::models::make_model("gpt2-tiny");  // 4 heads
  EXPECT_NE(gpt->sequence_parallel_problem(3, 16).find("the 4 attention heads (per tensor-"
                                                       "parallel rank): they must divide by sp"),
            std::string::npos);
  EXPECT_NE(gpt->sequence_parallel_problem(4, 16, 2).find("the 2 attention heads"), std::string::npos);
  EXPECT_NE(gpt->sequence_parallel_problem(2, 15).find("seq = 15 tokens into mesh.sp = 2"),
            std::string::npos);
  EXPECT_EQ(gpt->sequence_parallel_problem(2, 16, 2), "");
  auto bert = sb::models::make_model("bert-tiny");
  EXPECT_NE(error_of([&] { bert->set_sequence_parallel({.rank = 0, .size = 2}); })
                .find("has no sequence-parallel attention; set mesh.sp = 1"), std::string::npos);
  // A slice of a row keeps where its tokens sit; a seq that does not split is refused.
  const auto g = global_batch(gpt->config(), 2, kT, 0);
  const auto s = sb::data::sequence_slice(g, 1, 4);
  EXPECT_EQ(s.input_ids.size(1), kT / 4);
  EXPECT_EQ(s.seq_begin, kT / 4);
  EXPECT_EQ(s.seq_full, kT);
  EXPECT_TRUE(torch::equal(s.targets, g.targets.narrow(1, 4, 4)));
  EXPECT_NE(error_of([&] { sb::data::sequence_slice(g, 0, 3); }).find("seq must divide by sp"),
            std::string::npos);
  EXPECT_TRUE(torch::equal(s.positions(), torch::arange(4, 8, torch::kLong)));
  // In stripes (FPDT's chunks inside Ulysses): rank 1 of 2 with stripes of 2 holds tokens
  // 2, 3, 6, 7, 10, 11, 14, 15, whose positions it reports.
  const auto st = sb::data::sequence_slice(g, 1, 2, 2);
  const auto cols = torch::tensor({2, 3, 6, 7, 10, 11, 14, 15}, torch::kLong);
  EXPECT_TRUE(torch::equal(st.input_ids, g.input_ids.index_select(1, cols)));
  EXPECT_TRUE(torch::equal(st.targets, g.targets.index_select(1, cols)));
  EXPECT_TRUE(torch::equal(st.positions(), cols));
  EXPECT_NE(error_of([&] { sb::data::sequence_slice(g, 0, 2, 3); }).find("is not stripes of 3"),
            std::string::npos);
  // The model asks for stripes only when it runs chunked blocks inside Ulysses.
  auto chunked_cfg = sb::models::preset_config("gpt2-tiny");
  chunked_cfg.seq_chunks = 4;
  auto chunked = sb::models::make_model(chunked_cfg);
  chunked->set_sequence_parallel({.rank = 0, .size = 2, .all_to_all = [](const torch::Tensor& t) { return t; }});
  EXPECT_EQ(chunked->sequence_stripe(kT), 0);
  chunked->set_activation_checkpoint({sb::models::CheckpointMode::Chunked, 1});
  EXPECT_EQ(chunked->sequence_stripe(kT), 2);
}

}  // namespace
