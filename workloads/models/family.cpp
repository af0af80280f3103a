// The model family registry (family.h).
#include "workloads/models/family.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"

namespace sb::models {
namespace {
std::map<std::string, Family>& registry() {
  static std::map<std::string, Family> r;
  return r;
}
}  // namespace

void register_family(Family f) {
  SB_CHECK(f.make && f.hf_name && f.hf_skip && f.hf_transposed && !f.eval_metric.empty(),
           "model family '{}' registered without its factory, name map, skip list or metric",
           f.name);
  if (!f.hf_optional) f.hf_optional = [](const std::string&) { return false; };
  const std::string name = f.name;
  SB_CHECK(registry().emplace(name, std::move(f)).second, "model family '{}' registered twice",
           name);
}

const Family& family(const std::string& name) {
  const auto it = registry().find(name);
  if (it == registry().end())
    SB_FAIL("unknown model family '{}'; known: {}", name, fmt::join(family_names(), ", "));
  return it->second;
}

std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const auto& [name, f] : registry()) n.push_back(name);
  return n;
}

}  // namespace sb::models
