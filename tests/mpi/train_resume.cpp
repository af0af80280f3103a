// The train task resuming from checkpoint_dir (issue 14): a point whose checkpoint is at or
// past its `steps` is refused with a message saying why and what to set (it used to report
// `done` with 0 steps and the longer run's loss), and a resumed point with hybrid compression
// records the same losses, bit for bit, as the point run straight through; so does a
// tensor-parallel point (mesh.tp = 2 with sequence parallelism, even worlds) and a pipelined
// one (mesh.pp = 2, 1f1b over 2 micro-batches, even worlds), resumed on the same mesh.
#include <filesystem>

#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"

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
std::vector<double> run(const sb::Point& p, std::string* error = nullptr, bool stop_early = false) {
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
  const auto resumed = run(point(3, dir, true));  // steps 1 and 2
  EXPECT_EQ(resumed.size(), 2u);
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

}  // namespace
