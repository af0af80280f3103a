// Activation observers for static int8 (quantization = "int8-static"): each watches the
// inputs of one linear layer over the calibration batches and proposes the range
// [lo, hi] its uint8 codes cover. One variant per file (observer_<name>.cpp), chosen by the
// key `calibration`; every value outside the range saturates, so the choice trades clipping
// error (range too narrow) against rounding error (step too coarse).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::quant {

struct ActivationRange {
  double lo = 0, hi = 0;
};

struct ObserverOptions {
  double percentile = 99.99;  // percentile: the share of values kept inside the range, in %
  int levels = 255;           // the codes' largest value (127 where activations keep 7 bits)
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Passes over the calibration batches: a histogram needs the whole range first (pass 0)
  // before it can bin (pass 1).
  virtual int passes() const { return 1; }
  // x: one batch's inputs of the layer, fp32, any shape.
  virtual void observe(int pass, const torch::Tensor& x) = 0;
  virtual ActivationRange range() const = 0;
};

struct ObserverInfo {
  std::string doc;
  std::function<std::unique_ptr<Observer>(const ObserverOptions&)> make;
};
// Registers `name` in the harness name set "calibration" too (the key's allowed values).
void register_observer(const std::string& name, ObserverInfo info);
std::unique_ptr<Observer> make_observer(const std::string& name, const ObserverOptions& o = {});
std::vector<std::string> observer_names();

// The histogram the percentile and entropy observers share: pass 0 finds [min, max], pass 1
// counts the values in `bins` equal bins over it.
class RangeHistogram {
 public:
  static constexpr int kBins = 2048;
  void observe(int pass, const torch::Tensor& x);
  double min() const { return min_; }
  double max() const { return max_; }
  double width() const { return (max_ - min_) / kBins; }
  const std::vector<double>& counts() const { return counts_; }
  double edge(int bin) const { return min_ + width() * bin; }  // lower edge of `bin`

 private:
  double min_ = 0, max_ = 0;
  bool seen_ = false;
  std::vector<double> counts_ = std::vector<double>(kBins, 0.0);
};

}  // namespace sb::quant
