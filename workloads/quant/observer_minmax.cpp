// Observer "minmax": the range is the smallest and largest value seen in any calibration
// batch (PyTorch's MinMaxObserver). Nothing saturates on the calibration data; one outlier
// widens every step.
#include <algorithm>

#include "workloads/quant/observer.h"

namespace sb::quant {
namespace {

class MinMax final : public Observer {
 public:
  void observe(int, const torch::Tensor& x) override {
    const double lo = x.min().item<double>(), hi = x.max().item<double>();
    r_.lo = seen_ ? std::min(r_.lo, lo) : lo;
    r_.hi = seen_ ? std::max(r_.hi, hi) : hi;
    seen_ = true;
  }
  ActivationRange range() const override { return r_; }

 private:
  ActivationRange r_;
  bool seen_ = false;
};

const bool registered = (register_observer("minmax", {"the smallest and largest value seen",
                                                      [](const ObserverOptions&) {
                                                        return std::make_unique<MinMax>();
                                                      }}),
                         true);
}  // namespace
}  // namespace sb::quant
