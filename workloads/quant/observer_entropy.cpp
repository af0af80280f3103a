// Observer "entropy": the range whose quantized histogram loses the least information
// (TensorRT's entropy calibration, NVIDIA's "8-bit Inference with TensorRT", 2017), made
// asymmetric for uint8 codes. From a 2048-bin histogram over [min, max], each candidate
// window clips at one threshold t on both sides, [max(min, -t), min(max, t)], for t = m/128 ..
// m in 128 steps, m = max(|min|, |max|) (so a one-sided input such as GELU's keeps its own
// lower end; a window keeps at least levels + 1 bins, one per code). For each: P = the window's counts with everything
// outside added to its edge bins (what saturation does); Q = the window's own counts merged
// into levels + 1 equal groups (the codes) and spread back evenly over each group's non-empty
// bins (what rounding does). The window of least KL(P || Q) wins; minmax is f = 1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "workloads/quant/observer.h"

namespace sb::quant {
namespace {

// KL(P || Q) of bins [a, b) of c, quantized into `groups` codes.
double divergence(const std::vector<double>& c, int a, int b, int groups) {
  const int w = b - a;
  std::vector<double> p(c.begin() + a, c.begin() + b), q(w, 0.0);
  for (int i = 0; i < a; ++i) p.front() += c[i];
  for (int i = b; i < static_cast<int>(c.size()); ++i) p.back() += c[i];
  for (int g = 0; g < groups; ++g) {
    const int s = static_cast<int>(static_cast<long>(g) * w / groups);
    const int e = static_cast<int>(static_cast<long>(g + 1) * w / groups);
    double sum = 0;
    int nonzero = 0;
    for (int i = s; i < e; ++i) sum += c[a + i], nonzero += c[a + i] > 0;
    for (int i = s; i < e; ++i)
      if (c[a + i] > 0) q[i] = sum / nonzero;
  }
  double ps = 0, qs = 0;
  for (int i = 0; i < w; ++i) ps += p[i], qs += q[i];
  if (ps <= 0 || qs <= 0) return std::numeric_limits<double>::infinity();
  constexpr double eps = 1e-12;  // Q's empty bins where P has mass: clipped, heavily penalized
  double kl = 0;
  for (int i = 0; i < w; ++i)
    if (p[i] > 0) kl += p[i] / ps * std::log((p[i] / ps) / std::max(q[i] / qs, eps));
  return kl;
}

class Entropy final : public Observer {
 public:
  explicit Entropy(int levels) : levels_(levels) {}
  int passes() const override { return 2; }
  void observe(int pass, const torch::Tensor& x) override { h_.observe(pass, x); }
  ActivationRange range() const override {
    constexpr int n = RangeHistogram::kBins, steps = 128;
    if (h_.max() <= h_.min()) return {h_.min(), h_.max()};
    const double m = std::max(-h_.min(), h_.max());
    auto bin = [&](double v) {
      return std::clamp(static_cast<int>(std::lround((v - h_.min()) / h_.width())), 0, n);
    };
    double best = std::numeric_limits<double>::infinity();
    int best_a = 0, best_b = n;
    for (int k = 1; k <= steps; ++k) {
      const double t = m * k / steps;
      const int a = bin(std::max(h_.min(), -t)), b = bin(std::min(h_.max(), t));
      if (b - a < levels_ + 1) continue;
      const double kl = divergence(h_.counts(), a, b, levels_ + 1);
      if (kl < best) best = kl, best_a = a, best_b = b;
    }
    return {h_.edge(best_a), h_.edge(best_b)};
  }

 private:
  int levels_;
  RangeHistogram h_;
};

const bool registered =
    (register_observer("entropy", {"the range of least KL divergence between the histogram and "
                                   "its quantized form (TensorRT's entropy calibration)",
                                   [](const ObserverOptions& o) {
                                     return std::make_unique<Entropy>(o.levels);
                                   }}),
     true);
}  // namespace
}  // namespace sb::quant
