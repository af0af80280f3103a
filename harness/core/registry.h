// One registry for every kind of variant (strategies, compressors, families, quantizers,
// attention kernels, pruners, serving policies, backends, schedulers, launchers, tasks, ...):
// a name maps to a record of what the variant is and can do (Info), which callers ask instead
// of comparing names. A duplicate name fails at start-up (two files claiming one name is a
// build mistake, not something to resolve by link order); an unknown name is an error listing
// the known ones. Registries are function-local statics, filled at static-init time.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb {

template <class Info>
class Registry {
 public:
  // what: the kind of variant in messages ("sharding strategy"). name_set: the harness name set
  // the names join (so a Name key of that set accepts exactly them); "" for none.
  Registry(std::string what, std::string name_set = "")
      : what_(std::move(what)), name_set_(std::move(name_set)) {}

  void add(const std::string& name, std::string doc, Info info) {
    SB_CHECK(!name.empty(), "registering a {} without a name", what_);
    auto [it, fresh] = entries_.try_emplace(name, Entry{std::move(doc), std::move(info)});
    SB_CHECK(fresh, "{} '{}' is registered twice (two files claim the name): rename one",
             what_, name);
    if (!name_set_.empty()) register_name(name_set_, name, it->second.doc);
  }

  const Info* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.info;
  }
  // Unknown name: sb::Error naming the kind and listing the known names.
  const Info& get(const std::string& name) const {
    if (const Info* i = find(name)) return *i;
    SB_FAIL("unknown {} '{}'; known: {}", what_, name, known());
  }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  const std::string& doc(const std::string& name) const { return entries_.at(name).doc; }
  std::vector<std::string> names() const {  // sorted
    std::vector<std::string> out;
    for (const auto& [n, e] : entries_) out.push_back(n);
    return out;
  }
  std::string known() const {
    std::string s;
    for (const auto& [n, e] : entries_) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "(none registered)" : s;
  }
  // (name, record) pairs in name order.
  template <class F>
  void each(F&& f) const {
    for (const auto& [n, e] : entries_) f(n, e.info);
  }
  const std::string& what() const { return what_; }

 private:
  struct Entry {
    std::string doc;
    Info info;
  };
  std::string what_, name_set_;
  std::map<std::string, Entry> entries_;
};

}  // namespace sb
