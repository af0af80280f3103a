// Plain result records. Workloads fill them; sinks (console, HDF5) consume them.
// Units are in the field names: _s seconds, _bytes bytes.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct StepRecord {  // one optimizer step (train) or one batch (infer); times are the slowest rank's
                    // (train, infer and micro all take the MAX over ranks before recording)
  std::int64_t step = 0;
  bool warmup = false;  // excluded from statistics
  double wall_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, comm_exposed_s = 0;
  double loss = 0, grad_norm = 0;
  double tokens_per_s = 0, samples_per_s = 0, mfu = 0;
};

struct CommEvent {  // one collective as seen by one rank
  std::int64_t step = 0;
  std::int32_t rank = 0;
  std::string op;     // all_gather, reduce_scatter, all_reduce, broadcast, all_to_all
  std::string group;  // world, shard, replica
  std::string kind;   // param_all_gather, grad_reduce_scatter, grad_all_reduce, other
  std::uint64_t logical_bytes = 0, wire_bytes = 0;
  double start_s = 0, duration_s = 0;  // start relative to the point's start
};

struct RankMemory {  // per rank, bytes
  std::int32_t rank = 0;
  std::string host;
  std::uint64_t param_bytes = 0, grad_bytes = 0, optim_bytes = 0, gathered_bytes = 0;
  std::uint64_t model_state_bytes = 0;       // between steps
  std::uint64_t peak_model_state_bytes = 0;  // within a step
  std::uint64_t peak_rss_bytes = 0;          // of the process (getrusage)
};

// This rank's identity (rank, host) and its process's peak resident memory now (getrusage);
// the caller adds what it owns (parameters, gradients, ...). The one place that reads them.
RankMemory rank_memory_now(int rank);

struct QueryRecord {  // inference: one query (MLPerf LoadGen vocabulary)
  std::string scenario;  // single-stream, multi-stream, server, offline
  std::int64_t query = 0;
  double issue_s = 0, latency_s = 0;
  std::int64_t samples = 0, tokens = 0;
};

}  // namespace sb
