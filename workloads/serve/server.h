// The serving loop: requests arrive (requests.h), a policy (policy.h) admits them, and an
// executor runs the model on rows of a KV cache. Model-agnostic: the executor is the model.
//
// Time is a virtual clock: arrivals come from the request list, and the clock advances by the
// measured wall time of each step (scheduling, prefill, decode) or jumps to the next arrival
// when the server is idle. So latencies include queueing and every step's real cost, and the
// run never sleeps through idle time (as LoadGen's server scenario, workloads/infer/loadgen.h).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "workloads/serve/policy.h"
#include "workloads/serve/requests.h"

namespace sb::serve {

// The model side. A request in the running batch owns one KV row; the rows in use are always
// [0, n): when a request leaves from the middle, the last row moves into its place (Flover's
// memory shuffle), so a step attends over one contiguous block of rows.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::int64_t rows() const = 0;          // KV rows (the most requests at once)
  virtual std::int64_t row_capacity() const = 0;  // tokens a row holds (prompt + output)
  virtual std::int64_t kv_bytes_per_token() const = 0;  // all layers, keys and values
  // What the KV cache allocates: rows x row_capacity x kv_bytes_per_token (0 without one).
  std::int64_t cache_bytes() const { return rows() * row_capacity() * kv_bytes_per_token(); }
  // Prefills requests into rows [first, first + n) (n = requests.size()): their first tokens.
  virtual std::vector<std::int64_t> prefill(std::int64_t first,
                                            const std::vector<std::int64_t>& requests) = 0;
  // One decode step of rows [0, n): row r holds lengths[r] tokens and feeds last[r]; request
  // ids per row (-1: padding, whose token is discarded). Returns each row's next token.
  virtual std::vector<std::int64_t> decode(const std::vector<std::int64_t>& requests,
                                           const std::vector<std::int64_t>& last,
                                           const std::vector<std::int64_t>& lengths) = 0;
  // Row `from` (holding `length` tokens) moves to row `to`.
  virtual void move_row(std::int64_t from, std::int64_t to, std::int64_t length) = 0;
  // Token positions a prefill of prompts of these lengths computes: padded to the longest
  // (n x longest), unless the executor packs prompts into fewer rows.
  virtual std::int64_t prefill_cost(const std::vector<std::int64_t>& prompt_lens) const;
  // How prefill batches prompts, for the record ("padded", "packed"); "" where that is not a
  // choice (a decoder prefills each request into its own KV row).
  virtual std::string prefill_batching() const { return ""; }
};

struct ServerConfig {
  std::int64_t context = 1024;  // the model's positions: prompt + output above it is refused
  std::int64_t eos_token = -1;  // -1: requests end at their output length only
};

struct RequestResult {
  bool refused = false;  // prompt + output exceeds the context (or a KV row)
  double start_s = 0;    // prefill began (queue time = start_s - arrival_s)
  std::vector<double> token_s;        // when each output token was produced
  std::vector<std::int64_t> tokens;   // the output tokens
  bool done() const { return refused || !token_s.empty(); }
};

struct StepStats {
  std::int64_t step = 0;
  double start_s = 0, schedule_s = 0, prefill_s = 0, decode_s = 0;
  std::int64_t prefill_requests = 0;
  std::int64_t prompt_tokens = 0;   // the admitted prompts' tokens
  std::int64_t prefill_tokens = 0;  // token positions computed (Executor::prefill_cost)
  std::int64_t decode_rows = 0, running = 0, waiting = 0;
  std::int64_t kv_in_use_bytes = 0;  // tokens held in rows x kv_bytes_per_token
  double duration_s() const { return schedule_s + prefill_s + decode_s; }
};

struct ServeResult {
  std::vector<RequestResult> requests;  // by request id
  std::vector<StepStats> steps;
};

// Runs every request to completion (or refusal). `on_step` is called at the start of each
// step with its index (fault points, the stop flag); it may throw.
ServeResult run_server(const std::vector<RequestSpec>& requests, const Policy& policy,
                       Executor& ex, const ServerConfig& cfg,
                       const std::function<void(std::int64_t step)>& on_step = {});

}  // namespace sb::serve
