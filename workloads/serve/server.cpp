// The serving loop (server.h).
#include "workloads/serve/server.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "harness/core/check.h"

namespace sb::serve {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Row {
  std::int64_t id = 0;      // request
  std::int64_t length = 0;  // tokens in its KV row
  std::int64_t last = 0;    // the token the next decode feeds
  bool finished = false;    // static batching: decoded as padding until the batch ends
};

class Loop {
 public:
  Loop(const std::vector<RequestSpec>& reqs, const Policy& policy, Executor& ex,
       const ServerConfig& cfg)
      : reqs_(reqs), policy_(policy), ex_(ex), cfg_(cfg),
        longest_(std::min(cfg.context, ex.row_capacity())) {
    out_.requests.resize(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i)
      SB_CHECK(reqs[i].id == static_cast<std::int64_t>(i), "serve: request {} has id {}", i, reqs[i].id);
  }

  ServeResult run(const std::function<void(std::int64_t)>& on_step) {
    double clock = 0;
    for (std::int64_t step = 0;;) {
      arrive(clock);
      if (waiting_.empty() && rows_.empty()) {
        if (next_ >= reqs_.size()) break;
        clock = reqs_[next_].arrival_s;  // idle until the next arrival
        continue;
      }
      const auto t0 = Clock::now();
      ServerView v;
      v.now = clock, v.waiting = &waiting_, v.requests = &reqs_;
      v.running = static_cast<std::int64_t>(rows_.size());
      v.free_rows = ex_.rows() - v.running;
      if (next_ < reqs_.size()) v.next_arrival_s = reqs_[next_].arrival_s;
      const Decision d = policy_.decide(v);
      if (d.admit == 0 && rows_.empty()) {  // the policy waits (static: for a fuller batch)
        const double wake = std::min(d.wake_s, v.next_arrival_s);
        SB_CHECK(std::isfinite(wake) && wake > clock,
                 "serve policy '{}' admitted none of {} waiting requests with the server idle "
                 "and nothing to wait for (a bug in the policy)", policy_.name(), waiting_.size());
        clock = wake;
        continue;
      }
      SB_CHECK(d.admit >= 0 && d.admit <= static_cast<std::int64_t>(waiting_.size()) &&
                   d.admit <= v.free_rows,
               "serve policy '{}' admitted {} requests ({} waiting, {} rows free)", policy_.name(),
               d.admit, waiting_.size(), v.free_rows);
      if (on_step) on_step(step);
      StepStats s;
      s.step = step++;
      s.start_s = clock;
      std::vector<std::int64_t> admit(waiting_.begin(), waiting_.begin() + d.admit);
      waiting_.erase(waiting_.begin(), waiting_.begin() + d.admit);
      const std::size_t decoding = rows_.size();  // rows present before this step's prefill
      s.schedule_s = since(t0);
      if (!admit.empty()) prefill(admit, clock, s);
      if (decoding > 0) decode(decoding, clock, s);
      const auto t3 = Clock::now();
      s.kv_in_use_bytes = kv_bytes();
      leave();
      s.schedule_s += since(t3);
      s.running = static_cast<std::int64_t>(rows_.size());
      s.waiting = static_cast<std::int64_t>(waiting_.size());
      clock += s.duration_s();
      out_.steps.push_back(s);
    }
    return std::move(out_);
  }

 private:
  // Requests that have arrived by t join the queue; one that cannot fit is refused.
  void arrive(double t) {
    for (; next_ < reqs_.size() && reqs_[next_].arrival_s <= t; ++next_) {
      const auto& r = reqs_[next_];
      if (r.prompt_len + r.output_len > longest_)
        out_.requests[next_].refused = true;
      else
        waiting_.push_back(r.id);
    }
  }

  void emit(Row& row, std::int64_t token, double t) {
    auto& res = out_.requests[row.id];
    res.tokens.push_back(token);
    res.token_s.push_back(t);
    row.last = token;
    row.finished = static_cast<std::int64_t>(res.tokens.size()) == reqs_[row.id].output_len ||
                   token == cfg_.eos_token;
  }

  void prefill(const std::vector<std::int64_t>& admit, double clock, StepStats& s) {
    const auto t = Clock::now();
    const auto first = static_cast<std::int64_t>(rows_.size());
    const auto tokens = ex_.prefill(first, admit);
    s.prefill_s = since(t);
    const double at = clock + s.schedule_s + s.prefill_s;
    std::vector<std::int64_t> lens;
    for (std::size_t i = 0; i < admit.size(); ++i) {
      const auto& r = reqs_[admit[i]];
      out_.requests[r.id].start_s = clock + s.schedule_s;
      rows_.push_back({r.id, r.prompt_len, 0, false});
      emit(rows_.back(), tokens[i], at);
      lens.push_back(r.prompt_len);
      s.prompt_tokens += r.prompt_len;
    }
    s.prefill_requests = static_cast<std::int64_t>(admit.size());
    s.prefill_tokens = ex_.prefill_cost(lens);
  }

  void decode(std::size_t n, double clock, StepStats& s) {
    std::vector<std::int64_t> ids(n), last(n), lengths(n);
    for (std::size_t r = 0; r < n; ++r) {
      ids[r] = rows_[r].finished ? -1 : rows_[r].id;
      last[r] = rows_[r].last;
      lengths[r] = rows_[r].length;
    }
    const auto t = Clock::now();
    const auto tokens = ex_.decode(ids, last, lengths);
    s.decode_s = since(t);
    s.decode_rows = static_cast<std::int64_t>(n);
    const double at = clock + s.schedule_s + s.prefill_s + s.decode_s;
    for (std::size_t r = 0; r < n; ++r) {
      // A finished row (static padding) is computed but does not grow: it feeds the same
      // position again, so it never outgrows its KV row however long its batch runs.
      if (rows_[r].finished) continue;
      ++rows_[r].length;  // the fed token's keys are now cached
      emit(rows_[r], tokens[r], at);
    }
  }

  // Finished requests leave: continuous at once (the last row moves into the hole), static
  // when the whole batch has finished.
  void leave() {
    if (policy_.batch_runs_to_completion()) {
      if (std::all_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.finished; })) rows_.clear();
      return;
    }
    for (auto r = static_cast<std::int64_t>(rows_.size()) - 1; r >= 0; --r) {
      if (!rows_[r].finished) continue;
      const auto last = static_cast<std::int64_t>(rows_.size()) - 1;
      if (r != last) {
        ex_.move_row(last, r, rows_[last].length);
        rows_[r] = rows_[last];
      }
      rows_.pop_back();
    }
  }

  std::int64_t kv_bytes() const {
    std::int64_t tokens = 0;
    for (const auto& r : rows_) tokens += r.length;
    return tokens * ex_.kv_bytes_per_token();
  }

  const std::vector<RequestSpec>& reqs_;
  const Policy& policy_;
  Executor& ex_;
  ServerConfig cfg_;
  std::int64_t longest_;  // most tokens a request may hold: prompt + output
  ServeResult out_;
  std::deque<std::int64_t> waiting_;
  std::vector<Row> rows_;
  std::size_t next_ = 0;  // next request to arrive
};

}  // namespace

std::int64_t Executor::prefill_cost(const std::vector<std::int64_t>& prompt_lens) const {
  std::int64_t longest = 0;
  for (auto l : prompt_lens) longest = std::max(longest, l);
  return static_cast<std::int64_t>(prompt_lens.size()) * longest;
}

ServeResult run_server(const std::vector<RequestSpec>& requests, const Policy& policy,
                       Executor& ex, const ServerConfig& cfg,
                       const std::function<void(std::int64_t step)>& on_step) {
  return Loop(requests, policy, ex, cfg).run(on_step);
}

}  // namespace sb::serve
