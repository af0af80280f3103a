// One optimizer step of a model cut into pipeline stages (engine.h Engine::step; docs/FSDP.md
// "Pipeline parallelism in the models"): the schedule's forwards and backwards over the pp group
// (workloads/parallel/pp_runner.h), the tied embedding's gradient summed between the first and
// last stages, one reduction per unit over the data-parallel ranks, then the optimizer as in a
// step without pipelining (step.cpp).
#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/unit.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/parallel/pp_runner.h"

namespace sb::fsdp {

namespace {
// The stages as the runner drives them: model.stage_forward on the engine, and each
// micro-batch's loss weighted by its share of the step's loss terms (times the loss scale).
parallel::PipelineStages stages_of(models::Model& model, models::ParamProvider& p,
                                   const std::vector<models::Batch>& micro, std::int64_t global_terms,
                                   double scale, bool loss_scaling, torch::ScalarType dtype) {
  parallel::PipelineStages st;  // the codecs: the engine's
  st.act_shape = model.stage_activation_shape(micro.at(0));
  st.act_dtype = dtype;
  st.forward = [&model, &p, &micro](int chunk, int mb, const torch::Tensor& x) {
    return model.stage_forward(p, chunk, micro.at(static_cast<std::size_t>(mb)), x);
  };
  st.loss = [&micro, global_terms, scale, loss_scaling](const torch::Tensor& loss, int mb) {
    const double w = static_cast<double>(loss_terms(micro.at(static_cast<std::size_t>(mb)))) /
                     static_cast<double>(global_terms) * scale;
    return (loss_scaling ? loss.to(torch::kFloat32) : loss) * w;
  };
  return st;
}
}  // namespace

StepStats Engine::pipeline_step(const std::vector<models::Batch>& micro, std::int64_t global_terms) {
  updates_.drain();  // a pipelined engine never overlaps (overlaps_update); to be sure
  drop_grads();
  const auto& cut = model_.pipeline();
  for (std::size_t i = 0; i < micro.size(); ++i)
    SB_CHECK(loss_terms(micro[i]) > 0, "micro-batch {} on rank {} has no loss terms (every target "
             "is -100); use a larger batch", i, comm_.rank());
  StepStats s;
  comm_.reset_exposed();
  gather_wait_s_ = 0;
  refresh_replicas();
  // Every backward accumulates into U.acc (on_grad's non-final micro-step); the units stay
  // gathered until the step ends.
  final_micro_ = false;
  hold_gathered_ = true;
  begin_forward();
  const double t0 = MPI_Wtime();
  sb::heartbeat::set_phase("pipeline");
  models::set_cpu_phase("pipeline gathers");  // then the units' hooks name the schedule's work
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) ensure_gathered(u);
  s.comm_exposed_forward_s = comm_.exposed_s();
  auto st = stages_of(model_, *this, micro, global_terms, scale_, cfg_.loss_scaling, cfg_.param_dtype);
  st.act_codec = pp_act_codec_, st.grad_codec = pp_grad_codec_;
  const double sum = parallel::pipeline_step(comm_, parallel::find_pp_schedule(cfg_.pp_schedule),
                                             static_cast<int>(micro.size()), cut.v, st, {});
  end_forward();
  models::synchronize(cfg_.device);
  const double t1 = MPI_Wtime();
  sb::heartbeat::set_phase("backward");
  models::set_cpu_phase("pipeline gradient reductions");
  sum_tied_grads();
  final_micro_ = true;
  for (auto& U : units_)
    if (U->acc.defined()) reduce_unit(*U, U->acc);
  finish_grads();
  hold_gathered_ = false;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) free_unit(u);
  note_memory();
  models::synchronize(cfg_.device);
  const double t2 = MPI_Wtime();
  // The schedule interleaves forwards and backwards: forward_s is the whole schedule,
  // backward_s the gradient reduction after it.
  s.forward_s = t1 - t0;
  s.backward_s = t2 - t1;
  return finish_step(s, sum / scale_);  // every pp rank returned the pipeline's loss
}

// Megatron's embedding all-reduce between the first and last stages, as an exchange: each side
// sends its whole local gradient of the tied unit and adds the other's (a + b == b + a in IEEE
// arithmetic, so both hold the same bits), before the data-parallel reduction, which the two
// units' identical layouts make identical too.
void Engine::sum_tied_grads() {
  const int pp = comm_.size(comm::Group::Pp), r = comm_.rank(comm::Group::Pp);
  int tag = 0;
  for (auto& U : units_) {
    if (!U->pp_tied && !U->pp_copy) continue;
    const int peer = U->pp_copy ? 0 : pp - 1;
    SB_CHECK(peer != r, "a tied pipeline unit and its copy on the same rank {}", r);
    if (!U->acc.defined()) U->acc = torch::zeros({U->range.padded}, torch::TensorOptions().device(cfg_.device));
    auto other = torch::empty_like(U->acc);
    auto rq = comm_.recv_async(other, peer, comm::Group::Pp, "pp_tied", tag);
    auto sq = comm_.send_async(U->acc, peer, comm::Group::Pp, "pp_tied", tag);
    rq.wait();
    sq.wait();
    U->acc.add_(other);
    ++tag;
  }
}

double Engine::pipeline_loss(const models::Batch& b) {
  torch::NoGradGuard ng;
  refresh_replicas();
  begin_forward();
  hold_gathered_ = true;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) ensure_gathered(u);
  const std::vector<models::Batch> one = {b};
  auto st = stages_of(model_, *this, one, loss_terms(b), 1.0, false, cfg_.param_dtype);
  st.act_codec = pp_act_codec_;
  const double loss = parallel::pipeline_forward(comm_, model_.pipeline().v, st);
  hold_gathered_ = false;
  end_forward();
  return loss;
}

}  // namespace sb::fsdp
