#include "harness/launch/sweep_eta.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "harness/spec/point.h"
#include "harness/trace/result.h"

namespace sb {
namespace {
// Keys that change how long a point runs or which repetition it is, not what a step costs.
const char* const kLengthKeys[] = {"steps", "warmup", "eval_every", "repetition", "seed",
                                   "time_limit", "resume", "checkpoint_dir", "queries"};

double steps_of(const Point& p) {
  double n = p.has("steps") ? double(p.get_int("steps")) : 1.0;
  if (p.has("warmup")) n += double(p.get_int("warmup"));
  return std::max(1.0, n);
}
}  // namespace

std::string SweepEta::shape_of(const Point& p) {
  auto j = nlohmann::json::parse(p.canonical(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return p.canonical();
  for (const char* k : kLengthKeys) j.erase(k);
  return j.dump();
}

void SweepEta::record(const Point& p, double seconds) {
  sec_per_step_[shape_of(p)] = seconds / steps_of(p);
}

int SweepEta::learn(const std::vector<const Point*>& points, const std::string& dir) {
  int n = 0;
  for (const Point* p : points) {
    const ResultSummary s = read_result_summary(result_path(dir, p->index, p->id));
    if (s.exists && s.status == "done" && s.elapsed_s > 0) record(*p, s.elapsed_s), ++n;
  }
  return n;
}

double SweepEta::predict(const Point& p) const {
  if (sec_per_step_.empty()) return -1;
  const auto it = sec_per_step_.find(shape_of(p));
  if (it != sec_per_step_.end()) return it->second * steps_of(p);
  std::vector<double> v;
  for (const auto& [shape, s] : sec_per_step_) v.push_back(s);
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2] * steps_of(p);
}

double SweepEta::remaining(const std::vector<const Point*>& pending) const {
  if (sec_per_step_.empty()) return -1;
  double total = 0;
  for (const Point* p : pending) total += predict(*p);
  return total;
}

}  // namespace sb
