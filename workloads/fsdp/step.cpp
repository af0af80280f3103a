// One optimizer step of the FSDP engine: the micro-steps (forward, backward, the gradient
// reductions the hooks start), the global loss, the gradient norm and clip, dynamic loss
// scaling, and the sharded AdamW update followed by the strategy's after-update collectives.
#include <cmath>

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/unit.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"

namespace sb::fsdp {

std::int64_t loss_terms(const models::Batch& b) {
  if (b.targets.defined()) return (b.targets != -100).sum().item<std::int64_t>();
  SB_CHECK(b.labels.defined(), "a batch needs targets or labels to have a loss");
  return b.labels.size(0);
}

StepStats Engine::step(const std::vector<models::Batch>& micro, std::int64_t global_terms) {
  SB_CHECK(!micro.empty(), "a step needs at least one micro-batch");
  SB_CHECK(!cfg_.forward_only, "Engine::step on a forward-only engine (EngineConfig::forward_only)");
  SB_CHECK(global_terms > 0, "the step's global batch has {} loss terms", global_terms);
  if (model_.pipeline().on()) return pipeline_step(micro, global_terms);
  StepStats s;
  comm_.reset_exposed();
  gather_wait_s_ = 0;
  accumulating_ = micro.size() > 1;
  refresh_replicas();

  double local = 0;
  for (std::size_t i = 0; i < micro.size(); ++i) {
    final_micro_ = i + 1 == micro.size();
    const std::int64_t terms = loss_terms(micro[i]);
    SB_CHECK(terms > 0, "micro-batch {} on rank {} has no loss terms (every target is -100); "
             "use a larger batch", i, comm_.rank());
    const double t0 = MPI_Wtime();
    sb::heartbeat::set_phase("forward");
    models::set_cpu_phase("forward");  // until the first unit's acquire
    begin_forward();
    auto loss = loss_fn_ ? loss_fn_(*this, micro[i]) : model_.loss(*this, micro[i]);
    end_forward();
    // The forward waited for each unit's overlapped update as it gathered it; backward
    // writes the gradients the update read, so none may still run; then the last step's
    // gradients go (drop_grads).
    if (i == 0) updates_.drain(), drop_grads();
    // Weighted so that summing over ranks and micro-steps gives the global mean (times the
    // loss scale, 1 without scaling: the same bits).
    // Scaled in fp32: an fp16 loss times the scale overflows long before its gradients do.
    auto scaled = (cfg_.loss_scaling ? loss.to(torch::kFloat32) : loss) *
                  (static_cast<double>(terms) / static_cast<double>(global_terms) * scale_);
    models::synchronize(cfg_.device);  // GPU kernels run asynchronously: time what ran
    const double t1 = MPI_Wtime();
    if (i == 0) s.comm_exposed_forward_s = comm_.exposed_s();
    sb::heartbeat::set_phase("backward");
    models::set_cpu_phase("backward of the loss");  // until the first unit's hook
    scaled.backward();
    local += scaled.item<double>() / scale_;
    if (final_micro_) finish_grads();
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) free_unit(u);  // unused in backward
    models::synchronize(cfg_.device);
    const double t2 = MPI_Wtime();
    s.forward_s += t1 - t0;
    s.backward_s += t2 - t1;
  }
  return finish_step(s, local);
}

// The last step's gradients, which the update read, go before this step's backward forms the
// new ones: kept until finish_grads replaced them, both sets were alive at backward's end
// (measured: gpt2-long in bf16 under full recomputation, no_shard, 1 rank: 284 MiB more,
// the step's peak; docs/METRICS.md "Memory model"). Between steps they stay for inspection.
void Engine::drop_grads() {
  for (auto& U : units_) U->grad = U->part = torch::Tensor();  // part: a backward that failed
}

StepStats Engine::finish_step(StepStats& s, double local_loss) {
  const double t3 = MPI_Wtime(), exposed_before_opt = comm_.exposed_s();
  sb::heartbeat::set_phase("optimizer");
  models::set_cpu_phase("optimizer");
  // The ranks of a tp group computed the same loss (tensor_parallel.h), and every rank of a
  // pipeline holds the last stage's: counted once per data-parallel rank.
  s.loss = comm_.all_reduce_scalar(comm_.model_parallel_leader() ? local_loss : 0.0, comm::Group::World);
  s.loss_scale = scale_;
  optimizer_step(s);
  models::synchronize(cfg_.device);
  s.optimizer_s = MPI_Wtime() - t3;
  s.comm_exposed_s = comm_.exposed_s();
  s.comm_exposed_optimizer_s = s.comm_exposed_s - exposed_before_opt;
  s.gather_wait_s = gather_wait_s_;
  ++step_;
  return s;
}

// Dynamic loss scaling (EngineConfig::loss_scaling, torch.cuda.amp.GradScaler's rule): true
// when this step's gradients are not finite on some rank, which skips the update on every
// rank and halves the scale; else counts a good step and doubles the scale after
// loss_scale_growth_interval of them in a row.
bool Engine::loss_scaler_skips(double sumsq, StepStats& s) {
  // Every rank decides alike: inf or nan anywhere skips the step everywhere.
  const double bad = std::isfinite(sumsq) ? 0.0 : 1.0;
  if (comm_.all_reduce_scalar(bad, comm::Group::World, comm::ReduceOp::Max) > 0) {
    s.skipped = true;
    ++skipped_;
    // Every rank alike: a run whose gradients stay non-finite has diverged, not overflowed.
    SB_CHECK(++skipped_in_row_ < kMaxSkipsInARow,
             "loss scaling: {} steps in a row had non-finite gradients (scale down to {:g} "
             "from loss_scale_init {:g}): the run diverged; lower lr (now {:g}) or train in "
             "bf16", skipped_in_row_, scale_, cfg_.loss_scale_init, cfg_.adamw.lr);
    good_steps_ = 0;
    scale_ *= 0.5;
    return true;
  }
  skipped_in_row_ = 0;
  if (++good_steps_ >= cfg_.loss_scale_growth_interval) {
    good_steps_ = 0;
    scale_ *= 2.0;
  }
  return false;
}

void Engine::optimizer_step(StepStats& s) {
  std::vector<torch::Tensor> gs;  // this rank's optimizer slice of each unit's gradient
  // Tensor parallelism: each tp rank holds a different block of a split parameter (summed over
  // tp) and the same copy of a replicated one (LayerNorm, biases after a row-parallel layer,
  // wpe: counted once), as Megatron's clip_grad_norm does.
  // A pipeline's copy of a tied unit (UnitSpec::pp_copy) equals its original: counted once.
  // A low-precision gradient (bf16/fp16 reduce dtype) is unscaled as it is read (by
  // sum_squares and by the update); an fp32 one in place.
  const double unscale = cfg_.loss_scaling ? 1.0 / scale_ : 1.0;
  // Expert parallelism: an experts unit differs between the ranks of an ep group; where each
  // rank's optimizer holds the whole unit (not sharded) those are summed over ep.
  double sumsq = 0, split = 0, experts = 0;
  for (auto& U : units_) {
    auto g = layout_.grads_sharded ? U->grad : U->grad.narrow(0, U->opt_off, U->opt_n);
    const bool lp = U->grad.scalar_type() != torch::kFloat32;
    if (cfg_.loss_scaling && !lp) g.mul_(unscale);  // unscaled before the norm and the clip
    if (U->pp_copy) {
      gs.push_back(g);
      continue;
    }
    double n2 = 0, ns2 = 0;
    if (lp) {
      n2 = optim::sum_squares(g, unscale);
    } else {
      const double n = g.norm().item<double>();
      n2 = n * n;
    }
    if (U->tp_split.defined()) {
      const double ns = (g.to(torch::kFloat32) * (lp ? unscale : 1.0) * U->tp_split).norm().item<double>();
      ns2 = ns * ns;
    }
    (U->expert && !layout_.optim_sharded ? experts : sumsq) += n2 - ns2;
    split += ns2;
    gs.push_back(g);
  }
  if (layout_.optim_sharded) sumsq = comm_.all_reduce_scalar(sumsq, shard_group_);
  if (comm_.size(comm::Group::Ep) > 1 && !layout_.optim_sharded)
    experts = comm_.all_reduce_scalar(experts, comm::Group::Ep);
  sumsq += experts;
  if (layout_.optim_sharded && comm_.size(comm::Group::Tp) > 1)
    split = comm_.all_reduce_scalar(split, shard_group_);
  if (comm_.size(comm::Group::Tp) > 1) sumsq += comm_.all_reduce_scalar(split, comm::Group::Tp);
  if (comm_.size(comm::Group::Pp) > 1) sumsq = comm_.all_reduce_scalar(sumsq, comm::Group::Pp);  // the stages'
  s.grad_norm = std::sqrt(sumsq);
  if (cfg_.loss_scaling && loss_scaler_skips(sumsq, s)) return;
  const double coef = optim::clip_coefficient(s.grad_norm, cfg_.adamw.grad_clip);
  const double lr = optim::lr_at(cfg_.adamw, step_);
  const bool after_update = info_.has_phase(StepPhase::after_optimizer);
  // Adam's step count: the updates applied (skipped steps do not count, as in PyTorch).
  const std::int64_t t = step_ + 1 - skipped_;
  // One unit's update: what the overlapped update runs on its thread (captured by value: it
  // outlives this call), and the synchronous one here.
  auto update = [this, gs, unscale, coef, lr, t](int u) {
    torch::NoGradGuard ng;
    sb::heartbeat::tick();  // a long update (large units, offloaded state) still beats
    Unit& U = *units_[static_cast<std::size_t>(u)];
    torch::Tensor g = gs[static_cast<std::size_t>(u)];
    optim::AdamWExtras x;
    if (U.grad.scalar_type() != torch::kFloat32) {
      x.unscale = unscale;
      x.clip = coef;
    } else if (coef < 1.0) {
      g.mul_(coef);
    }
    if (store_) {  // the moments (and master) stream from disk block by block: the same
                   // elementwise update
      store_->stream(u, [&](std::int64_t off, std::int64_t n, const OffloadStore::Block& b) {
        auto pb = b.p ? torch::from_blob(b.p, {n}) : U.master.narrow(0, U.opt_off + off, n);
        auto m = torch::from_blob(b.m, {n}), v = torch::from_blob(b.v, {n});
        const auto d = torch::from_blob(const_cast<float*>(b.decay), {n});
        optim::adamw_update(pb, g.narrow(0, off, n), m, v, t, lr, cfg_.adamw, d, x);
        if (b.p && U.mask.defined()) pb.mul_(U.mask.narrow(0, off, n));  // opt_off is 0: sharded
      });
    } else {
      auto p = U.master.narrow(0, U.opt_off, U.opt_n);
      optim::adamw_update(p, g, U.exp_avg, U.exp_avg_sq, t, lr, cfg_.adamw, U.decay, x);
    }
    if (U.mask.defined() && U.master.defined()) U.master.mul_(U.mask);
  };
  if (overlaps_update()) {  // in the order the next forward will gather the units
    std::vector<int> order;
    std::vector<char> seen(units_.size(), 0);
    for (const int u : last_acquire_order_)
      if (!seen[static_cast<std::size_t>(u)]) seen[static_cast<std::size_t>(u)] = 1, order.push_back(u);
    for (int u = 0; u < static_cast<int>(units_.size()); ++u)
      if (!seen[static_cast<std::size_t>(u)]) order.push_back(u);
    updates_.start(std::move(order), update);
    return;
  }
  for (std::size_t u = 0; u < units_.size(); ++u) {
    update(static_cast<int>(u));
    if (after_update) {  // the other ranks' parts arrive masked by them
      Unit& U = *units_[u];
      Collectives::ExpertScope scope(*coll_, U.expert);
      strategy_->after_update(*coll_, U.master, U.range);
    }
  }
}

// The update overlaps the next forward only where that forward's all-gather is each unit's
// first reader (parameters sharded), nothing after the update communicates (no
// after-optimizer phase: zero1's all-gather), no pipeline schedule holds the units, and the
// moments are on disk (in memory the update takes a tenth of a second: nothing to hide).
bool Engine::overlaps_update() const {
  return store_ && cfg_.offload_overlap && layout_.params_sharded && !info_.has_phase(StepPhase::after_optimizer) &&
         !model_.pipeline().on();
}

}  // namespace sb::fsdp
