// "continuous": iteration-level scheduling (Orca; Flover's temporal fusion). At every step
// finished requests have already left (the server frees their rows) and waiting ones join
// while rows are free. The rule for interleaving prefill with decode: a step first prefills
// the requests it admits, in arrival order, as long as their prompts total at most
// max_prefill_tokens (always at least one), then decodes every request that was running
// before it. The budget bounds how long one step stalls the running requests' next tokens.
#include <algorithm>

#include "harness/workload.h"
#include "workloads/serve/policy.h"

namespace sb::serve {
namespace {

class Continuous final : public Policy {
 public:
  explicit Continuous(const PolicyConfig& c) : c_(c) {}
  std::string name() const override { return "continuous"; }
  Decision decide(const ServerView& v) const override {
    Decision d;
    const std::int64_t cap = std::min(v.free_rows, c_.max_batch - v.running);
    std::int64_t tokens = 0;
    for (auto id : *v.waiting) {
      if (d.admit >= cap) break;
      tokens += (*v.requests)[id].prompt_len;
      if (d.admit > 0 && tokens > c_.max_prefill_tokens) break;
      ++d.admit;
    }
    return d;
  }
  bool batch_runs_to_completion() const override { return false; }

 private:
  PolicyConfig c_;
};

const sb::Registrar kRegister([] {
  register_policy("continuous",
                  "iteration-level batching: requests join and leave the running batch at every "
                  "step; admitted prompts (up to max_prefill_tokens) prefill before the step's decode",
                  [](const PolicyConfig& c) -> std::unique_ptr<Policy> { return std::make_unique<Continuous>(c); });
});

}  // namespace
}  // namespace sb::serve
