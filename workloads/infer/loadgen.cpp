// The scenario drivers (see loadgen.h).
#include "workloads/infer/loadgen.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::infer {
namespace {

const sb::Registrar registrar([] {
  sb::register_name("scenario", "single-stream", "one 1-sample query at a time; p90 latency");
  sb::register_name("scenario", "multi-stream",
                    "one query of samples_per_query samples at a time; per-query latency");
  sb::register_name("scenario", "server",
                    "Poisson arrivals at target_qps, batched up to batch; latency incl. queueing");
  sb::register_name("scenario", "offline", "all samples at once in batches; samples/s");
});

// Back-to-back queries of `spq` samples each (single-stream: spq = 1).
ScenarioResult back_to_back(const LoadgenConfig& cfg, std::int64_t spq, const SystemUnderTest& sut) {
  ScenarioResult r;
  double now = 0;
  for (std::int64_t q = 0; q < cfg.queries; ++q) {
    const double s = sut(q * spq, spq);
    r.queries.push_back({q, now, s, spq});
    r.batches.push_back({spq, s});
    now += s;
  }
  r.duration_s = now;
  r.samples = cfg.queries * spq;
  return r;
}

ScenarioResult server(const LoadgenConfig& cfg, const SystemUnderTest& sut) {
  SB_CHECK(cfg.target_qps > 0, "server scenario: target_qps = {} must be > 0", cfg.target_qps);
  std::mt19937_64 rng(cfg.seed);
  std::exponential_distribution<double> gap(cfg.target_qps);
  std::vector<double> arrival(cfg.queries);
  double t = 0;
  for (auto& a : arrival) a = (t += gap(rng));
  ScenarioResult r;
  double free_at = 0;
  std::int64_t next = 0;
  while (next < cfg.queries) {
    const double start = std::max(free_at, arrival[next]);
    std::int64_t end = next;
    while (end < cfg.queries && arrival[end] <= start && end - next < cfg.max_batch) ++end;
    const double s = sut(next, end - next);  // one sample per server query
    for (auto q = next; q < end; ++q) r.queries.push_back({q, arrival[q], start + s - arrival[q], 1});
    r.batches.push_back({end - next, s});
    free_at = start + s;
    next = end;
  }
  r.duration_s = free_at - (arrival.empty() ? 0 : arrival[0]);
  r.samples = cfg.queries;
  return r;
}

ScenarioResult offline(const LoadgenConfig& cfg, const SystemUnderTest& sut) {
  ScenarioResult r;
  const std::int64_t total = cfg.queries * cfg.samples_per_query;
  double now = 0;
  for (std::int64_t first = 0; first < total; first += cfg.max_batch) {
    const std::int64_t n = std::min(cfg.max_batch, total - first);
    const double s = sut(first, n);
    r.batches.push_back({n, s});
    now += s;
  }
  r.queries.push_back({0, 0, now, total});
  r.duration_s = now;
  r.samples = total;
  return r;
}

}  // namespace

std::vector<std::string> scenario_names() { return {"multi-stream", "offline", "server", "single-stream"}; }

ScenarioResult run_scenario(const LoadgenConfig& cfg, const SystemUnderTest& sut) {
  SB_CHECK(cfg.queries >= 1, "scenario {}: queries = {} must be >= 1", cfg.scenario, cfg.queries);
  SB_CHECK(cfg.samples_per_query >= 1 && cfg.max_batch >= 1,
           "scenario {}: samples_per_query ({}) and batch ({}) must be >= 1", cfg.scenario,
           cfg.samples_per_query, cfg.max_batch);
  if (cfg.scenario == "single-stream") return back_to_back(cfg, 1, sut);
  if (cfg.scenario == "multi-stream") return back_to_back(cfg, cfg.samples_per_query, sut);
  if (cfg.scenario == "server") return server(cfg, sut);
  if (cfg.scenario == "offline") return offline(cfg, sut);
  std::string known;
  for (const auto& n : scenario_names()) known += (known.empty() ? "" : ", ") + n;
  SB_FAIL("unknown scenario \"{}\"; known: {}", cfg.scenario, known);
}

double quantile(std::vector<double> v, double q) {
  SB_CHECK(!v.empty(), "quantile of no values");
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace sb::infer
