// The model family registry (family.h).
#include "workloads/models/family.h"

#include <algorithm>
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
  SB_CHECK(f.make && f.hf_name && f.hf_skip && !f.eval_metric.empty() &&
               !f.hf_model_types.empty() && f.hf_read_config && f.hf_write_config,
           "model family '{}' registered without its factory, name map, skip list, metric, "
           "model_type or config.json reader and writer", f.name);
  if (!f.hf_transposed) f.hf_transposed = [](const std::string&) { return false; };
  if (!f.hf_optional) f.hf_optional = [](const std::string&) { return false; };
  SB_CHECK(!registry().count(f.name), "model family '{}' registered twice", f.name);
  // config.json names its family by model_type: one family per value.
  for (const auto& type : f.hf_model_types) {
    const Family* other = family_reading(type);
    SB_CHECK(!other, "model families '{}' and '{}' both read config.json model_type '{}'",
             other ? other->name : "", f.name, type);
  }
  const std::string name = f.name;
  registry().emplace(name, std::move(f));
}

const Family& family(const std::string& name) {
  const auto it = registry().find(name);
  if (it == registry().end())
    SB_FAIL("unknown model family '{}'; known: {}", name, fmt::join(family_names(), ", "));
  return it->second;
}

const Family* family_reading(const std::string& model_type) {
  for (const auto& [name, f] : registry())
    if (std::find(f.hf_model_types.begin(), f.hf_model_types.end(), model_type) !=
        f.hf_model_types.end())
      return &f;
  return nullptr;
}

std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const auto& [name, f] : registry()) n.push_back(name);
  return n;
}

}  // namespace sb::models
