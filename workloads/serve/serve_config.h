// The serve task's keys, typed (harness/spec/config.h), declared in serve_workload.cpp with
// their cross-key rules: how requests arrive, how they are batched and sampled, the KV cache's
// bound and the SLO.
#pragma once
#include <cstdint>
#include <string>

namespace sb {
template <class S> class Fields;
}

namespace sb::serve {

struct ServeKeys {
  std::string serve_policy;  // sequential, static, continuous
  std::string arrival;       // poisson, offline, trace
  double request_rate = 0;   // requests per second (poisson)
  std::int64_t requests = 0;
  std::int64_t prompt_len_min = 0, prompt_len_max = 0, output_len_min = 0, output_len_max = 0;
  std::string request_trace;  // arrival = trace: JSONL
  double max_queue_delay_ms = 0;
  std::int64_t max_prefill_tokens = 0;
  std::int64_t kv_cache_bytes = 0;  // 0 = batch rows
  double temperature = 0;
  std::int64_t top_k = 0, eos_token = -1;
  double slo_ttft_ms = 0, slo_tpot_ms = 0;
  static void declare(Fields<ServeKeys>& f);
};

}  // namespace sb::serve
