// Typed configuration: each area declares its keys once, as the fields of a struct it owns
// (torchtitan's job config, in C++). A declaration names the key, its type (the member's),
// default, unit, doc, range, the tasks that read it and the section's cross-key rules; from it
// come the registered KeySpecs (so `shardbench keys`, docs/SUITES.md's table and the unknown-
// and ignored-key errors), the validator `plan` runs, and the one reader: config<S>(point)
// parses a point into S once and caches it in the point. Nothing else reads a key by string.
//
//   struct OptimConfig {
//     double lr = 0;
//     std::int64_t grad_accum = 1;
//     static void declare(sb::Fields<OptimConfig>& f) {
//       f.tasks({"train"});
//       f.add("lr", &OptimConfig::lr, 3e-4, "peak learning rate").min(0.0);
//       f.add("grad_accum", &OptimConfig::grad_accum, 1, "micro-batches per step").range(1, 4096);
//       f.validate([](const OptimConfig& c, const Point& p, std::vector<Diagnostic>& out) {...});
//     }
//   };
//   SB_CONFIG_SECTION(OptimConfig);            // in the area's .cpp: registers its keys
//   const auto& c = sb::config<OptimConfig>(ctx.point);
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <vector>

#include "harness/spec/point.h"
#include "harness/workload.h"

namespace sb {

// What an integer key left "auto" reads as until `shardbench fit` chooses it (fit.h): only
// keys a fit task varies accept "auto", and their points are validated after the choice.
inline constexpr std::int64_t kAutoInt = -1;

// One declared key, as its declaration is being written: chain the optional parts.
class KeyDecl {
 public:
  explicit KeyDecl(KeySpec& spec) : spec_(spec) {}
  // The values a suite may give, in the key's own type (an Int key's bounds are integers).
  template <class L, class H>
  KeyDecl& range(L lo, H hi) {
    if (spec_.type == KeyType::Int) spec_.min_int = std::int64_t(lo), spec_.max_int = std::int64_t(hi);
    else spec_.min_float = double(lo), spec_.max_float = double(hi);
    return *this;
  }
  template <class N>
  KeyDecl& min(N lo) {
    if (spec_.type == KeyType::Int) spec_.min_int = std::int64_t(lo);
    else spec_.min_float = double(lo);
    return *this;
  }
  KeyDecl& unit(std::string u) { spec_.unit = std::move(u); return *this; }
  KeyDecl& tasks(std::vector<std::string> t) { spec_.tasks = std::move(t); return *this; }
  // A Name key that also takes a path (a value with '/': a local model folder).
  KeyDecl& accepts_path() { spec_.accepts_path = true; return *this; }
  // A String key naming a file or folder the point writes (KeySpec::writes_path).
  KeyDecl& writes_path() { spec_.writes_path = true; return *this; }
  const std::string& key() const { return spec_.key; }

 private:
  KeySpec& spec_;
};

namespace config_detail {
// Type-erased section: its keys and its reader, for the cache in Point.
struct SectionBase {
  virtual ~SectionBase() = default;
};
// Reads one Value into a member of the declared C++ type (ranges were checked on read).
void assign(bool& out, const Value& v);
void assign(int& out, const Value& v);
void assign(std::int64_t& out, const Value& v);
void assign(double& out, const Value& v);
void assign(std::string& out, const Value& v);
Value to_value(bool v);
Value to_value(int v);
Value to_value(std::int64_t v);
Value to_value(double v);
Value to_value(const std::string& v);
Value to_value(const char* v);
template <class T> constexpr KeyType key_type() {
  if constexpr (std::is_same_v<T, bool>) return KeyType::Bool;
  else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::int64_t>) return KeyType::Int;
  else if constexpr (std::is_same_v<T, double>) return KeyType::Float;
  else return KeyType::String;
}
}  // namespace config_detail

template <class S> const S& config(const Point& p);
namespace config_detail {
bool point_task_in(const std::vector<std::string>& tasks, const Point& p);  // empty: every task
}

// The declaration of section S: every field bound to a member of S.
template <class S>
class Fields {
 public:
  // Tasks that read the section's keys from here on (empty: every task).
  void tasks(std::vector<std::string> t) { tasks_ = std::move(t); }

  // A key read into `member`; its type is the member's.
  template <class T, class D>
  KeyDecl add(const char* key, T S::*member, D def, const char* doc) {
    KeySpec& ks = specs_.emplace_back();
    ks.key = key, ks.type = config_detail::key_type<T>(), ks.doc = doc;
    ks.default_value = config_detail::to_value(static_cast<T>(def));
    ks.tasks = tasks_;
    readers_.push_back([member, k = std::string(key)](S& s, const Point& p) {
      config_detail::assign(s.*member, p.get(k));
    });
    return KeyDecl(ks);
  }
  // A key whose value is one of a registered name set (or a path, with accepts_path()).
  KeyDecl name(const char* key, std::string S::*member, const char* name_set, const char* def,
               const char* doc) {
    KeyDecl d = add(key, member, std::string(def), doc);
    specs_.back().type = KeyType::Name;
    specs_.back().name_set = name_set;
    return d;
  }
  // Cross-key rules of the section, run by `plan` on points of the section's tasks.
  void validate(std::function<void(const S&, const Point&, std::vector<Diagnostic>&)> v) {
    validators_.push_back(std::move(v));
  }

  // ---- used by config<S> and SB_CONFIG_SECTION --------------------------------------
  S read(const Point& p) const {
    S s{};
    for (const auto& r : readers_) r(s, p);
    return s;
  }
  void register_all() const {
    for (const KeySpec& ks : specs_) register_key(ks);
    for (const auto& v : validators_)
      register_validator([v, tasks = section_tasks()](const Point& p, std::vector<Diagnostic>& out) {
        if (config_detail::point_task_in(tasks, p)) v(config<S>(p), p, out);
      });
  }

 private:
  std::vector<std::string> section_tasks() const {
    std::vector<std::string> all;
    for (const KeySpec& ks : specs_) {
      if (ks.tasks.empty()) return {};
      all.insert(all.end(), ks.tasks.begin(), ks.tasks.end());
    }
    return all;
  }
  std::vector<std::string> tasks_;
  std::deque<KeySpec> specs_;  // deque: KeyDecl keeps a reference while the next is added
  std::vector<std::function<void(S&, const Point&)>> readers_;
  std::vector<std::function<void(const S&, const Point&, std::vector<Diagnostic>&)>> validators_;
};

// The one declaration of S (built on first use from S::declare).
template <class S>
const Fields<S>& fields() {
  static const Fields<S> f = [] {
    Fields<S> d;
    S::declare(d);
    return d;
  }();
  return f;
}

// S read from the point: parsed on first use, then cached in the point (a copy of a point
// shares the cache until either is changed).
template <class S>
const S& config(const Point& p) {
  if (const void* c = p.section(typeid(S))) return *static_cast<const S*>(c);
  p.keep_section(typeid(S), std::make_shared<const S>(fields<S>().read(p)));
  return *static_cast<const S*>(p.section(typeid(S)));
}

// Registers S's keys and validators at static-init time (one line in the area's .cpp).
#define SB_CONFIG_SECTION(S) \
  static const ::sb::Registrar sb_config_section_##S([] { ::sb::fields<S>().register_all(); })

}  // namespace sb
