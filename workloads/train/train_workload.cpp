// The "train" workload on one rank: builds the model, communicator and FSDP engine from the
// point, runs warm-up + timed steps, and records steps (slowest rank's times), comm events,
// memory, evaluation and provenance. The harness gathers and writes the records.
#include "workloads/train/train_workload.h"

#include <ATen/Parallel.h>
#include <cmath>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>
#include <torch/version.h>

#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/mpi_context.h"
#include "harness/trace/recorder.h"
#include "workloads/comm/policy.h"
#include "workloads/data/batches.h"
#include "workloads/data/token_file.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/family.h"
#include "workloads/models/params.h"

namespace sb::train {
namespace {

using I = std::int64_t;


std::unique_ptr<data::BatchSource> make_source(const Point& p, const models::ModelConfig& m) {
  const I B = p.get_int("batch"), T = p.get_int("seq");
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const std::string d = p.get_string("data");
  if (!models::family(m.family).trains_on_token_files || d == "markov")
    return data::markov_source(m, B, T, seed, seed);
  auto tokens = std::make_shared<const std::vector<std::int32_t>>(data::read_token_file(d));
  return std::make_unique<data::TokenLmBatches>(tokens, B, T, seed);
}

// GFLOP/s of this rank's threads (docs/METRICS.md "MFU"): the best of 30 dense fp32
// 1024 x 1024 x 1024 at::mm, 2 * 1024^3 FLOPs each.
double measure_peak_gflops() {
  const I n = 1024;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  auto c = torch::mm(a, b);  // warm-up
  double best = 1e30;
  for (int r = 0; r < 30; ++r) {
    const double t0 = MPI_Wtime();
    c = torch::mm(a, b);
    best = std::min(best, MPI_Wtime() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

class TrainWorkload final : public sb::Workload {
 public:
  void run(RunContext& ctx) override;

 private:
  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before these are destroyed (their destructors wait on peers). Destroyed in
  // reverse order: the engine before the communicator it uses.
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<fsdp::Engine> engine_;
};

void TrainWorkload::run(RunContext& ctx) {
  const Point& p = ctx.point;
  at::set_num_threads(threads_per_rank(p.get_int("threads"), ctx.world));
  model_ = models::make_model(p.get_string("model"), p.get_string("attention"));
  auto& model = model_;
  comm_ = std::make_unique<comm::Communicator>(ctx.world, static_cast<int>(p.get_int("shard_group")));
  auto& comm = *comm_;

  const I steps = p.get_int("steps"), warmup = p.get_int("warmup");
  const I accum = p.get_int("grad_accum"), B = p.get_int("batch"), T = p.get_int("seq");
  fsdp::EngineConfig cfg;
  cfg.strategy = p.get_string("strategy");
  std::string progress = p.get_string("comm_progress");
  if (progress == "auto")  // train_task.cpp says why
    progress = fsdp::strategy_layout(cfg.strategy).params_sharded ? "poll" : "inline";
  comm.set_progress(comm::progress_from_name(progress));
  cfg.param_dtype = fsdp::dtype_from_name(p.get_string("dtype"));
  cfg.reduce_dtype = fsdp::dtype_from_name(p.get_string("reduce_dtype"));
  cfg.prefetch = p.get_bool("prefetch");
  cfg.compression = comm::policy_from_point(p);
  cfg.adamw.lr = p.get_double("lr");
  cfg.adamw.min_lr = p.get_double("min_lr");
  cfg.adamw.weight_decay = p.get_double("weight_decay");
  cfg.adamw.grad_clip = p.get_double("grad_clip");
  cfg.adamw.warmup_steps = p.get_int("lr_warmup");
  cfg.adamw.total_steps = steps;
  engine_ = std::make_unique<fsdp::Engine>(
      *model, comm, cfg,
      models::init_params(model->units(), static_cast<std::uint64_t>(p.get_int("seed"))));
  auto& engine = *engine_;
  const std::string ckpt = p.get_string("checkpoint_dir");
  if (p.get_bool("resume")) {
    engine.load(ckpt);  // every rank the same step, or every rank throws
    // Nothing left to train would record 0 steps and report the longer run's model as done.
    if (engine.steps_done() >= steps)
      SB_FAIL("resume: the checkpoint in {} is at step {}, and this point asks for steps = {}, "
              "so there is nothing left to train; raise steps above {}, or set resume = false "
              "to train from the start", ckpt, engine.steps_done(), steps, engine.steps_done());
  }
  auto source = make_source(p, model->config());

  const double origin = MPI_Wtime();
  comm.set_trace_hook([&](const sb::CommEvent& e) { ctx.recorder.comm(e); }, origin);
  double peak = p.get_double("peak_gflops");
  if (peak <= 0) {  // the slowest rank's measurement: MFU is then an upper bound, not flattered
    peak = measure_peak_gflops();
    MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MIN, ctx.world);
  }
  const double flops_per_token = model->train_flops_per_token(T);
  engine.reset_peak();

  // Held-out loss over eval_batches global batches: every rank its rows, weighted by terms.
  auto evaluate = [&] {
    double sum = 0;
    I terms_total = 0;
    for (I i = 0; i < p.get_int("eval_batches"); ++i) {
      auto g = source->heldout(i);
      auto mine = data::rank_rows(g, ctx.rank, ctx.size);
      const I terms = fsdp::loss_terms(mine);
      sum += engine.forward_loss(mine).item<double>() * static_cast<double>(terms);
      terms_total += fsdp::loss_terms(g);
    }
    return comm.all_reduce_scalar(sum, comm::Group::World) / static_cast<double>(terms_total);
  };

  ctx.progress.begin(fmt::format("train {}", p.name), static_cast<long>(steps));
  const I eval_every = p.get_int("eval_every");
  for (I s = engine.steps_done(); s < steps; ++s) {
    comm.set_step(s);
    sb::fault_set_step(s);
    sb::fault_point("step");  // tests/mpi/failure_paths.sh
    auto global = source->train(s);
    auto micro = data::split_rows(data::rank_rows(global, ctx.rank, ctx.size), accum);
    const double t0 = MPI_Wtime();
    const auto st = engine.step(micro, fsdp::loss_terms(global));
    const double wall = MPI_Wtime() - t0;
    SB_CHECK(std::isfinite(st.loss), "step {}: the loss is {} (diverged); lower lr (now {}) or "
             "raise grad_clip's effect by lowering it (now {})", s, st.loss, cfg.adamw.lr,
             cfg.adamw.grad_clip);
    // Outside the timed region: the slowest rank's times.
    double v[5] = {wall, st.forward_s, st.backward_s, st.optimizer_s, st.comm_exposed_s};
    sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_DOUBLE, MPI_MAX, ctx.world),
                  "MPI_Allreduce (step times)");
    sb::StepRecord r;
    r.step = s;
    r.warmup = s < warmup;
    r.wall_s = v[0];
    r.forward_s = v[1];
    r.backward_s = v[2];
    r.optimizer_s = v[3];
    r.comm_exposed_s = v[4];
    r.loss = st.loss;
    r.grad_norm = st.grad_norm;
    const double tokens = static_cast<double>(B * T);
    r.tokens_per_s = tokens / v[0];
    r.samples_per_s = static_cast<double>(B) / v[0];
    r.mfu = flops_per_token * tokens / v[0] / (peak * 1e9 * ctx.size);
    ctx.recorder.step(r);
    ctx.progress.step(static_cast<long>(s + 1), fmt::format("loss {:.4f}", st.loss));
    if (eval_every > 0 && (s + 1) % eval_every == 0 && s + 1 < steps)
      ctx.recorder.series("eval_loss", evaluate());
    if (ctx.stop_agreed()) break;  // every rank gets the same answer: all leave together
  }
  ctx.progress.end();
  comm.set_trace_hook(nullptr, origin);  // evaluation and checkpoints are not step traffic
  // Saved before the final evaluation, which draws from the compressors' random generators
  // (stochastic int8 parameter gathers): the checkpoint holds the state the next step needs.
  if (!ckpt.empty()) engine.save(ckpt);

  sb::RankMemory m = sb::rank_memory_now(ctx.rank);
  fsdp::add_engine_memory(engine.memory(), m);
  ctx.recorder.memory(m);

  const double eval = evaluate();
  ctx.recorder.scalar("final_eval_loss", eval);
  ctx.recorder.series("eval_loss", eval);
  if (!std::isnan(source->loss_floor())) ctx.recorder.scalar("loss_floor", source->loss_floor());
  ctx.recorder.scalar("peak_gflops_per_rank", peak);
  ctx.recorder.scalar("params", static_cast<double>(models::count_params(model->units())));
  ctx.recorder.scalar("model_state_bytes_formula",
                      static_cast<double>(fsdp::model_state_bytes(
                          model->units(), cfg.strategy, ctx.size, comm.size(comm::Group::Shard),
                          cfg.param_dtype, static_cast<int>(accum))));
  ctx.recorder.scalar("threads_per_rank", at::get_num_threads());
  ctx.recorder.text("torch_version", TORCH_VERSION);
  ctx.recorder.text("cpu_allocator", models::cpu_allocator_name());
  ctx.recorder.text("compression_policy", cfg.compression.describe());
  // How requests progressed: thread / poll / inline, or "blocking" without a thread
  // (MPI_THREAD_MULTIPLE missing) where every collective ran inline and blocking.
  ctx.recorder.text("comm_progress", comm.async() || comm.progress_mode() == comm::ProgressMode::Inline
                                         ? comm::progress_name(comm.progress_mode())
                                         : "blocking");
  const std::string out = p.get_string("export_safetensors");
  if (!out.empty()) {
    auto full = engine.full_params();  // collective: every rank takes part
    if (ctx.rank == 0) data::save_checkpoint(*model, full, out);
  }
}

}  // namespace

std::unique_ptr<sb::Workload> make_train_workload() { return std::make_unique<TrainWorkload>(); }

}  // namespace sb::train
