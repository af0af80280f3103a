// Rank-local collection of a point's records. Appending is a vector push (no I/O, no MPI),
// so tracing does not slow a step; gather() moves everything to rank 0 after the run.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/trace/records.h"

namespace sb {

class Recorder {
 public:
  void step(const StepRecord& r) { steps_.push_back(r); }
  void comm(const CommEvent& e) { comm_.push_back(e); }
  void memory(const RankMemory& m) { memory_.push_back(m); }
  void query(const QueryRecord& q) { queries_.push_back(q); }
  // Scalar results: "final_eval_loss", "mlm_accuracy", "model_bytes", ... (documented per workload).
  void scalar(const std::string& name, double v) { scalars_[name] = v; }
  // Named series: "eval_loss" per eval, "loss_per_microstep", ...
  void series(const std::string& name, double v) { series_[name].push_back(v); }
  void text(const std::string& name, const std::string& v) { texts_[name] = v; }

  const std::vector<StepRecord>& steps() const { return steps_; }
  const std::vector<CommEvent>& comm_events() const { return comm_; }
  const std::vector<RankMemory>& memories() const { return memory_; }
  const std::vector<QueryRecord>& queries() const { return queries_; }
  const std::map<std::string, double>& scalars() const { return scalars_; }
  const std::map<std::string, std::vector<double>>& all_series() const { return series_; }
  const std::map<std::string, std::string>& texts() const { return texts_; }

  // Collective over comm: afterwards rank 0 holds every rank's comm events and memory
  // records (steps, queries, scalars, series and texts are rank 0's own).
  void gather(MPI_Comm comm);

 private:
  std::vector<StepRecord> steps_;
  std::vector<CommEvent> comm_;
  std::vector<RankMemory> memory_;
  std::vector<QueryRecord> queries_;
  std::map<std::string, double> scalars_;
  std::map<std::string, std::vector<double>> series_;
  std::map<std::string, std::string> texts_;
};


}  // namespace sb
