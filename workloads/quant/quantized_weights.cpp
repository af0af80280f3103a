// Quantization as a conversion: every 2-D parameter (linear weights and embedding tables) is
// stored by the chosen format; 1-D parameters (biases, LayerNorm) stay fp32 and are counted.
// acquire() hands the model dequantized embedding tables (the model indexes them) and
// zero-byte placeholders of the right shape for linear weights, which only reach linear().
#include "workloads/quant/quantizer.h"

#include <map>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/device.h"
#include "workloads/quant/calibration.h"
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {

std::string dtype_label(torch::ScalarType t) {
  return t == torch::kBFloat16 ? "bf16" : t == torch::kHalf ? "fp16" : t == torch::kFloat ? "fp32"
                                                                                        : c10::toString(t);
}

struct Entry {
  std::string doc;
  MatrixQuantizer make;  // null (and no `calibrated`): fp32
  CalibratedQuantizer calibrated;  // formats that need a Calibration
  MatrixBytes bytes;
  torch::ScalarType low = torch::kFloat;  // the low-precision compute dtype it allows
};
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}


class ConvertedWeights final : public QuantizedWeights {
 public:
  ConvertedWeights(const models::Model& model, const std::vector<std::vector<torch::Tensor>>& weights,
                   const std::string& name, const Entry& e, const Calibration* cal, torch::ScalarType compute)
      : name_(name), compute_(compute) {
    const auto& units = model.units();
    SB_CHECK(weights.size() == units.size(),
             "quantize {}: got weights for {} units, model {} has {}", name, weights.size(),
             model.config().preset, units.size());
    for (std::size_t u = 0; u < units.size(); ++u) {
      const auto& spec = units[u].params;
      SB_CHECK(weights[u].size() == spec.size(), "quantize {}: unit {} has {} tensors, spec {}",
               name, units[u].name, weights[u].size(), spec.size());
      auto& dst = params_.emplace_back(spec.size());
      for (std::size_t i = 0; i < spec.size(); ++i) {
        auto w = weights[u][i].detach().to(torch::kFloat).contiguous();
        SB_CHECK(w.sizes() == torch::IntArrayRef(spec[i].shape),
                 "quantize {}: {} has shape {}, the model expects {}", name, spec[i].name,
                 c10::str(w.sizes()), c10::str(torch::IntArrayRef(spec[i].shape)));
        Param& p = dst[i];
        const bool embedding = models::is_embedding_table(spec[i].name);
        const ActivationQuant* input = nullptr;
        bool quantized = (e.make || e.calibrated) && w.dim() == 2;
        if (quantized && e.calibrated) {
          // A calibrated format quantizes what calibration saw and did not mark to skip; an
          // embedding table no linear layer read is stored as codes for its lookups.
          const LayerCalibration* l = cal->find(static_cast<int>(u), static_cast<int>(i));
          if (l && !l->skip) input = &l->input;
          quantized = l ? !l->skip : embedding;
          if (!quantized) ++unquantized_;
        }
        if (quantized) {
          p.q = e.make ? e.make(w) : e.calibrated(w, input);
          // Embedding tables must come out of acquire() as real values (the model indexes
          // them); a tied LM head reaches them through linear().
          p.embedding = embedding;
          // Zero bytes, spec shape: reading it would give zeros, so a model that used a
          // linear weight outside linear() fails the accuracy tests instead of passing.
          if (!p.embedding) p.placeholder = torch::zeros({1}).expand(spec[i].shape);
          bytes_ += p.q->bytes();
          resident_ += p.q->resident_bytes();
        } else {  // kept fp32 in the format; held in the compute dtype
          p.fp32 = w.to(compute);
          bytes_ += 4 * w.numel();
          resident_ += static_cast<std::int64_t>(c10::elementSize(compute)) * w.numel();
        }
      }
    }
  }

  std::vector<torch::Tensor> acquire(int unit) override {
    std::vector<torch::Tensor> out;
    for (const Param& p : params_.at(unit)) {
      if (p.fp32.defined()) out.push_back(p.fp32);
      else if (p.embedding) out.push_back(p.q->dequantize(compute_));  // transient, freed after use
      else out.push_back(p.placeholder);
    }
    return out;
  }
  void release(int unit, const torch::Tensor& out) override {}

  torch::Tensor linear(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) override {
    const Param& p = params_.at(unit).at(w_index);
    if (!p.q) return at::linear(x, w, b);
    return p.q->linear(x.to(compute_), b);  // x: compute_ already, but for a caller's fp32 input
  }

  torch::Tensor linear_gelu(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b, c10::string_view approximate) override {
    const Param& p = params_.at(unit).at(w_index);
    if (!p.q) return at::gelu(at::linear(x, w, b), approximate);
    return p.q->linear_gelu(x.to(compute_), b, approximate);
  }

  std::int64_t model_bytes() const override { return bytes_; }
  std::int64_t resident_bytes() const override { return resident_; }
  int unquantized_matrices() const override { return unquantized_; }

 private:
  struct Param {
    torch::Tensor fp32;                   // 1-D params, or everything for "none"
    std::unique_ptr<QuantizedMatrix> q;   // 2-D params
    bool embedding = false;
    torch::Tensor placeholder;            // spec shape, one element of storage
  };
  std::string name_;
  torch::ScalarType compute_;
  std::vector<std::vector<Param>> params_;
  std::int64_t bytes_ = 0, resident_ = 0;
  int unquantized_ = 0;
};

}  // namespace

torch::Tensor QuantizedMatrix::linear(const torch::Tensor& x, const torch::Tensor& b) const {
  return at::linear(x, dequantize(x.scalar_type()), b);
}

void register_quantizer(const std::string& name, const std::string& doc, MatrixQuantizer q,
                        MatrixBytes bytes, torch::ScalarType low) {
  registry()[name] = Entry{doc, std::move(q), nullptr, std::move(bytes), low};
  sb::register_name("quantization", name, doc);
}

void register_calibrated_quantizer(const std::string& name, const std::string& doc, CalibratedQuantizer q,
                                   MatrixBytes bytes, torch::ScalarType low) {
  registry()[name] = Entry{doc, nullptr, std::move(q), std::move(bytes), low};
  sb::register_name("quantization", name, doc);
}

std::vector<std::string> quantizer_names() {
  std::vector<std::string> n;
  for (const auto& [name, e] : registry()) n.push_back(name);
  return n;
}

namespace {
const Entry& find_entry(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end())
    SB_FAIL("unknown quantization \"{}\"; known: {}", name, fmt::join(quantizer_names(), ", "));
  return it->second;
}
}  // namespace

std::int64_t quantized_model_bytes(const std::string& name, const std::vector<models::UnitSpec>& units) {
  const Entry& e = find_entry(name);
  std::int64_t b = 0;
  for (const auto& u : units)
    for (const auto& p : u.params)
      b += ((e.make || e.calibrated) && p.shape.size() == 2) ? e.bytes(p.shape[0], p.shape[1]) : 4 * p.numel();
  return b;
}

bool needs_calibration(const std::string& name) {
  auto it = registry().find(name);
  return it != registry().end() && it->second.calibrated;
}

std::unique_ptr<QuantizedWeights> quantize(const std::string& name, const models::Model& model,
                                           const std::vector<std::vector<torch::Tensor>>& weights,
                                           torch::ScalarType compute, const Calibration* cal) {
  const Entry& e = find_entry(name);
  SB_CHECK(!e.calibrated || cal, "quantize {}: the format needs calibrated activation ranges "
           "(calibration_batches > 0)", name);
  SB_CHECK(compute == torch::kFloat || compute == e.low,
           "quantize {}: the format computes in fp32{}, not {}", name,
           e.low == torch::kFloat ? "" : " or " + dtype_label(e.low), dtype_label(compute));
  torch::NoGradGuard no_grad;
  return std::make_unique<ConvertedWeights>(model, weights, name, e, cal, compute);
}

std::string check_compute_choice(const std::string& name, const std::string& choice) {
  auto it = registry().find(name);
  if (it == registry().end() || choice == "auto" || choice == "fp32") return "";
  const torch::ScalarType low = it->second.low;
  if (low != torch::kFloat && choice == dtype_label(low)) return "";
  return fmt::format("quant_compute = \"{}\": quantization \"{}\" computes in {}; set quant_compute "
                     "= \"auto\"{}", choice, name,
                     low == torch::kFloat ? "fp32 only" : "fp32 or " + dtype_label(low),
                     low == torch::kFloat ? " or \"fp32\"" : ", \"fp32\" or \"" + dtype_label(low) + "\"");
}

torch::ScalarType compute_dtype(const std::string& name, const std::string& choice,
                                const torch::Device& d, std::string* why) {
  const std::string bad = check_compute_choice(name, choice);
  SB_CHECK(bad.empty(), "{}", bad);
  const torch::ScalarType low = find_entry(name).low;
  auto say = [&](const std::string& s) {
    if (why) *why = s;
  };
  if (choice == "fp32" || low == torch::kFloat) {
    say(choice == "fp32" ? "quant_compute = \"fp32\"" : name + " computes in fp32 only");
    return torch::kFloat;
  }
  if (choice != "auto") {
    say("quant_compute = \"" + choice + "\"");
    return low;
  }
  const std::string missing = models::missing_fast_units(d, low);
  if (!missing.empty()) {
    say("auto: fp32, because the " + missing);
    return torch::kFloat;
  }
  say("auto: " + dtype_label(low) + ", the device has " + dtype_label(low) + " units");
  return low;
}

}  // namespace sb::quant
