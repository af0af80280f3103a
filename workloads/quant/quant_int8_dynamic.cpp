// Quantization "int8-dynamic": int8 weights (symmetric, one scale per output channel),
// activations quantized per batch at run time (uint8, scale and zero point from the batch's
// range), int8 GEMM with int32 accumulation by LibTorch's quantized engine: what PyTorch's
// quantize_dynamic does to nn.Linear. The engine is oneDNN where LibTorch has it (the
// int8 engine is the fastest this LibTorch has on this CPU, measured once per process
// (select_int8_engine; key int8_engine), unless the task names one.
#include <ATen/native/quantized/PackedParams.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "workloads/quant/quantized_matrix.h"
#include "workloads/quant/quantizer.h"

namespace sb::quant {
namespace {

// LibTorch's quantized engines, the wheel's in its order of preference.
const std::vector<std::pair<std::string, at::QEngine>> kEngines = {
    {"x86", at::QEngine::X86}, {"fbgemm", at::QEngine::FBGEMM},
    {"onednn", at::QEngine::ONEDNN}, {"qnnpack", at::QEngine::QNNPACK}};

std::mutex g_engine_mutex;
std::optional<Int8EngineChoice> g_engine;  // set once per process: packed weights depend on it

bool supported(at::QEngine e) {
  const auto& s = at::globalContext().supportedQEngines();
  return std::find(s.begin(), s.end(), e) != s.end();
}

using Prepack = c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>);
c10::intrusive_ptr<LinearPackedParamsBase> prepack(const at::Tensor& qw) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("quantized::linear_prepack", "")
                       .typed<Prepack>();
  return op.call(qw, c10::nullopt);
}

// (out, in) fp32 -> int8 per output channel (symmetric: steps max|W[o,:]| / 127, zero point 0;
// an all-zero row gets a tiny step).
at::Tensor quantize_weight(const torch::Tensor& w) {
  auto step = w.abs().amax(1).div_(127.0).clamp_min_(1e-12).to(torch::kDouble);  // (out)
  return at::quantize_per_channel(w, step, torch::zeros({w.size(0)}, torch::kLong), 0, at::kQInt8);
}

// Milliseconds of one forward's dynamic int8 linears per engine: each distinct shape's
// median over three rounds across the engines (interleaved, so a drift of the machine's speed
// hits every engine alike; one warm-up call first), times its count, summed. Rows are capped
// at 4096: the engines' kernels are past their blocking by then and the choice costs seconds.
std::map<std::string, double> time_engines(const std::vector<std::pair<std::string, at::QEngine>>& es,
                                           const std::vector<LinearShape>& shapes) {
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(1);
  std::map<std::string, double> out;
  for (const LinearShape& sh : shapes) {
    const auto w = torch::randn({sh.out, sh.in}, gen);
    const auto x = torch::randn({std::min<std::int64_t>(sh.rows, 4096), sh.in}, gen);
    std::vector<c10::intrusive_ptr<LinearPackedParamsBase>> packed;
    for (const auto& [name, e] : es) {
      at::globalContext().setQEngine(e);
      packed.push_back(prepack(quantize_weight(w)));
      packed.back()->apply_dynamic(x, /*reduce_range=*/!host_int8_units().full_range);
    }
    std::vector<std::vector<double>> ms(es.size());
    for (int round = 0; round < 3; ++round)
      for (std::size_t i = 0; i < es.size(); ++i) {
        at::globalContext().setQEngine(es[i].second);
        const auto t0 = std::chrono::steady_clock::now();
        packed[i]->apply_dynamic(x, /*reduce_range=*/!host_int8_units().full_range);
        ms[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    const double scale = static_cast<double>(sh.rows) / static_cast<double>(x.size(0));
    for (std::size_t i = 0; i < es.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      out[es[i].first] += ms[i][1] * scale * static_cast<double>(sh.count);
    }
  }
  return out;
}

std::string shapes_text(const std::vector<LinearShape>& shapes) {
  std::string s;
  for (const auto& sh : shapes)
    s += fmt::format("{}{}x{} -> {} (x{})", s.empty() ? "" : ", ", sh.rows, sh.in, sh.out, sh.count);
  return s;
}

Int8EngineChoice choose(const std::string& choice, std::vector<LinearShape> shapes) {
  std::vector<std::pair<std::string, at::QEngine>> have;
  for (const auto& e : kEngines)
    if (supported(e.second)) have.push_back(e);
  std::vector<std::string> names;
  for (const auto& e : have) names.push_back(e.first);
  SB_CHECK(!have.empty(), "int8-dynamic needs one of LibTorch's quantized engines (x86, fbgemm, "
                          "onednn, qnnpack) and this LibTorch has none; use int8-weight-channel");
  if (choice != "auto") {
    auto it = std::find_if(have.begin(), have.end(), [&](const auto& e) { return e.first == choice; });
    SB_CHECK(it != have.end(), "int8_engine = \"{}\": this LibTorch has no such quantized engine; "
             "it has: {} (or \"auto\": the fastest, measured)", choice, fmt::join(names, ", "));
    at::globalContext().setQEngine(it->second);
    return {choice, "int8_engine = \"" + choice + "\""};
  }
  const bool own = !shapes.empty();
  if (!own) shapes = {{128, 768, 3072, 1}};  // one BERT-base FFN layer
  const auto ms = time_engines(have, shapes);
  std::string best = have.front().first, why;
  for (const auto& [name, t] : ms) {
    if (t < ms.at(best)) best = name;
    why += fmt::format("{}{} {:.2f} ms", why.empty() ? "" : ", ", name, t);
  }
  for (const auto& e : have)
    if (e.first == best) at::globalContext().setQEngine(e.second);
  return {best, fmt::format("auto: the fastest of {} ({}: {}; medians of 3 interleaved, times "
                            "their count)", why, own ? "one forward's linears" : "one linear",
                            shapes_text(shapes))};
}

// Every Int8DynamicMatrix is packed for the engine chosen first (auto unless the task chose).
void ensure_engine() { select_int8_engine("auto"); }

class Int8DynamicMatrix final : public QuantizedMatrix {
 public:
  explicit Int8DynamicMatrix(const torch::Tensor& w) : out_(w.size(0)), in_(w.size(1)) {  // (out, in)
    ensure_engine();
    packed_ = prepack(quantize_weight(w));
  }
  torch::Tensor dequantize(torch::ScalarType dtype) const override {
    return std::get<0>(packed_->unpack()).dequantize().to(dtype);
  }
  // x: (..., in) fp32 (the format computes in fp32 only) -> (..., out); the bias is added in
  // fp32 after the int8 GEMM.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const override {
    auto shape = x.sizes().vec();
    SB_CHECK(shape.back() == in_, "int8-dynamic linear: input has {} features, weight expects {}",
             shape.back(), in_);
    auto y = packed_->apply_dynamic(x.reshape({-1, in_}).to(torch::kFloat).contiguous(),
                                    /*reduce_range=*/!host_int8_units().full_range);  // (M, out)
    if (b.defined()) y.add_(b);
    shape.back() = out_;
    return y.view(shape);
  }
  // Format: int8 codes + one fp32 step per channel. Resident: oneDNN keeps the unpacked int8
  // weight (for unpack()) beside its packed copy, and LibTorch stores steps as fp64 and zero
  // points as int64.
  std::int64_t bytes() const override { return out_ * in_ + 4 * out_; }
  std::int64_t resident_bytes() const override { return 2 * out_ * in_ + 16 * out_; }

 private:
  std::int64_t out_, in_;
  c10::intrusive_ptr<LinearPackedParamsBase> packed_;
};

const bool registered =
    (register_quantizer("int8-dynamic",
                        "int8 per-channel weights, activations quantized per batch, int8 GEMM (oneDNN)",
                        [](const torch::Tensor& w) { return std::make_unique<Int8DynamicMatrix>(w); },
                        [](std::int64_t r, std::int64_t c) { return r * c + 4 * r; }),
     true);
}  // namespace

Int8Units int8_units(const std::vector<std::string>& isa) {
  auto has = [&](const char* f) { return std::find(isa.begin(), isa.end(), f) != isa.end(); };
  for (const auto& [flag, what] : {std::pair{"amx_int8", "AMX tiles (oneDNN)"},
                                   std::pair{"avx512_vnni", "AVX512-VNNI (fbgemm, x86 and oneDNN)"},
                                   std::pair{"avx_vnni", "AVX-VNNI (oneDNN)"}})
    if (has(flag))
      return {flag, true, fmt::format("int8 GEMMs on {}: u8 x s8 accumulated in 32 bits, 8-bit "
                                      "activations", what)};
  if (has("avx2"))
    return {"avx2", false, "int8 GEMMs on AVX2 (no VNNI or AMX: pairs of u8 x s8 products add in "
                           "int16, so activations are quantized to 7 bits)"};
  return {"none", false, "no AVX2, VNNI or AMX: int8 GEMMs on the engines' reference kernels, "
                         "activations quantized to 7 bits"};
}

const Int8Units& host_int8_units() {
  static const Int8Units u = int8_units(sb::machine_now("").isa);
  return u;
}

std::vector<LinearShape> linear_shapes(const std::vector<models::UnitSpec>& units, std::int64_t rows) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> count;  // (in, out) -> count
  for (const auto& u : units)
    for (const auto& p : u.params)
      if (p.shape.size() == 2 && !models::is_embedding_table(p.name)) ++count[{p.shape[1], p.shape[0]}];
  std::vector<LinearShape> out;
  for (const auto& [io, n] : count) out.push_back({rows, io.first, io.second, n});
  return out;
}

Int8EngineChoice select_int8_engine(const std::string& choice, const std::vector<LinearShape>& shapes) {
  std::lock_guard<std::mutex> lock(g_engine_mutex);
  if (g_engine) {
    SB_CHECK(choice == "auto" || choice == g_engine->engine,
             "int8_engine = \"{}\": this process already packed int8 weights for engine {} (the "
             "quantized engine is process-global); choose the engine before the first int8-dynamic "
             "model", choice, g_engine->engine);
    return *g_engine;
  }
  g_engine = choose(choice, shapes);
  return *g_engine;
}
}  // namespace sb::quant
