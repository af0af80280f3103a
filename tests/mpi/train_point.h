// What the one-file variant tests (fsdp_new_strategy.cpp, compress_new_compressor.cpp) share:
// a training point run by the registered train task on every rank, and the one-process
// reference trainer set up from the same point's AdamW keys, to compare its losses with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/core/progress.h"
#include "harness/core/stop_flag.h"
#include "harness/spec/point.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "workloads/data/training_source.h"
#include "workloads/models/model.h"
#include "workloads/train/reference_trainer.h"
#include "workloads/train/train_workload.h"

namespace sbtest {

struct NoProgress final : sb::Progress {
  void begin(const std::string&, long) override {}
  void step(long, const std::string&) override {}
  void end() override {}
};

// Runs point p with the train task on MPI_COMM_WORLD, recording into rec.
inline void run_train_point(const sb::Point& p, sb::Recorder& rec) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  NoProgress progress;
  sb::StopFlag stop;
  sb::RunContext ctx{p, MPI_COMM_WORLD, rank, size, rec, progress, stop};
  sb::find_task("train")->make()->run(ctx);
}

// The reference trainer's configuration for point p: its seed, AdamW and schedule.
inline sb::train::TrainConfig reference_config(const sb::Point& p) {
  sb::train::TrainConfig tc;
  tc.seed = static_cast<std::uint64_t>(p.get_int("seed"));
  tc.adamw = sb::train::adamw_config(p);
  return tc;
}

// The one-process trainer's loss at each step rec recorded, on the same model, global
// batches, weights and AdamW as point p.
inline std::vector<double> reference_losses(const sb::Point& p, const sb::Recorder& rec) {
  auto model = sb::models::make_model(p.get_string("model"));
  sb::train::ReferenceTrainer ref(*model, reference_config(p));
  const auto source = sb::data::training_source(p, model->config(), MPI_COMM_WORLD);
  std::vector<double> out;
  for (const auto& st : rec.steps()) out.push_back(ref.step({source->train(st.step)}).loss);
  return out;
}

}  // namespace sbtest
