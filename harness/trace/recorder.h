// Rank-local collection of a point's records. Appending is a vector push (no I/O, no MPI),
// so tracing does not slow a step; gather() moves everything to rank 0 after the run.
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <mpi.h>

#include "harness/trace/records.h"

namespace sb {

class Recorder {
 public:
  void step(const StepRecord& r) { add(r); }
  void comm(const CommEvent& e) { add(e); }
  void memory(const RankMemory& m) { add(m); }
  void query(const QueryRecord& q) { add(q); }
  // Any record type of RecordTypes, for code generated from the tables (readers, gather).
  template <class Rec>
  void add(const Rec& r) { std::get<std::vector<Rec>>(tables_).push_back(r); }
  template <class Rec>
  const std::vector<Rec>& rows() const { return std::get<std::vector<Rec>>(tables_); }
  // Scalar results: "final_eval_loss", "mlm_accuracy", "model_bytes", ... (documented per workload).
  void scalar(const std::string& name, double v) { scalars_[name] = v; }
  // Named series: "eval_loss" per eval, "loss_per_microstep", ...
  void series(const std::string& name, double v) { series_[name].push_back(v); }
  void text(const std::string& name, const std::string& v) { texts_[name] = v; }

  const std::vector<StepRecord>& steps() const { return rows<StepRecord>(); }
  const std::vector<CommEvent>& comm_events() const { return rows<CommEvent>(); }
  const std::vector<RankMemory>& memories() const { return rows<RankMemory>(); }
  const std::vector<QueryRecord>& queries() const { return rows<QueryRecord>(); }
  const std::map<std::string, double>& scalars() const { return scalars_; }
  const std::map<std::string, std::vector<double>>& all_series() const { return series_; }
  const std::map<std::string, std::string>& texts() const { return texts_; }

  // Collective over comm: afterwards rank 0 holds every rank's records of the types whose
  // Table says from_every_rank (comm events, memory); steps, queries, scalars, series and
  // texts are rank 0's own.
  void gather(MPI_Comm comm);

 private:
  template <class... Rec>
  static std::tuple<std::vector<Rec>...> tables_of(RecordList<Rec...>);
  decltype(tables_of(RecordTypes{})) tables_;  // one vector per record type
  std::map<std::string, double> scalars_;
  std::map<std::string, std::vector<double>> series_;
  std::map<std::string, std::string> texts_;
};

}  // namespace sb
