// AdamW and the learning-rate schedule: the one implementation of the update math, used by
// the reference trainer on whole tensors and by the sharded optimizer on flat shards.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace sb::optim {

struct AdamWConfig {
  double lr = 6e-4;        // peak learning rate
  double min_lr = 6e-5;    // cosine floor
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global L2 norm; <= 0 disables
  std::int64_t warmup_steps = 0, total_steps = 1;
};

// Learning rate at optimizer step `step` (0-based): linear warm-up to lr, then cosine to min_lr.
double lr_at(const AdamWConfig& c, std::int64_t step);

// What the update does to the gradient as it reads it (the engine's low-precision path:
// docs/PERFORMANCE.md "Training beside torch.compile"): multiplied by unscale and then by clip
// (two roundings, as two in-place multiplies would make). One pass over memory instead of
// three (cast to fp32, unscale or clip, update).
struct AdamWExtras {
  double unscale = 1.0, clip = 1.0;
};

// In-place AdamW on equally shaped contiguous tensors (any shape; flat shards included):
// param, exp_avg, exp_avg_sq fp32; grad fp32, bf16 or fp16 (read as fp32: exact).
// step is 1-based (bias correction). decay: undefined = decay every element; else a tensor
// like param holding 1 where weight decay applies and 0 where it does not (biases, LayerNorm).
// Decoupled decay: p -= lr * wd * decay * p, then the Adam update.
void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg,
                  torch::Tensor& exp_avg_sq, std::int64_t step, double lr, const AdamWConfig& c,
                  const torch::Tensor& decay, const AdamWExtras& x = {});

// Sum over the elements of (g * unscale)^2, g fp32, bf16 or fp16, in fixed blocks of 4096
// whose double sums add in order: the same bits whatever the thread count. The engine's norm of
// a low-precision gradient without an fp32 copy of it.
double sum_squares(const torch::Tensor& g, double unscale = 1.0);

// Factor to multiply gradients by so that their global L2 norm is at most max_norm
// (1 when already smaller or max_norm <= 0). total_norm is the norm over ALL gradients
// (the sharded engine sums squares across ranks before calling this).
double clip_coefficient(double total_norm, double max_norm);

}  // namespace sb::optim
