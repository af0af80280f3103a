// Serving metrics from a run's requests and steps (formulas: docs/METRICS.md, "Serving").
#pragma once
#include <map>
#include <string>
#include <vector>

#include "harness/trace/records.h"
#include "workloads/serve/server.h"

namespace sb::serve {

struct Slo {
  double ttft_s = 1, tpot_s = 0.2;
};

std::vector<RequestRecord> request_records(const std::vector<RequestSpec>& specs,
                                           const ServeResult& r, const Slo& slo);
ServeStepRecord step_record(const StepStats& s);
// Every gap between two consecutive tokens of one request (inter-token latency), all requests.
std::vector<double> inter_token_gaps(const ServeResult& r);
// Percentiles (p50, p90, p99) of ttft, tpot, itl, e2e and queue time over served requests;
// throughput, SLO attainment, batch sizes, KV bytes, scheduling overhead.
std::map<std::string, double> summarize(const std::vector<RequestSpec>& specs, const ServeResult& r,
                                        const std::vector<RequestRecord>& rows);

}  // namespace sb::serve
