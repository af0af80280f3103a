// AdamW and the warm-up + cosine schedule. The update is a plain elementwise loop in fp32
// compiled with -ffp-contract=off (workloads/CMakeLists.txt), so every element's result
// depends only on that element's inputs: applying it to a whole tensor or to contiguous
// pieces of it (the sharded optimizer's flat shards) gives identical bits.
#include "workloads/optim/adamw.h"

#include <algorithm>
#include <cmath>

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

void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg,
                  torch::Tensor& exp_avg_sq, std::int64_t step, double lr, const AdamWConfig& c,
                  const torch::Tensor& decay) {
  // A profiler scope (suite/micro/profile_train.cpp): our loop is no aten op. A branch when
  // no profiler runs.
  RECORD_FUNCTION("sb::adamw", c10::ArrayRef<const c10::IValue>{});
  SB_CHECK(step >= 1, "adamw_update: step is 1-based (bias correction), got {}", step);
  const std::int64_t n = param.numel();
  SB_CHECK(grad.numel() == n && exp_avg.numel() == n && exp_avg_sq.numel() == n &&
               (!decay.defined() || decay.numel() == n),
           "adamw_update: param has {} elements but grad {}, exp_avg {}, exp_avg_sq {}, decay {}",
           n, grad.numel(), exp_avg.numel(), exp_avg_sq.numel(), decay.defined() ? decay.numel() : -1);
  for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{&param, &grad, &exp_avg, &exp_avg_sq})
    SB_CHECK(t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->device() == param.device(),
             "adamw_update: every tensor must be contiguous fp32 on {}; got {} {} on {}",
             param.device().str(), c10::toString(t->scalar_type()), t->is_contiguous() ? "contiguous" : "strided",
             t->device().str());

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
    auto dec = decay.defined() ? decay.to(param.dtype()) * lr_wd : torch::full({}, lr_wd, param.options());
    param.sub_(param * dec);
    exp_avg.mul_(b1).add_(grad, omb1);
    exp_avg_sq.mul_(b2).addcmul_(grad, grad, omb2);
    param.addcdiv_(exp_avg, exp_avg_sq.sqrt().mul_(inv_sqrt_bc2).add_(eps), -step_size);
    return;
  }
  torch::Tensor dec;
  if (decay.defined()) {
    dec = decay.to(torch::kFloat32).contiguous();
    SB_CHECK(dec.device().is_cpu(), "adamw_update: decay mask must be on the CPU like param");
  }
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const float* dm = dec.defined() ? dec.data_ptr<float>() : nullptr;
  at::parallel_for(0, n, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const float gi = g[i];
      const float mi = b1 * m[i] + omb1 * gi;
      const float vi = b2 * v[i] + omb2 * (gi * gi);
      m[i] = mi;
      v[i] = vi;
      float pi = p[i];
      const float wd = dm ? lr_wd * dm[i] : lr_wd;
      pi = pi - wd * pi;  // decoupled weight decay, before the Adam step (torch.optim.AdamW)
      p[i] = pi - step_size * (mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps));
    }
  });
}

}  // namespace sb::optim
