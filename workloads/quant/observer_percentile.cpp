// Observer "percentile": the range keeps `calibration_percentile` % of the calibration values
// (default 99.99), cutting the same share from each tail: lo is the (100 - p)th percentile,
// hi the pth, read from a 2048-bin histogram over [min, max] (so to within one bin,
// (max - min) / 2048). The rare outliers saturate instead of widening every step.
#include "workloads/quant/observer.h"

namespace sb::quant {
namespace {

class Percentile final : public Observer {
 public:
  explicit Percentile(double p) : p_(p) {}
  int passes() const override { return 2; }
  void observe(int pass, const torch::Tensor& x) override { h_.observe(pass, x); }
  ActivationRange range() const override {
    const auto& c = h_.counts();
    double total = 0;
    for (double v : c) total += v;
    const double cut = total * (1.0 - p_ / 100.0);  // values allowed outside, per tail
    int lo = 0, hi = RangeHistogram::kBins;          // bins [lo, hi) kept
    for (double below = 0; lo < hi - 1 && below + c[lo] <= cut; ++lo) below += c[lo];
    for (double above = 0; hi - 1 > lo && above + c[hi - 1] <= cut; --hi) above += c[hi - 1];
    return {h_.edge(lo), h_.edge(hi)};
  }

 private:
  double p_;
  RangeHistogram h_;
};

const bool registered =
    (register_observer("percentile", {"the (100 - p)th to pth percentile (calibration_percentile = p)",
                                      [](const ObserverOptions& o) {
                                        return std::make_unique<Percentile>(o.percentile);
                                      }}),
     true);
}  // namespace
}  // namespace sb::quant
