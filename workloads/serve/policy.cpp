// The policy registry (policy.h).
#include "workloads/serve/policy.h"

#include <map>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::serve {
namespace {

std::map<std::string, PolicyFactory>& factories() {
  static std::map<std::string, PolicyFactory> m;
  return m;
}

}  // namespace

void register_policy(const std::string& name, const std::string& doc, PolicyFactory make) {
  factories()[name] = make;
  register_name("serve_policy", name, doc);
}

std::unique_ptr<Policy> make_policy(const std::string& name, const PolicyConfig& c) {
  auto it = factories().find(name);
  SB_CHECK(it != factories().end(), "serve_policy '{}' is unknown (`shardbench keys` lists them)", name);
  SB_CHECK(c.max_batch >= 1, "serve: batch (the most requests at once) must be >= 1, got {}", c.max_batch);
  return it->second(c);
}

}  // namespace sb::serve
