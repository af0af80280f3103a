// MLPerf LoadGen's four scenarios over a system under test that runs one batch of samples:
// the load generator decides which samples go together and when, the SUT only computes.
// Scenario names and metrics are the field's (SingleStream p90 latency, MultiStream
// per-query latency, Server latency under Poisson load incl. queueing, Offline samples/s).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sb::infer {

struct LoadgenConfig {
  std::string scenario = "single-stream";  // single-stream | multi-stream | server | offline
  std::int64_t queries = 32;               // queries issued (offline: 1 query of queries*spq samples)
  std::int64_t samples_per_query = 8;      // multi-stream / offline
  std::int64_t max_batch = 8;              // server and offline: most samples in one SUT call
  double target_qps = 10;                  // server: mean Poisson arrival rate
  std::uint64_t seed = 1;                  // server: arrival times
};

struct QueryResult {
  std::int64_t query = 0;
  double issue_s = 0, latency_s = 0;  // relative to the scenario's start; latency incl. queueing
  std::int64_t samples = 0;
};
struct BatchResult {
  std::int64_t samples = 0;
  double seconds = 0;  // SUT time of the call
};

// Runs `samples` consecutive samples starting at `first` (sample indices are global to the
// scenario, so the SUT can draw its inputs deterministically); returns its wall seconds.
using SystemUnderTest = std::function<double(std::int64_t first, std::int64_t samples)>;

struct ScenarioResult {
  std::vector<QueryResult> queries;
  std::vector<BatchResult> batches;
  double duration_s = 0;  // first issue to last completion
  std::int64_t samples = 0;
};

// Server runs on a virtual clock: arrivals are drawn ahead (exponential gaps), the SUT is
// one FIFO server that, when free, takes every query that has arrived (up to max_batch
// samples) as one batch; a batch's duration is the SUT's measured time. So latency includes
// queueing without the run idling until arrival times.
ScenarioResult run_scenario(const LoadgenConfig& cfg, const SystemUnderTest& sut);
std::vector<std::string> scenario_names();

// q-quantile (0..1) of v by linear interpolation between order statistics (numpy's default).
double quantile(std::vector<double> v, double q);

}  // namespace sb::infer
