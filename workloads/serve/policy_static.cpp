// "static": a Triton-style dynamic batcher. When the server is free it takes up to
// max_batch waiting requests as one batch, waiting at most max_queue_delay (from the oldest
// request's arrival) for the batch to fill; the batch then runs to completion: prompts padded
// to the longest, and finished requests decoded as padding until the longest one ends.
#include <algorithm>

#include "harness/workload.h"
#include "workloads/serve/policy.h"

namespace sb::serve {
namespace {

class Static final : public Policy {
 public:
  explicit Static(const PolicyConfig& c) : c_(c) {}
  std::string name() const override { return "static"; }
  Decision decide(const ServerView& v) const override {
    Decision d;
    if (v.running > 0 || v.waiting->empty()) return d;
    const std::int64_t cap = std::min(c_.max_batch, v.free_rows);
    const auto waiting = static_cast<std::int64_t>(v.waiting->size());
    const double deadline = (*v.requests)[v.waiting->front()].arrival_s + c_.max_queue_delay_s;
    // Full, out of time, or nothing more will come: go.
    if (waiting >= cap || v.now >= deadline || v.next_arrival_s == std::numeric_limits<double>::infinity())
      d.admit = std::min(waiting, cap);
    else
      d.wake_s = deadline;
    return d;
  }
  bool batch_runs_to_completion() const override { return true; }

 private:
  PolicyConfig c_;
};

const sb::Registrar kRegister([] {
  register_policy("static",
                  "dynamic batcher: up to batch requests, waiting up to max_queue_delay_ms; "
                  "the batch runs until its longest request ends",
                  [](const PolicyConfig& c) -> std::unique_ptr<Policy> { return std::make_unique<Static>(c); });
});

}  // namespace
}  // namespace sb::serve
