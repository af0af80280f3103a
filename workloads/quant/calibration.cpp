// Calibration for static int8 (calibration.h).
#include "workloads/quant/calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "harness/core/check.h"
#include "workloads/models/params.h"
#include "workloads/quant/quantizer.h"

namespace sb::quant {

ChannelCodes ChannelCodes::of(const torch::Tensor& w) {
  auto step = w.abs().amax(1).div_(127.0).clamp_min_(1e-12).to(torch::kFloat);
  auto codes = w.div(step.unsqueeze(1)).round_().clamp_(-127, 127).to(torch::kChar);
  return {codes.contiguous(), step.contiguous()};
}

ActivationQuant ActivationQuant::of(const ActivationRange& r, std::int64_t qmax) {
  const double lo = std::min(r.lo, 0.0), hi = std::max(r.hi, 0.0);
  ActivationQuant a;
  a.qmax = qmax;
  a.step = std::max((hi - lo) / static_cast<double>(qmax), 1e-8);
  a.zero_point = std::clamp<std::int64_t>(std::llround(-lo / a.step), 0, qmax);
  return a;
}

// LibTorch's fused quantize (one vectorized pass, round half to even as torch.round); its
// codes read in place as uint8 (int_repr() would copy them: 47 of BERT-Large's 1063 ms);
// 7-bit codes clamp once more.
torch::Tensor ActivationQuant::codes(const torch::Tensor& x) const {
  auto q = at::quantize_per_tensor(x.to(torch::kFloat).contiguous(), step, zero_point, torch::kQUInt8);
  auto c = torch::from_blob(q.data_ptr(), q.sizes(), [q](void*) {}, torch::TensorOptions(torch::kByte));
  return qmax < 255 ? c.clamp_max_(qmax) : c;
}

torch::Tensor ActivationQuant::fake(const torch::Tensor& x) const {
  return codes(x).to(torch::kFloat).sub_(static_cast<double>(zero_point)).mul_(step);
}

const LayerCalibration* Calibration::find(int unit, int index) const {
  auto it = layers.find({unit, index});
  return it == layers.end() ? nullptr : &it->second;
}

std::vector<std::string> Calibration::skipped() const {
  std::vector<std::string> out;
  for (const auto& [key, l] : layers)
    if (l.skip) out.push_back(l.name);
  return out;
}

namespace {

// The fp32 weights, with every linear's input handed to `watch` before it runs.
class Watched final : public models::ParamProvider {
 public:
  using Watch = std::function<torch::Tensor(int, int, const torch::Tensor&, const torch::Tensor&,
                                            const torch::Tensor&)>;
  Watched(const models::UnitTensors& w, Watch watch) : inner_(w, /*requires_grad=*/false), watch_(std::move(watch)) {}
  std::vector<torch::Tensor> acquire(int unit) override { return inner_.acquire(unit); }
  void release(int unit, const torch::Tensor& out) override { inner_.release(unit, out); }
  torch::Tensor linear(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) override {
    return watch_(unit, w_index, x, w, b);
  }

 private:
  models::PersistentParams inner_;
  Watch watch_;
};

void run_all(models::Model& model, models::ParamProvider& p, const std::vector<models::Batch>& batches) {
  for (const auto& b : batches) {
    if (b.labels.defined()) model.classify(p, b);
    else model.logits(p, b);
  }
}

}  // namespace

Calibration calibrate(models::Model& model, const models::UnitTensors& weights,
                      const std::vector<models::Batch>& batches, const CalibrationOptions& o) {
  SB_CHECK(!batches.empty(), "int8-static needs calibration data: set calibration_batches > 0");
  const auto t0 = std::chrono::steady_clock::now();
  torch::NoGradGuard ng;
  Calibration cal;
  cal.options = o;
  cal.batches = static_cast<std::int64_t>(batches.size());
  std::map<std::pair<int, int>, std::unique_ptr<Observer>> observers;
  int passes = make_observer(o.observer, o.observer_options)->passes();
  for (int pass = 0; pass < passes; ++pass) {
    Watched w(weights, [&](int u, int i, const torch::Tensor& x, const torch::Tensor& wt,
                           const torch::Tensor& b) {
      auto& obs = observers[{u, i}];
      if (!obs) obs = make_observer(o.observer, o.observer_options);
      obs->observe(pass, x.to(torch::kFloat));
      return at::linear(x, wt, b);
    });
    run_all(model, w, batches);
  }
  const auto& units = model.units();
  for (const auto& [key, obs] : observers) {
    LayerCalibration& l = cal.layers[key];
    l.name = units.at(key.first).params.at(key.second).name;
    l.range = obs->range();
    l.input = ActivationQuant::of(l.range, o.observer_options.levels);
  }
  // Each layer's int8 error on fp32 inputs (so one layer's error does not feed the next's).
  // The decoded weights are made per call, not kept: kept, they were a second fp32 copy of
  // the model (bert-large's peak resident memory went from 2.0 to 4.4 GB).
  std::map<std::pair<int, int>, std::pair<double, double>> sq;  // (||dy||^2, ||y||^2)
  Watched err(weights, [&](int u, int i, const torch::Tensor& x, const torch::Tensor& wt,
                           const torch::Tensor& b) {
    auto y = at::linear(x, wt, b);
    const auto fw = ChannelCodes::of(wt.to(torch::kFloat)).dequantize();
    const auto yq = at::linear(cal.layers.at({u, i}).input.fake(x), fw, b);
    auto& [d, n] = sq[{u, i}];
    d += (yq - y).pow(2).sum().item<double>();
    n += y.pow(2).sum().item<double>();
    return y;
  });
  run_all(model, err, batches);
  for (auto& [key, l] : cal.layers) {
    const auto& [d, n] = sq[key];
    l.error = n > 0 ? std::sqrt(d / n) : 0.0;
    l.skip = l.error > o.skip_error;
  }
  cal.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cal;
}

}  // namespace sb::quant
