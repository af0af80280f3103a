// The non-template parts of typed configuration (config.h): value conversion and the
// per-point cache of parsed sections.
#include "harness/spec/config.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "harness/core/check.h"

namespace sb {

// Held by Point (point.h); a mutex because the communication thread may read a section too.
struct PointCache {
  std::mutex mu;
  std::map<std::type_index, std::shared_ptr<const void>> sections;
};

namespace config_detail {

void assign(bool& out, const Value& v) { out = std::get<bool>(v); }
// Int keys are range-checked against the member's type when the suite is read (KeySpec's
// default int range), so the narrowing is safe.
// "auto": an integer key fit has yet to choose (kAutoInt; the suite reader accepts it only
// for such keys).
std::int64_t int_of(const Value& v) {
  if (auto* s = std::get_if<std::string>(&v); s && *s == "auto") return kAutoInt;
  return std::get<std::int64_t>(v);
}
void assign(int& out, const Value& v) { out = static_cast<int>(int_of(v)); }
void assign(std::int64_t& out, const Value& v) { out = int_of(v); }
void assign(double& out, const Value& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) out = double(*i);
  else out = std::get<double>(v);
}
void assign(std::string& out, const Value& v) { out = std::get<std::string>(v); }

Value to_value(bool v) { return v; }
Value to_value(int v) { return std::int64_t{v}; }
Value to_value(std::int64_t v) { return v; }
Value to_value(double v) { return v; }
Value to_value(const std::string& v) { return v; }
Value to_value(const char* v) { return std::string(v); }

bool point_task_in(const std::vector<std::string>& tasks, const Point& p) {
  if (tasks.empty()) return true;
  const std::string& task = p.get_string("task");
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

}  // namespace config_detail

namespace {
std::mutex& cache_creation() {
  static std::mutex m;
  return m;
}
}  // namespace

const void* Point::section(std::type_index t) const {
  std::shared_ptr<PointCache> c;
  {
    std::lock_guard<std::mutex> lock(cache_creation());
    c = cache_;
  }
  if (!c) return nullptr;
  std::lock_guard<std::mutex> lock(c->mu);
  auto it = c->sections.find(t);
  return it == c->sections.end() ? nullptr : it->second.get();
}

void Point::keep_section(std::type_index t, std::shared_ptr<const void> s) const {
  std::shared_ptr<PointCache> c;
  {
    std::lock_guard<std::mutex> lock(cache_creation());
    if (!cache_) cache_ = std::make_shared<PointCache>();
    c = cache_;
  }
  std::lock_guard<std::mutex> lock(c->mu);
  c->sections.emplace(t, std::move(s));  // a racing reader's copy is equal: keep the first
}

}  // namespace sb
