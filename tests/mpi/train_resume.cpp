// The train task resuming from checkpoint_dir (issue 14): a point whose checkpoint is at or
// past its `steps` is refused with a message saying why and what to set (it used to report
// `done` with 0 steps and the longer run's loss), and a resumed point with hybrid compression
// records the same losses, bit for bit, as the point run straight through; so does a
// tensor-parallel point (mesh.tp = 2 with sequence parallelism, even worlds) and a pipelined
// one (mesh.pp = 2, 1f1b over 2 micro-batches, even worlds), resumed on the same mesh. A set
// saved on (dp N/2, tp 2) resumes on (dp N) and on (pp 2, dp N/2) with the losses of the
// uninterrupted run, and exports from tp, pp and dp sets of one step agree (issue 31).
#include <filesystem>
#include <functional>
#include <map>

#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/engine.h"

using namespace sbtest;
namespace fs = std::filesystem;

namespace {

struct NoProgress final : sb::Progress {
  void begin(const std::string&, long) override {}
  void step(long, const std::string&) override {}
  void end() override {}
};

// A train point with every registered key at its default, small enough for CI.
sb::Point point(std::int64_t steps, const std::string& dir, bool resume) {
  sb::Point p;
  for (const auto& k : sb::registered_keys()) p.set(k.key, k.default_value);
  p.set("task", std::string("train"));
  p.set("model", std::string("gpt2-tiny"));
  p.set("world", std::int64_t{world_size()});
  p.set("threads", std::int64_t{1});
  p.set("strategy", std::string("full_shard"));
  p.set("compression", std::string("hybrid"));
  p.set("batch", std::int64_t{12});
  p.set("seq", std::int64_t{16});
  p.set("steps", steps);
  p.set("warmup", std::int64_t{0});
  p.set("eval_batches", std::int64_t{1});
  p.set("peak_gflops", 1.0);  // no measurement
  p.set("checkpoint_dir", dir);
  p.set("resume", resume);
  return p;
}

// Runs the point on every rank: its step losses, or the error every rank threw. stop: the
// stop flag is up from the start (a time limit): the point stops after its first step and
// saves, as an interrupted run does.
std::vector<double> run(const sb::Point& p, std::string* error = nullptr, bool stop_early = false,
                        std::map<std::string, std::string>* texts = nullptr) {
  sb::Recorder rec;
  NoProgress progress;
  sb::StopFlag stop;
  stop.requested = stop_early;
  sb::RunContext ctx{p, MPI_COMM_WORLD, world_rank(), world_size(), rec, progress, stop};
  auto w = sb::find_task("train")->make();
  try {
    w->run(ctx);
  } catch (const sb::Error& e) {
    if (!error) throw;
    *error = e.what();
  }
  std::vector<double> losses;
  for (const auto& s : rec.steps()) losses.push_back(s.loss);
  if (texts) *texts = rec.texts();
  return losses;
}

std::string shared_tmpdir() {
  char buf[256] = {0};
  if (world_rank() == 0)
    std::snprintf(buf, sizeof buf, "%s/sb_train_resume_%d_%d",
                  fs::temp_directory_path().c_str(), getpid(), world_size());
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf;
}

TEST(TrainResume, AtOrPastStepsIsRefusedAndAResumedRunMatchesTheStraightOne) {
  const std::string dir = shared_tmpdir(), straight_dir = dir + "_straight";
  const auto straight = run(point(3, straight_dir, false));
  EXPECT_EQ(straight.size(), 3u);  // (no ASSERT: every rank must reach the collectives below)
  // Interrupted after its first step (same steps, so the same learning-rate schedule).
  EXPECT_EQ(run(point(3, dir, false), nullptr, /*stop_early=*/true).size(), 1u);
  std::map<std::string, std::string> texts;
  const auto resumed = run(point(3, dir, true), nullptr, false, &texts);  // steps 1 and 2
  EXPECT_EQ(resumed.size(), 2u);
  if (world_rank() == 0) EXPECT_EQ(texts["resume_path"], "same mesh");
  if (resumed.size() == 2 && straight.size() == 3)
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(resumed[i], straight[1 + i]) << "step " << 1 + i
                                             << ": hybrid compression state must survive";
  // Now at step 3: resuming with steps = 3 (or fewer) has nothing left to train.
  for (std::int64_t steps : {2, 3}) {
    std::string err;
    const auto losses = run(point(steps, dir, true), &err);
    EXPECT_TRUE(losses.empty()) << steps;
    EXPECT_NE(err.find(fmt::format("is at step 3, and this point asks for steps = {}, so there "
                                   "is nothing left to train; raise steps above 3", steps)),
              std::string::npos) << err;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir), fs::remove_all(straight_dir);
}

TEST(TrainResume, TensorParallelResumesOnTheSameMesh) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "mesh.tp = 2 needs an even world";
  const std::string dir = shared_tmpdir() + "_tp", straight_dir = dir + "_straight";
  auto tp = [](sb::Point p) {
    p.set("mesh.tp", std::int64_t{2});
    p.set("mesh.dp_shard", std::int64_t{world_size() / 2});
    p.set("tp_sequence_parallel", true);
    p.set("batch", std::int64_t{8});
    return p;
  };
  const auto straight = run(tp(point(3, straight_dir, false)));
  EXPECT_EQ(straight.size(), 3u);
  EXPECT_EQ(run(tp(point(3, dir, false)), nullptr, /*stop_early=*/true).size(), 1u);
  const auto resumed = run(tp(point(3, dir, true)));
  EXPECT_EQ(resumed.size(), 2u);
  if (resumed.size() == 2 && straight.size() == 3)
    for (int i = 0; i < 2; ++i) EXPECT_EQ(resumed[i], straight[1 + i]) << "step " << 1 + i;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir), fs::remove_all(straight_dir);
}

TEST(TrainResume, PipelineResumesOnTheSameMesh) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "mesh.pp = 2 needs an even world";
  const std::string dir = shared_tmpdir() + "_pp", straight_dir = dir + "_straight";
  auto pp = [](sb::Point p) {
    p.set("mesh.pp", std::int64_t{2});
    p.set("mesh.dp_shard", std::int64_t{world_size() / 2});
    p.set("microbatches", std::int64_t{2});
    p.set("batch", std::int64_t{8});
    return p;
  };
  const auto straight = run(pp(point(3, straight_dir, false)));
  EXPECT_EQ(straight.size(), 3u);
  EXPECT_EQ(run(pp(point(3, dir, false)), nullptr, /*stop_early=*/true).size(), 1u);
  const auto resumed = run(pp(point(3, dir, true)));
  EXPECT_EQ(resumed.size(), 2u);
  if (resumed.size() == 2 && straight.size() == 3)
    for (int i = 0; i < 2; ++i) EXPECT_EQ(resumed[i], straight[1 + i]) << "step " << 1 + i;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir), fs::remove_all(straight_dir);
}

// resume = true with no committed checkpoint yet (a point's first run, later requeued) starts
// at step 0: the same losses as a run without resume, and the result says so.
TEST(TrainResume, WithoutACheckpointYetStartsAtStepZero) {
  const std::string dir = shared_tmpdir() + "_fresh", plain_dir = dir + "_plain";
  const auto plain = run(point(2, plain_dir, false));
  const auto fresh = run(point(2, dir, true));
  EXPECT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh, plain);
  // It saved at the end, so the next resume continues from step 2.
  std::string err;
  run(point(2, dir, true), &err);
  EXPECT_NE(err.find("is at step 2"), std::string::npos) << err;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir), fs::remove_all(plain_dir);
}

// The mesh a set is resumed on need not be the one that wrote it (torch.distributed.
// checkpoint's resharding): (dp N/2, tp 2) -> (dp N) and -> (pp 2, dp N/2), fp32, no
// compression; the losses are the uninterrupted run's within fp32 reduction order. Exported
// offline, the tp set, a pp set and a dp set of the same step hold the same model, and the tp
// and pp runs' own exports (export_safetensors) are their sets' offline exports; the pp set
// resumes under zero1 (each rank reading only its stage's files) as the straight run goes on.
TEST(TrainResume, ASetFromOneMeshResumesOnAnother) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "mesh.tp = 2 needs an even world";
  const std::string dir = shared_tmpdir() + "_mesh", straight_dir = dir + "_straight";
  auto base = [](sb::Point p) {
    p.set("compression", std::string("none"));
    p.set("batch", std::int64_t{8});
    p.set("model", std::string("gpt2-tiny"));
    return p;
  };
  auto tp = [&](sb::Point p) {
    p = base(p);
    p.set("mesh.tp", std::int64_t{2});
    p.set("mesh.dp_shard", std::int64_t{world_size() / 2});
    return p;
  };
  auto dp = [&](sb::Point p) {
    p = base(p);
    p.set("mesh.dp_shard", std::int64_t{world_size()});
    return p;
  };
  auto pp = [&](sb::Point p) {
    p = base(p);
    p.set("mesh.pp", std::int64_t{2});
    p.set("mesh.dp_shard", std::int64_t{world_size() / 2});
    p.set("microbatches", std::int64_t{2});
    return p;
  };
  const auto straight = run(tp(point(3, straight_dir, false)));
  EXPECT_EQ(straight.size(), 3u);
  EXPECT_EQ(run(tp(point(3, dir, false)), nullptr, /*stop_early=*/true).size(), 1u);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::copy(dir, dir + "_b", fs::copy_options::recursive);
  MPI_Barrier(MPI_COMM_WORLD);
  std::map<std::string, std::string> texts;
  const auto on_dp = run(dp(point(3, dir, true)), nullptr, false, &texts);
  const auto on_pp = run(pp(point(3, dir + "_b", true)));
  ASSERT_EQ(straight.size(), 3u);
  for (const auto* resumed : {&on_dp, &on_pp}) {
    EXPECT_EQ(resumed->size(), 2u);
    for (std::size_t i = 0; i < 2 && i < resumed->size(); ++i)
      EXPECT_NEAR((*resumed)[i], straight[1 + i], 1e-5 * std::abs(straight[1 + i]))
          << (resumed == &on_dp ? "dp" : "pp") << " step " << 1 + i;
  }
  if (world_rank() == 0) {
    EXPECT_EQ(texts["resharded_from"], fmt::format("{} ranks, full_shard, sharding groups of {}",
                                                   world_size(), world_size() / 2));
    EXPECT_EQ(texts["resume_path"], "assembled reshard");  // tp 2 -> tp 1
  }
  // One step on each mesh, saved, exported offline: the same model (fp32 reduction order).
  std::vector<std::string> sets;
  for (const auto& [name, mesh] : std::vector<std::pair<std::string, std::function<sb::Point(sb::Point)>>>{
           {"tp", tp}, {"pp", pp}, {"dp", dp}}) {
    sets.push_back(dir + "_one_" + name);
    sb::Point p = mesh(point(3, sets.back(), false));
    p.set("export_safetensors", sets.back() + ".in-run.safetensors");  // any mesh exports
    EXPECT_EQ(run(p, nullptr, true).size(), 1u);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    auto model = sb::models::make_model("gpt2-tiny");
    const auto ref = sb::fsdp::read_checkpoint_params(sets.back(), *model);
    for (std::size_t i = 0; i + 1 < sets.size(); ++i) {
      const std::string out = sets[i] + ".safetensors";
      sb::fsdp::export_checkpoint(sets[i], *model, out);
      sb::data::CheckpointLoadOptions strict;
      strict.init_missing_heads = false;
      const auto offline = sb::data::load_checkpoint(*model, out, strict);
      EXPECT_LE(max_param_diff(offline, ref), 2e-5) << sets[i];
      const auto in_run = sb::data::load_checkpoint(*model, sets[i] + ".in-run.safetensors", strict);
      EXPECT_EQ(max_param_diff(in_run, offline), 0.0) << sets[i] << ": the run's own export";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The pp set resumed on (pp 2) under another strategy: each rank reads only the files that
  // hold its stage (and rank 0's), and trains on as the straight run.
  sb::Point again = pp(point(3, sets[1], true));
  again.set("strategy", std::string("zero1"));
  const auto on_zero1 = run(again, nullptr, false, &texts);
  EXPECT_EQ(on_zero1.size(), 2u);
  if (world_rank() == 0) EXPECT_EQ(texts["resume_path"], "streamed reshard");  // the tp layout kept
  for (std::size_t i = 0; i < 2 && i < on_zero1.size(); ++i)
    EXPECT_NEAR(on_zero1[i], straight[1 + i], 1e-5 * std::abs(straight[1 + i])) << "pp zero1 step " << 1 + i;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    for (const auto& d : {dir, dir + "_b", straight_dir}) fs::remove_all(d);
    for (const auto& d : sets)
      fs::remove_all(d), fs::remove(d + ".safetensors"), fs::remove(d + ".in-run.safetensors");
  }
}

// What cannot be resharded (the compression state of the old shards: hybrid's error-feedback
// residuals and generators) is reset on another layout, and the result says so.
TEST(TrainResume, CompressionStateIsResetOnAnotherLayoutAndTheResultSaysSo) {
  const std::string dir = shared_tmpdir() + "_reset";
  EXPECT_EQ(run(point(3, dir, false), nullptr, /*stop_early=*/true).size(), 1u);  // hybrid
  sb::Point p = point(3, dir, true);
  p.set("strategy", std::string("zero1"));
  std::map<std::string, std::string> texts;
  EXPECT_EQ(run(p, nullptr, false, &texts).size(), 2u);
  if (world_rank() == 0) {
    EXPECT_EQ(texts["resharded_from"], fmt::format("{} ranks, full_shard, sharding groups of {}",
                                                   world_size(), world_size()));
    EXPECT_NE(texts["resume_warning"].find("was reset"), std::string::npos)
        << texts["resume_warning"];
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

}  // namespace
