// "sequential": one request at a time, in arrival order: the floor the others are measured
// against.
#include "harness/workload.h"
#include "workloads/serve/policy.h"

namespace sb::serve {
namespace {

class Sequential final : public Policy {
 public:
  std::string name() const override { return "sequential"; }
  Decision decide(const ServerView& v) const override {
    Decision d;
    if (v.running == 0 && !v.waiting->empty() && v.free_rows > 0) d.admit = 1;
    return d;
  }
  bool batch_runs_to_completion() const override { return true; }
  std::int64_t max_running() const override { return 1; }
};

const sb::Registrar kRegister([] {
  register_policy("sequential", "one request at a time, in arrival order",
                  [](const PolicyConfig&) -> std::unique_ptr<Policy> { return std::make_unique<Sequential>(); });
});

}  // namespace
}  // namespace sb::serve
