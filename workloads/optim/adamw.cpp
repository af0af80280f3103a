// AdamW and the warm-up + cosine schedule. The update is a plain elementwise loop in fp32
// compiled with -ffp-contract=off (workloads/CMakeLists.txt), so every element's result
// depends only on that element's inputs: applying it to a whole tensor or to contiguous
// pieces of it (the sharded optimizer's flat shards) gives identical bits.
#include "workloads/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "harness/core/check.h"

namespace sb::optim {

double lr_at(const AdamWConfig& c, std::int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  if (step >= c.total_steps) return c.min_lr;
  const double span = static_cast<double>(std::max<std::int64_t>(1, c.total_steps - c.warmup_steps));
  const double ratio = static_cast<double>(step - c.warmup_steps) / span;  // [0, 1)
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return c.min_lr + coeff * (c.lr - c.min_lr);
}

double clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  // torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6), capped at 1.
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

namespace {

// bf16 -> fp32 on raw bits (exact), written so that the loop vectorizes (through c10's
// scalar conversion the update ran 2.7x slower).
inline float bf16_to_float(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
struct Update {  // one step's constants
  float b1, b2, omb1, omb2, step_size, inv_sqrt_bc2, eps, lr_wd, unscale, clip;
};

inline float widen(float g) { return g; }
inline float widen(c10::BFloat16 g) { return bf16_to_float(g.x); }
inline float widen(c10::Half g) { return static_cast<float>(g); }

// [begin, end) in one pass, G the gradient's element type, kMask: dm is the decay mask (else
// null: every element decays). The gradient is multiplied by unscale and then clip as it is
// read (each a rounding, as two in-place multiplies make). Elementwise, so any split of the
// range gives the same bits.
// Measured on the 2-core AMX Xeon, gpt2's 124 M elements: one loop, not blocks of widen /
// update / narrow (those ran 1.5x slower); the mask in fp32, not uint8 (whose widening
// does not vectorize without SSE4.1: 1.4x slower); the bf16 replica not written here (the
// same pass writing it ran 1.9x slower than the update plus a separate vectorized copy).
template <typename G, bool kMask>
void update_range(const Update& k, float* p, const G* g, float* m,
                  float* v, const float* dm, std::int64_t begin, std::int64_t end) {
  // Constants in locals: stores to p, m, v could alias k's floats, which would keep the loop
  // from vectorizing (1.4x slower).
  const float b1 = k.b1, b2 = k.b2, omb1 = k.omb1, omb2 = k.omb2, step_size = k.step_size;
  const float inv_sqrt_bc2 = k.inv_sqrt_bc2, eps = k.eps, lr_wd = k.lr_wd, unscale = k.unscale,
              clip = k.clip;
  // No branch in the loop (GCC then does not vectorize it): x * 1 is exact, so multiplying by
  // unscale and clip when they are 1 gives the bits of not multiplying.
  for (std::int64_t i = begin; i < end; ++i) {
    const float gi = (widen(g[i]) * unscale) * clip;
    const float mi = b1 * m[i] + omb1 * gi;
    const float vi = b2 * v[i] + omb2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float pi = p[i];
    float wd = lr_wd;
    if constexpr (kMask) wd = lr_wd * dm[i];
    pi = pi - wd * pi;  // decoupled weight decay, before the Adam step (torch.optim.AdamW)
    p[i] = pi - step_size * (mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

template <typename G>
void run(const Update& k, float* p, const G* g, float* m, float* v, const float* dm, std::int64_t n) {
  at::parallel_for(0, n, 1 << 14, [&](std::int64_t b, std::int64_t e) {
    if (dm) update_range<G, true>(k, p, g, m, v, dm, b, e);
    else update_range<G, false>(k, p, g, m, v, dm, b, e);
  });
}

}  // namespace

void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg,
                  torch::Tensor& exp_avg_sq, std::int64_t step, double lr, const AdamWConfig& c,
                  const torch::Tensor& decay, const AdamWExtras& x) {
  // A profiler scope (suite/micro/profile_train.cpp): our loop is no aten op. A branch when
  // no profiler runs.
  RECORD_FUNCTION("sb::adamw", c10::ArrayRef<const c10::IValue>{});
  SB_CHECK(step >= 1, "adamw_update: step is 1-based (bias correction), got {}", step);
  const std::int64_t n = param.numel();
  SB_CHECK(grad.numel() == n && exp_avg.numel() == n && exp_avg_sq.numel() == n &&
               (!decay.defined() || decay.numel() == n),
           "adamw_update: param has {} elements but grad {}, exp_avg {}, exp_avg_sq {}, decay {}",
           n, grad.numel(), exp_avg.numel(), exp_avg_sq.numel(), decay.defined() ? decay.numel() : -1);
  auto check = [&](const torch::Tensor& t, const char* what, std::initializer_list<torch::ScalarType> ok) {
    SB_CHECK(std::find(ok.begin(), ok.end(), t.scalar_type()) != ok.end() && t.is_contiguous() &&
                 t.device() == param.device(),
             "adamw_update: {} must be contiguous {} on {}; got {} {} on {}", what,
             ok.size() == 1 ? "fp32" : "fp32/bf16/fp16", param.device().str(),
             c10::toString(t.scalar_type()), t.is_contiguous() ? "contiguous" : "strided", t.device().str());
  };
  for (auto* t : {&param, &exp_avg, &exp_avg_sq}) check(*t, "param and the moments", {torch::kFloat32});
  check(grad, "grad", {torch::kFloat32, torch::kBFloat16, torch::kHalf});

  const float b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
  const float omb1 = static_cast<float>(1.0 - c.beta1), omb2 = static_cast<float>(1.0 - c.beta2);
  const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(c.eps);
  const float lr_wd = static_cast<float>(lr * c.weight_decay);

  if (!param.device().is_cpu()) {
    // Other devices: the same formula with tensor ops (bit-equality across pieces is a CPU claim).
    auto g = grad.to(torch::kFloat32);
    if (x.unscale != 1.0) g = g * x.unscale;
    if (x.clip != 1.0) g = g * x.clip;
    auto dec = decay.defined() ? decay.to(param.dtype()) * lr_wd : torch::full({}, lr_wd, param.options());
    param.sub_(param * dec);
    exp_avg.mul_(b1).add_(g, omb1);
    exp_avg_sq.mul_(b2).addcmul_(g, g, omb2);
    param.addcdiv_(exp_avg, exp_avg_sq.sqrt().mul_(inv_sqrt_bc2).add_(eps), -step_size);
    return;
  }
  torch::Tensor dec;
  if (decay.defined()) {
    dec = decay.to(torch::kFloat32).contiguous();
    SB_CHECK(dec.device().is_cpu(), "adamw_update: decay mask must be on the CPU like param");
  }
  const Update k{b1, b2, omb1, omb2, step_size, inv_sqrt_bc2, eps, lr_wd,
                 static_cast<float>(x.unscale), static_cast<float>(x.clip)};
  float* p = param.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const float* dm = dec.defined() ? dec.data_ptr<float>() : nullptr;
  switch (grad.scalar_type()) {
    case torch::kBFloat16: run(k, p, grad.data_ptr<c10::BFloat16>(), m, v, dm, n); break;
    case torch::kHalf: run(k, p, grad.data_ptr<c10::Half>(), m, v, dm, n); break;
    default: run(k, p, grad.data_ptr<float>(), m, v, dm, n); break;
  }
}

double sum_squares(const torch::Tensor& g, double unscale) {
  RECORD_FUNCTION("sb::grad_norm", c10::ArrayRef<const c10::IValue>{});  // a profiler scope
  SB_CHECK(g.is_contiguous(), "sum_squares: the gradient must be contiguous");
  if (!g.device().is_cpu()) return (g.to(torch::kFloat64) * unscale).pow(2).sum().item<double>();
  constexpr std::int64_t kSumBlock = 4096, kLanes = 16;
  const std::int64_t n = g.numel(), blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(static_cast<std::size_t>(blocks));
  const float us = static_cast<float>(unscale);
  auto run = [&](const auto* x) {
    at::parallel_for(0, blocks, 16, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {
        const std::int64_t lo = b * kSumBlock, hi = std::min(n, lo + kSumBlock);
        float lane[kLanes] = {};  // 16 independent sums: vectorizable without reassociation
        std::int64_t i = lo;
        for (; i + kLanes <= hi; i += kLanes)
          for (int j = 0; j < kLanes; ++j) {
            const float y = widen(x[i + j]) * us;
            lane[j] += y * y;
          }
        double s = 0;
        for (; i < hi; ++i) {
          const float y = widen(x[i]) * us;
          s += static_cast<double>(y * y);
        }
        for (float l : lane) s += l;
        part[static_cast<std::size_t>(b)] = s;
      }
    });
  };
  switch (g.scalar_type()) {
    case torch::kBFloat16: run(g.data_ptr<c10::BFloat16>()); break;
    case torch::kHalf: run(g.data_ptr<c10::Half>()); break;
    case torch::kFloat32: run(g.data_ptr<float>()); break;
    default: SB_CHECK(false, "sum_squares: fp32, bf16 or fp16 gradients, got {}", c10::toString(g.scalar_type()));
  }
  double s = 0;
  for (double v : part) s += v;
  return s;
}

}  // namespace sb::optim
