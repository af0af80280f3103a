// The observer registry and the shared histogram (observer.h).
#include "workloads/quant/observer.h"

#include <algorithm>
#include <map>

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::quant {
namespace {
std::map<std::string, ObserverInfo>& registry() {
  static std::map<std::string, ObserverInfo> r;
  return r;
}
}  // namespace

void register_observer(const std::string& name, ObserverInfo info) {
  sb::register_name("calibration", name, info.doc);
  registry()[name] = std::move(info);
}

std::vector<std::string> observer_names() {
  std::vector<std::string> n;
  for (const auto& [name, i] : registry()) n.push_back(name);
  return n;
}

std::unique_ptr<Observer> make_observer(const std::string& name, const ObserverOptions& o) {
  auto it = registry().find(name);
  SB_CHECK(it != registry().end(), "calibration = \"{}\": no such observer; known: {}", name,
           fmt::join(observer_names(), ", "));
  return it->second.make(o);
}

void RangeHistogram::observe(int pass, const torch::Tensor& x) {
  if (pass == 0) {
    const double lo = x.min().item<double>(), hi = x.max().item<double>();
    min_ = seen_ ? std::min(min_, lo) : lo;
    max_ = seen_ ? std::max(max_, hi) : hi;
    seen_ = true;
    return;
  }
  if (max_ <= min_) {  // a constant input: everything in the first bin
    counts_[0] += static_cast<double>(x.numel());
    return;
  }
  // histc counts values equal to max in the last bin and ignores none (max is pass 0's).
  const auto h = torch::histc(x.to(torch::kFloat), kBins, min_, max_).to(torch::kDouble).contiguous();
  const double* p = h.data_ptr<double>();
  for (int i = 0; i < kBins; ++i) counts_[i] += p[i];
}

}  // namespace sb::quant
