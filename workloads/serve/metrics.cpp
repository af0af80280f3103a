// Serving metrics (metrics.h; docs/METRICS.md, "Serving").
#include "workloads/serve/metrics.h"

#include <algorithm>

#include "workloads/infer/loadgen.h"

namespace sb::serve {

std::vector<RequestRecord> request_records(const std::vector<RequestSpec>& specs,
                                           const ServeResult& r, const Slo& slo) {
  std::vector<RequestRecord> out;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    const auto& q = r.requests.at(i);
    RequestRecord row;
    row.request = s.id;
    row.arrival_s = s.arrival_s;
    row.prompt_tokens = s.prompt_len;
    row.refused = q.refused;
    if (!q.refused && !q.token_s.empty()) {
      const auto n = static_cast<std::int64_t>(q.token_s.size());
      row.output_tokens = n;
      row.queue_s = q.start_s - s.arrival_s;
      row.ttft_s = q.token_s.front() - s.arrival_s;
      row.e2e_s = q.token_s.back() - s.arrival_s;
      row.tpot_s = n > 1 ? (row.e2e_s - row.ttft_s) / static_cast<double>(n - 1) : 0.0;
      row.slo_met = row.ttft_s <= slo.ttft_s && row.tpot_s <= slo.tpot_s;
    }
    out.push_back(row);
  }
  return out;
}

ServeStepRecord step_record(const StepStats& s) {
  ServeStepRecord r;
  r.step = s.step;
  r.start_s = s.start_s, r.duration_s = s.duration_s(), r.schedule_s = s.schedule_s;
  r.prefill_s = s.prefill_s, r.decode_s = s.decode_s;
  r.prefill_requests = s.prefill_requests, r.prompt_tokens = s.prompt_tokens;
  r.prefill_tokens = s.prefill_tokens;
  r.decode_rows = s.decode_rows, r.running = s.running, r.waiting = s.waiting;
  r.kv_in_use_bytes = static_cast<std::uint64_t>(s.kv_in_use_bytes);
  return r;
}

std::vector<double> inter_token_gaps(const ServeResult& r) {
  std::vector<double> gaps;
  for (const auto& q : r.requests)
    for (std::size_t k = 1; k < q.token_s.size(); ++k) gaps.push_back(q.token_s[k] - q.token_s[k - 1]);
  return gaps;
}

std::map<std::string, double> summarize(const std::vector<RequestSpec>& specs, const ServeResult& r,
                                        const std::vector<RequestRecord>& rows) {
  std::map<std::string, double> m;
  std::vector<double> ttft, tpot, e2e, queue;
  double served = 0, refused = 0, met = 0, tokens = 0, first = 1e300, end = 0;
  for (const auto& row : rows) {
    if (row.refused) {
      ++refused;
      continue;
    }
    ++served;
    met += row.slo_met ? 1 : 0;
    tokens += static_cast<double>(row.output_tokens);
    ttft.push_back(row.ttft_s), e2e.push_back(row.e2e_s), queue.push_back(row.queue_s);
    if (row.output_tokens > 1) tpot.push_back(row.tpot_s);
    first = std::min(first, row.arrival_s);
    end = std::max(end, row.arrival_s + row.e2e_s);
  }
  const auto gaps = inter_token_gaps(r);
  auto percentiles = [&](const char* name, const std::vector<double>& v) {
    if (v.empty()) return;
    for (auto [q, tag] : {std::pair{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}})
      m[std::string(name) + "_" + tag + "_s"] = infer::quantile(v, q);
    double mean = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    m[std::string(name) + "_mean_s"] = mean;
  };
  percentiles("ttft", ttft), percentiles("tpot", tpot), percentiles("itl", gaps);
  percentiles("e2e", e2e), percentiles("queue", queue);
  m["requests_served"] = served;
  m["requests_refused"] = refused;
  m["slo_attainment"] = served + refused > 0 ? met / (served + refused) : 0.0;
  if (served > 0 && end > first) {
    m["duration_s"] = end - first;
    m["output_tokens_per_s"] = tokens / (end - first);
    m["requests_per_s"] = served / (end - first);
  }
  if (specs.size() > 1 && specs.back().arrival_s > specs.front().arrival_s)
    m["arrival_rate_measured"] =
        static_cast<double>(specs.size() - 1) / (specs.back().arrival_s - specs.front().arrival_s);
  double sched = 0, busy = 0, rows_decoded = 0, decode_s = 0, decode_steps = 0, kv_peak = 0, batch_max = 0;
  double prompt_tokens = 0, prefill_tokens = 0, prefills = 0, prefilled = 0;
  for (const auto& s : r.steps) {
    sched += s.schedule_s, busy += s.duration_s();
    if (s.prefill_requests > 0) {
      ++prefills;
      prefilled += static_cast<double>(s.prefill_requests);
      prompt_tokens += static_cast<double>(s.prompt_tokens);
      prefill_tokens += static_cast<double>(s.prefill_tokens);
    }
    if (s.decode_rows > 0) {
      rows_decoded += static_cast<double>(s.decode_rows);
      decode_s += s.decode_s;
      ++decode_steps;
      batch_max = std::max(batch_max, static_cast<double>(s.decode_rows));
    }
    kv_peak = std::max(kv_peak, static_cast<double>(s.kv_in_use_bytes));
  }
  m["steps"] = static_cast<double>(r.steps.size());
  if (busy > 0) m["schedule_overhead"] = sched / busy;
  if (decode_steps > 0) {
    m["decode_batch_mean"] = rows_decoded / decode_steps;
    m["decode_batch_max"] = batch_max;
    m["decode_rows_per_s"] = rows_decoded / decode_s;
  }
  if (prefills > 0) {
    m["prefill_batch_mean"] = prefilled / prefills;
    m["prefill_efficiency"] = prompt_tokens / prefill_tokens;  // real / computed positions
  }
  m["kv_bytes_peak"] = kv_peak;
  return m;
}

}  // namespace sb::serve
