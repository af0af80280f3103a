// Compressor "int8": block-wise absmax quantization. Each block of `block` elements gets one
// fp32 step s = max|x| / 127 and int8 codes q = round(x / s) (or stochastic rounding), so
// the deterministic round trip errs by at most s/2 per element.
// Wire layout: [nb fp32 steps][n int8 codes], nb = ceil(n / block): 4 * nb + n bytes.
#include <limits>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "workloads/comm/compressor.h"

namespace sb::comm {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

class Int8Compressor final : public Compressor {
 public:
  explicit Int8Compressor(const CompressorConfig& c)
      : block_(c.get_int("block")), stochastic_(c.get_bool("stochastic")),
        gen_(at::make_generator<at::CPUGeneratorImpl>(c.seed)) {
    SB_CHECK(block_ >= 1, "int8 compressor: block = {} must be at least 1 (key compress.*.block)",
             block_);
  }
  std::string name() const override { return "int8"; }
  std::int64_t blocks(std::int64_t n) const { return (n + block_ - 1) / block_; }
  std::int64_t wire_bytes(std::int64_t n) const override { return 4 * blocks(n) + n; }

  torch::Tensor compress(const torch::Tensor& x) override {
    check_compress_input(x, "int8");
    const std::int64_t n = x.numel(), nb = blocks(n);
    auto wire = torch::empty({wire_bytes(n)}, torch::kUInt8);
    if (n == 0) return wire;
    // (nb, block): the tail block is zero-padded; zeros change neither absmax nor codes.
    torch::Tensor xb = x;
    if (nb * block_ != n) xb = torch::constant_pad_nd(x, {0, nb * block_ - n});
    xb = xb.view({nb, block_});
    auto step = xb.abs().amax(1).div_(127.0f);                       // (nb)
    auto safe = torch::where(step > 0, step, torch::ones_like(step)); // all-zero block: codes 0
    auto y = xb / safe.unsqueeze(1);                                  // (nb, block) in [-127, 127]
    if (stochastic_) {
      // floor(y + u), u ~ U[0,1): unbiased, E[q] = y; |error| < s.
      y.add_(torch::rand(y.sizes(), gen_, torch::kFloat)).floor_();
    } else {
      y.round_();  // half to even
    }
    y.clamp_(-127.0f, 127.0f);
    wire_view(wire, 0, nb, torch::kFloat).copy_(step);
    wire_view(wire, 4 * nb, n, torch::kChar).copy_(y.view({-1}).narrow(0, 0, n));
    return wire;
  }

  torch::Tensor decompress(const torch::Tensor& wire, std::int64_t n) const override {
    check_wire(wire, wire_bytes(n), "int8");
    const std::int64_t nb = blocks(n);
    auto out = torch::empty({nb * block_}, torch::kFloat);
    out.narrow(0, 0, n).copy_(wire_view(wire, 4 * nb, n, torch::kChar));
    out.narrow(0, n, nb * block_ - n).zero_();
    out.view({nb, block_}).mul_(wire_view(wire, 0, nb, torch::kFloat).unsqueeze(1));
    return out.narrow(0, 0, n).contiguous();
  }

  // The generator's position (stochastic rounding only): a resumed run draws what the
  // uninterrupted one would have.
  void save_state(StateDict& out, const std::string& prefix) const override {
    if (!stochastic_) return;
    std::lock_guard<std::mutex> lock(gen_.mutex());
    out[prefix + "generator"] = gen_.get_state();
  }
  void load_state(const StateDict& in, const std::string& prefix) override {
    if (!stochastic_) return;
    auto it = in.find(prefix + "generator");
    SB_CHECK(it != in.end(), "int8 stochastic rounding: the saved compression state has no "
             "\"{}generator\"; it was saved without stochastic rounding", prefix);
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(it->second);
  }

 private:
  std::int64_t block_;
  bool stochastic_;
  mutable at::Generator gen_;  // mutable: save_state locks its mutex
};

const sb::Registrar registrar([] {
  CompressorInfo info;
  info.settings = {{"block", KeyType::Int, 256, 1, kInf, false, "elements per fp32 scale"},
                   {"stochastic", KeyType::Bool, 0, 0, 1, false, "stochastic rounding"}};
  info.make = [](const CompressorConfig& c) { return std::make_unique<Int8Compressor>(c); };
  register_compressor("int8",
                      "block-wise absmax int8, one fp32 step per block (4*ceil(n/block)+n B)",
                      std::move(info));
});
}  // namespace
}  // namespace sb::comm
