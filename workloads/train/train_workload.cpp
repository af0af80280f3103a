// The "train" workload on one rank: builds the model, communicator and FSDP engine from the
// point, runs warm-up + timed steps, and records steps (slowest rank's times), comm events,
// memory, evaluation and provenance. The harness gathers and writes the records.
#include "workloads/train/train_workload.h"
#include "workloads/train/mfu.h"
#include "workloads/train/peak.h"

#include <ATen/Parallel.h>
#include <cmath>
#include <optional>
#include <filesystem>
#include <functional>
#include <limits>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/spec/mesh_config.h"
#include "harness/trace/recorder.h"
#include "workloads/comm/policy.h"
#include "workloads/data/batches.h"
#include "workloads/data/labelled.h"
#include "workloads/data/safetensors.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/training_source.h"
#include "workloads/distill/distill.h"
#include "workloads/distill/distill_config.h"
#include "workloads/distill/projected.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/params.h"
#include "workloads/parallel/ep_layers.h"
#include "workloads/parallel/layer_stats.h"
#include "workloads/parallel/sp_layers.h"
#include "workloads/parallel/tp_layers.h"
#include "workloads/prune/prune_keys.h"
#include "workloads/prune/pruner.h"
#include "workloads/prune/schedule.h"
#include "workloads/train/train_config.h"

namespace sb::train {
namespace {

// A layer's kept assignments (load summed over experts) and those whose expert ep rank
// `ep_rank` holds (experts [r E/ep, (r+1) E/ep) on rank r, moe.h).
std::pair<double, double> kept_and_mine(const models::MoeRouting& r, int ep_rank, int ep) {
  const std::int64_t per = static_cast<std::int64_t>(r.load.size()) / std::max(1, ep);
  double total = 0, mine = 0;
  for (std::size_t e = 0; e < r.load.size(); ++e) {
    total += static_cast<double>(r.load[e]);
    if (static_cast<std::int64_t>(e) / per == ep_rank) mine += static_cast<double>(r.load[e]);
  }
  return {total, mine};
}

// A mixture of experts' routing in the step's last forward (docs/METRICS.md "MoE"), averaged
// over its MoE layers: the share of a routing group's tokens passed through unprocessed
// (capacity), and the load imbalance max_e load_e / mean_e load_e of the kept assignments;
// under expert parallelism (ep ranks, this one ep_rank) the share of the kept assignments
// whose expert another ep rank holds (the tokens the dispatch all-to-all sends away).
void record_routing(sb::Recorder& rec, const models::Model& m, int ep_rank, int ep) {
  const auto* routing = m.moe_routing();
  if (!routing) return;
  double dropped = 0, imbalance = 0, away = 0;
  int layers = 0;
  for (const auto& r : *routing) {
    if (!r.choice.defined()) continue;
    const auto [total, mine] = kept_and_mine(r, ep_rank, ep);
    double most = 0;
    for (const auto n : r.load) most = std::max(most, static_cast<double>(n));
    away += total > 0 ? (total - mine) / total : 0.0;
    dropped += static_cast<double>(r.dropped_tokens) / static_cast<double>(r.choice.size(0));
    imbalance += total > 0 ? most / (total / static_cast<double>(r.load.size())) : 0.0;
    ++layers;
  }
  if (layers == 0) return;
  rec.scalar("moe_experts", static_cast<double>(m.config().moe.experts));
  // The widths moe-place's modelled scale sizes its rows by (analysis/exflow.py).
  rec.scalar("moe_d_model", static_cast<double>(m.config().d_model));
  rec.scalar("moe_every", static_cast<double>(m.config().moe.every));
  rec.series("moe_dropped_fraction", dropped / layers);
  rec.series("moe_load_imbalance", imbalance / layers);
  if (ep > 1) rec.series("moe_cross_rank_fraction", away / layers);
}

// Under expert parallelism, per MoE layer summed over the steps' last forwards (this rank):
// the kept assignments sent to another ep rank's expert and all of them, the forward dispatch
// and combine's input bytes and seconds, and the backward's all-to-all seconds (moe.h
// MoeRouting).
struct MoeLayers {
  std::vector<std::int64_t> layer;
  std::vector<double> sums;     // per layer: away, kept, a2a bytes
  std::vector<double> seconds;  // per layer: forward a2a, backward a2a
  double steps = 0;
  void add(const models::Model& m, int ep_rank, int ep) {
    const auto* routing = m.moe_routing();
    if (!routing || ep <= 1) return;
    std::size_t i = 0;
    for (std::size_t l = 0; l < routing->size(); ++l) {
      const auto& r = (*routing)[l];
      if (!r.choice.defined()) continue;
      if (i == layer.size()) {
        layer.push_back(static_cast<std::int64_t>(l));
        sums.insert(sums.end(), 3, 0.0);
        seconds.insert(seconds.end(), 2, 0.0);
      }
      const auto [total, mine] = kept_and_mine(r, ep_rank, ep);
      double* c = &sums[3 * i];
      c[0] += total - mine, c[1] += total, c[2] += static_cast<double>(r.a2a_bytes);
      seconds[2 * i] += r.a2a_s;
      seconds[2 * i + 1] += r.a2a_backward_s ? *r.a2a_backward_s : 0.0;
      ++i;
    }
    if (i > 0) ++steps;
  }
  // The per-layer series (docs/METRICS.md "MoE"): every rank's counts and bytes summed, the
  // slowest rank's seconds; per step. Collective over world.
  void record(sb::Recorder& rec, MPI_Comm world) {
    if (layer.empty()) return;
    parallel::reduce_layer_stats(sums, seconds, world);
    for (std::size_t i = 0; i < layer.size(); ++i) {
      const double* c = &sums[3 * i];
      rec.series("moe_layer", static_cast<double>(layer[i]));
      rec.series("moe_layer_cross_rank_fraction", c[1] > 0 ? c[0] / c[1] : 0.0);
      rec.series("moe_layer_a2a_bytes", c[2] / steps);
      rec.series("moe_layer_a2a_s", seconds[2 * i] / steps);
      rec.series("moe_layer_a2a_backward_s", seconds[2 * i + 1] / steps);
    }
  }
};

// Every token's routing at each MoE layer of the step's last forward (the /routing table).
void trace_routing(sb::Recorder& rec, const models::Model& m, std::int64_t step, int rank) {
  const auto* routing = m.moe_routing();
  if (!routing) return;
  for (std::size_t l = 0; l < routing->size(); ++l) {
    const auto& r = (*routing)[l];
    if (!r.choice.defined()) continue;
    const auto choice = r.choice.to(torch::kCPU).contiguous();
    const auto kept = r.kept.to(torch::kCPU).contiguous();
    const std::int64_t N = choice.size(0), k = choice.size(1);
    const auto* c = choice.data_ptr<std::int64_t>();
    const auto* kp = kept.data_ptr<bool>();
    for (std::int64_t n = 0; n < N; ++n)
      rec.add(sb::RoutingRecord{step, rank, static_cast<std::int32_t>(l), n, static_cast<std::int32_t>(c[n * k]),
                                k > 1 ? static_cast<std::int32_t>(c[n * k + 1]) : -1, kp[n * k]});
  }
}

using I = std::int64_t;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

std::string init_weights_path(const Point& p) {
  const std::string& from = config<RunKeys>(p).init;
  const std::string& model = config<ModelKeys>(p).model;
  if (from == "seed") return "";
  if (from.empty() && models::is_model_path(model)) return model;
  return from;
}

optim::AdamWConfig adamw_config(const Point& p) {
  optim::AdamWConfig a;
  const OptimKeys& o = config<OptimKeys>(p);
  a.lr = o.lr;
  a.min_lr = o.min_lr;
  a.weight_decay = o.weight_decay;
  a.grad_clip = o.grad_clip;
  a.warmup_steps = o.lr_warmup;
  a.total_steps = base_config(p).steps;
  return a;
}

namespace {

// The `init` key: a checkpoint (file or folder) to start from; "" starts from the model
// folder's weights when `model` is a folder, else from seeded weights; "seed" always seeded.
// Slice by slice, as the engine asks: a checkpoint's headers are checked first, then each rank
// reads only its shard's bytes, so no rank holds the whole model (tests/mpi/fsdp_lazy_load.cpp).
// `note` receives what the checkpoint held that is not loaded (CheckpointReader::note).
std::function<torch::Tensor(int, std::int64_t, std::int64_t)> initial_weights(
    const Point& p, const models::Model& m, std::string* note) {
  const std::string from = init_weights_path(p);
  if (from.empty()) {
    const auto seed = static_cast<std::uint64_t>(base_config(p).seed);
    return fsdp::unit_slices(m, [&m, seed](int u) { return models::init_unit(m.units(), u, seed); });
  }
  auto reader = std::make_shared<data::CheckpointReader>(m, from);
  *note = reader->note();
  return [reader](int u, std::int64_t off, std::int64_t n) { return reader->slice(u, off, n); };
}

// `dtype_why` receives how the `dtype` key (auto) became the compute dtype on `device`.
fsdp::EngineConfig engine_config(const Point& p, const torch::Device& device,
                                 std::string* dtype_why) {
  fsdp::EngineConfig cfg;
  cfg.strategy = config<ModelKeys>(p).strategy;
  cfg.device = device;
  const StepKeys& step = config<StepKeys>(p);
  cfg.param_dtype = models::resolve_dtype(config<TrainChoice>(p).dtype, device, dtype_why);
  cfg.reduce_dtype = models::dtype_from_name(step.reduce_dtype);
  cfg.prefetch = step.prefetch;
  cfg.pp_schedule = step.pp_schedule;
  cfg.offload_optimizer = step.offload_optimizer;
  cfg.offload_dir = offload_folder(step.offload_dir);
  cfg.offload_overlap = step.offload_overlap;
  cfg.offload_master = step.offload_param == "disk";
  cfg.compression = comm::policy_from_point(p);
  cfg.adamw = adamw_config(p);
  // fp16 anywhere in the step: dynamic loss scaling (EngineConfig::loss_scaling).
  cfg.loss_scaling = cfg.param_dtype == torch::kFloat16 || cfg.reduce_dtype == torch::kFloat16;
  cfg.loss_scale_init = config<OptimKeys>(p).loss_scale_init;
  cfg.loss_scale_growth_interval = config<OptimKeys>(p).loss_scale_growth_interval;
  return cfg;
}

// Stages of one training run on this rank: build, step loop, save, record. run() reads top
// down; each stage is one member function.
class TrainWorkload final : public sb::Workload {
 public:
  void run(RunContext& ctx) override {
    sb::set_phase("build");  // phases and steps: what an out-of-memory message names
    build(ctx);
    step_loop(ctx);
    comm_->set_trace_hook(nullptr, origin_);  // evaluation and checkpoints are not step traffic
    // Saved before the final evaluation, which draws from the compressors' random generators
    // (stochastic int8 parameter gathers): the checkpoint holds the state the next step needs.
    const std::string& ckpt = config<RunKeys>(ctx.point).checkpoint_dir;
    sb::set_phase("checkpoint");
    if (!ckpt.empty()) engine_->save(ckpt);
    sb::heartbeat::set_phase("record results");
    record_results(ctx);
    sb::set_phase("export");
    export_weights(ctx);
  }

 private:
  void build(RunContext& ctx);
  void resume(RunContext& ctx);
  void step_loop(RunContext& ctx);
  std::optional<models::CpuPeakGrowth> cpu_peak_window() const;
  double step_flops(const models::Batch& global);
  sb::StepRecord step_record(RunContext& ctx, I s, const fsdp::StepStats& st, double wall, double flops) const;
  void build_teacher(RunContext& ctx);
  void prune_step(RunContext& ctx, I s);
  void record_pruning(RunContext& ctx);
  double evaluate(RunContext& ctx, fsdp::Engine& engine);
  double classification_accuracy(RunContext& ctx, fsdp::Engine& engine, const data::LabelledBatches& src,
                                 double* macro_f1);
  void record_labelled(RunContext& ctx, const data::LabelledBatches& src);
  void record_teacher(RunContext& ctx);
  double mlm_accuracy(RunContext& ctx);
  void record_results(RunContext& ctx);
  void record_peaks_and_flops(RunContext& ctx);
  void export_weights(RunContext& ctx);
  // This rank's part of a global batch: its rows by data-parallel coordinate (ranks that
  // differ only in tp, pp or sp read the same rows), and under Ulysses (mesh.sp) its slice of
  // each row's tokens (striped as the model asks: Model::sequence_stripe).
  models::Batch dp_rows(const models::Batch& global) const {
    const auto& m = comm_->mesh();
    return data::sequence_slice(data::rank_rows(global, m.dp_rank(comm_->rank()), m.dp_size()),
                                comm_->rank(comm::Group::Sp), comm_->size(comm::Group::Sp),
                                model_->sequence_stripe(global.input_ids.size(1)));
  }

  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before these are destroyed (their destructors wait on peers). Destroyed in
  // reverse order: the engine before the communicator it uses.
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<fsdp::Engine> engine_;
  // Distillation (teacher set): the teacher, forward only, sharded like the student.
  std::unique_ptr<models::Model> teacher_;
  std::unique_ptr<fsdp::Engine> teacher_engine_;
  distill::DistillConfig distill_;
  prune::Schedule schedule_;  // pruning != none: gradual pruning with masks (prune/schedule.h)
  std::unique_ptr<data::BatchSource> source_;
  fsdp::EngineConfig cfg_;
  torch::Device device_ = torch::kCPU;  // the `device` key (models/device.h)
  double origin_ = 0;
  train::Peaks peaks_;               // what MFU divides by (peak.h)
  // Model FLOPs of the steps run (models/model.h TrainFlops): the student's forward + backward,
  // the teacher's forward; and their tokens.
  double student_flops_ = 0, teacher_flops_ = 0, flop_tokens_ = 0;
  double executed_flops_ = 0;  // the last step's FLOPs with attention as executed (step_flops)
  std::string flops_counted_;        // what the count covers (the first step's objective)
  std::string dtype_why_;            // how the `dtype` key became cfg_.param_dtype
  std::uint64_t step_tensor_peak_ = 0;  // the most tensor bytes a step added (RankMemory)
  std::string step_tensor_peak_phase_;  // where that step was at its peak (set_cpu_phase)
  MoeLayers moe_layers_;             // expert parallelism's per-layer traffic over the steps
  data::TextCorpus corpus_;          // data = text: its cached token files
  mutable std::string mfu_invalid_;  // the first step's reason for a NaN MFU (mfu.h)
  mutable std::string mfu_isa_invalid_;  // the same for the MFU against the ISA's peak
  // What the checkpoints held that was not loaded (buffers, missing heads): printed, recorded.
  std::string checkpoint_note_, teacher_checkpoint_note_;
};

void TrainWorkload::build(RunContext& ctx) {
  const Point& p = ctx.point;
  sb::heartbeat::set_phase("build");
  at::set_num_threads(threads_per_rank(base_config(p).threads, ctx.world));
  // Before the communicator: NCCL binds to the current device.
  device_ = models::resolve_device(config<models::DeviceConfig>(p).device, sb::node_local_rank(ctx.world));
  cfg_ = engine_config(p, device_, &dtype_why_);
  // MFU's peaks (peak.h), before the communicator, whose progress thread would share the cores
  // the GEMMs are timed on; the peak_gflops key replaces the measured one (a spec-sheet peak).
  sb::heartbeat::set_phase("peak GEMM");  // long, without collectives: beats, no verdict
  peaks_ = train::training_peaks(device_, cfg_.param_dtype, config<StepKeys>(p).peak_gflops, ctx.world);
  model_ = make_train_model(p);
  model_->set_dropout({config<OptimKeys>(p).dropout, config<OptimKeys>(p).attention_dropout,
                       static_cast<std::uint64_t>(base_config(p).seed)});
  model_->set_activation_checkpoint(checkpoint_config(p));
  // The groups from the point's mesh (train_mesh.cpp: hybrid sharding's node-local default
  // resolves here); data is split by the data-parallel coordinate (dp_rows).
  comm_ = std::make_unique<comm::Communicator>(ctx.world, config<MeshConfig>(p).mesh(), true,
                                              comm::backend_choice(p));
  std::string progress = config<StepKeys>(p).comm_progress;
  if (progress == "auto")  // train_task.cpp says why
    progress = fsdp::strategy_info(cfg_.strategy).layout.params_sharded ? "poll" : "inline";
  comm_->set_progress(progress);
  // Tensor parallelism (mesh.tp): the model's units become this rank's blocks before the
  // engine shards them over the data-parallel ranks (train_mesh.cpp refused what cannot run).
  if (comm_->size(comm::Group::Tp) > 1)
    model_->set_tensor_parallel(
        parallel::tensor_parallel(*comm_, config<StepKeys>(p).tp_sequence_parallel, cfg_.compression));
  // Ulysses sequence parallelism (mesh.sp): the model trades sequence slices for heads around
  // attention; the engine's shard group spans dp_shard x sp (comm/communicator.h).
  if (comm_->size(comm::Group::Sp) > 1) model_->set_sequence_parallel(parallel::sequence_parallel(*comm_));
  // Expert parallelism (mesh.ep): the experts' units hold this rank's E / ep experts, tokens
  // travel to them by all-to-all; the engine shards those units over the expert-data-parallel
  // group (models/moe.h).
  if (comm_->size(comm::Group::Ep) > 1) model_->set_expert_parallel(parallel::expert_parallel(*comm_));
  // Pipeline parallelism (mesh.pp): the model keeps this rank's stages (after tp cut them).
  if (comm_->size(comm::Group::Pp) > 1) {
    model_->set_pipeline(comm_->size(comm::Group::Pp), static_cast<int>(config<StepKeys>(p).pp_virtual_stages),
                         comm_->rank(comm::Group::Pp), models::parse_stage_layers(config<StepKeys>(p).pp_layers));
    ctx.recorder.text("pipeline_stages", models::describe_stages(model_->pipeline()));
  }
  if (!config<distill::DistillKeys>(p).teacher.empty()) {
    build_teacher(ctx);
  } else {
    engine_ = std::make_unique<fsdp::Engine>(*model_, *comm_, cfg_, initial_weights(p, *model_, &checkpoint_note_));
  }
  for (const std::string* note : {&checkpoint_note_, &teacher_checkpoint_note_})
    if (ctx.rank == 0 && !note->empty()) std::fprintf(stderr, "note: %s\n", note->c_str());
  if (config<RunKeys>(p).resume) resume(ctx);
  // The build's transients (each unit's whole initial values, its masks, a checkpoint's
  // slices) are sizes no step allocates again: cached, they would only hold memory (gpt2-xl
  // on 2 ranks: 4 GB of them past a 16 GiB cgroup). The steps refill the cache with theirs.
  if (device_.is_cpu()) models::release_cpu_cache();
  source_ = data::training_source(p, model_->config(), ctx.world, &corpus_);
  const I steps = base_config(p).steps;
  const auto& sched = config<prune::PruneScheduleKeys>(p);
  schedule_.kind = sched.schedule;
  schedule_.sparsity = config<prune::PruneKeys>(p).sparsity;
  schedule_.begin = std::llround(sched.begin * static_cast<double>(steps));
  schedule_.end = std::max<I>(schedule_.begin, std::llround(sched.end * static_cast<double>(steps)));
  schedule_.every = sched.every;

  origin_ = MPI_Wtime();
  comm_->set_trace_hook([&ctx](const sb::CommEvent& e) { ctx.recorder.comm(e); }, origin_);
  engine_->reset_peak();
}

// Distillation (docs/DISTILLATION.md): the teacher's weights (teacher_init, the teacher folder's,
// or seeded), the student's from them when distill.student_init = every_other, the teacher's
// forward-only engine (the student's strategy and compute dtype, uncompressed gathers), and
// the student's loss: distill::combiner on the teacher outputs each micro-batch carries.
void TrainWorkload::build_teacher(RunContext& ctx) {
  const Point& p = ctx.point;
  const std::string teacher = config<distill::DistillKeys>(p).teacher;
  teacher_ = models::make_model(teacher, config<ModelKeys>(p).attention);
  std::string from = config<distill::DistillKeys>(p).teacher_init;
  if (from.empty() && models::is_model_path(teacher)) from = teacher;
  std::string note;
  auto weights = from.empty() ? models::init_params(teacher_->units(), static_cast<std::uint64_t>(base_config(p).seed))
                              : data::load_checkpoint(*teacher_, from, {}, &note);
  if (!note.empty()) teacher_checkpoint_note_ = "teacher " + note;
  // Hidden states of another width: matched through a projection the student learns (TinyBERT).
  if (config<distill::DistillKeys>(p).hidden_weight > 0 && teacher_->config().d_model != model_->config().d_model)
    model_ = std::make_unique<distill::ProjectedStudent>(std::move(model_), teacher_->config().d_model);
  if (config<distill::DistillKeys>(p).student_init == "every_other")
    engine_ = std::make_unique<fsdp::Engine>(*model_, *comm_, cfg_,
                                             distill::student_from_teacher(*model_, *teacher_, weights));
  else
    engine_ = std::make_unique<fsdp::Engine>(*model_, *comm_, cfg_, initial_weights(p, *model_, &checkpoint_note_));
  fsdp::EngineConfig tc = cfg_;
  tc.forward_only = true;
  tc.loss_scaling = false;
  tc.compression = comm::policy_preset("none");
  teacher_engine_ = std::make_unique<fsdp::Engine>(*teacher_, *comm_, tc, weights);
  distill_.temperature = config<distill::DistillKeys>(p).temperature;
  distill_.soft_weight = config<distill::DistillKeys>(p).soft_weight;
  distill_.hard_weight = config<distill::DistillKeys>(p).hard_weight;
  distill_.hidden_weight = config<distill::DistillKeys>(p).hidden_weight;
  engine_->set_loss([this](models::ParamProvider& pp, const models::Batch& b) {
    return model_->loss_with(pp, b, distill::combiner(b, distill_));
  });
}

// resume = true continues from the newest committed checkpoint set of checkpoint_dir, or
// starts at step 0 when there is none yet (a point's first run, which a Slurm requeue then
// resumes; `plan` warns when the folder does not exist). Rank 0 looks, every rank follows.
void TrainWorkload::resume(RunContext& ctx) {
  const Point& p = ctx.point;
  const std::string& ckpt = config<RunKeys>(p).checkpoint_dir;
  const I steps = base_config(p).steps;
  std::int64_t committed = ctx.rank == 0 ? fsdp::committed_checkpoint_step(ckpt) : -1;
  sb::check_mpi(MPI_Bcast(&committed, 1, MPI_INT64_T, 0, ctx.world),
                "MPI_Bcast (committed checkpoint step)");
  if (committed < 0) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "resume: no committed checkpoint in %s yet; starting at step 0\n",
                   ckpt.c_str());
    ctx.recorder.text("resumed_from", "none: no committed checkpoint, started at step 0");
    return;
  }
  // The load's cost, rank 0's: its seconds and the most tensor bytes it held above what was
  // live before and after it (the CPU allocator's, as peak_step_tensor_bytes; NaN when not
  // measured), and which path it took (docs/FSDP.md "Resume on another mesh").
  const auto window = cpu_peak_window();
  const double t0 = MPI_Wtime();
  const auto loaded = engine_->load(ckpt);  // every rank the same step, or every rank throws
  ctx.recorder.scalar("resume_load_s", MPI_Wtime() - t0);
  ctx.recorder.scalar("resume_load_peak_bytes", window ? static_cast<double>(window->bytes_above_ends())
                                                       : std::numeric_limits<double>::quiet_NaN());
  ctx.recorder.text("resume_path", loaded.resharded_from.empty() ? "same mesh"
                                   : loaded.streamed            ? "streamed reshard"
                                                                : "assembled reshard");
  // Nothing left to train would record 0 steps and report the longer run's model as done.
  if (engine_->steps_done() >= steps)
    SB_FAIL("resume: the checkpoint in {} is at step {}, and this point asks for steps = {}, "
            "so there is nothing left to train; raise steps above {}, or set resume = false "
            "to train from the start", ckpt, engine_->steps_done(), steps, engine_->steps_done());
  ctx.recorder.text("resumed_from", fmt::format("{} step {}", ckpt, engine_->steps_done()));
  // A set from another mesh is resharded; what could not be is reset, and the result says so.
  if (!loaded.resharded_from.empty())
    ctx.recorder.text("resharded_from", loaded.resharded_from);
  if (!loaded.reset.empty()) ctx.recorder.text("resume_warning", loaded.reset);
}

// The allocator's peak growth from now on, when it is measured (on the CPU, with the caching
// allocator installed); none on a GPU.
std::optional<models::CpuPeakGrowth> TrainWorkload::cpu_peak_window() const {
  std::optional<models::CpuPeakGrowth> window;
  if (device_.is_cpu() && models::cpu_cache_stats().installed) window.emplace();
  return window;
}

void TrainWorkload::step_loop(RunContext& ctx) {
  const Point& p = ctx.point;
  const I steps = base_config(p).steps, accum = config<OptimKeys>(p).microbatches;
  const I eval_every = config<RunKeys>(p).eval_every;
  ctx.progress.begin(fmt::format("train {}", p.name), static_cast<long>(steps));
  for (I s = engine_->steps_done(); s < steps; ++s) {
    comm_->set_step(s);
    sb::fault_set_step(s);
    sb::set_phase_step(s);  // also the heartbeat's step
    sb::set_phase("step");  // what an out-of-memory message names
    sb::heartbeat::set_phase("step start");  // finer, for the stall watchdog's verdict
    sb::fault_point("step");  // tests/failure/failure_paths.sh
    prune_step(ctx, s);
    auto global = source_->train(s);
    global.dropout_step = s;  // the step's dropout masks (models/dropout.h); rows keep row0
    auto micro = data::split_rows(dp_rows(global), accum);
    for (auto& m : micro) m = data::to_device(m, device_);
    const double t0 = MPI_Wtime();
    if (teacher_engine_) {  // the teacher's outputs ride in each micro-batch (distill.h)
      for (auto& m : micro)
        distill::attach_teacher(*teacher_, [&](const auto& f) { return teacher_engine_->forward_with(f); },
                                m, distill_.hidden_weight > 0);
      ctx.recorder.series("teacher_forward_s", MPI_Wtime() - t0);
    }
    // The step's own tensors: the allocator's peak above what was live when it began or ended.
    const auto window = cpu_peak_window();
    const auto st = engine_->step(micro, fsdp::loss_terms(global));
    // An overlapped update (offload_overlap) is paid by the next step's forward, so each timed
    // step pays for one: the previous step's, a warm-up step's for the first. A step that an
    // evaluation follows pays its own here (else the untimed evaluation would), and so does the
    // last when there was no warm-up step (the first timed step paid none).
    const bool evaluates = eval_every > 0 && (s + 1) % eval_every == 0 && s + 1 < steps;
    if (evaluates || (s + 1 == steps && base_config(p).warmup == 0)) engine_->finish_updates();
    if (window && window->bytes_above_ends() >= step_tensor_peak_) {  // ties: the later step's
      step_tensor_peak_ = window->bytes_above_ends();
      step_tensor_peak_phase_ = models::cpu_peak_phase(models::cpu_cache_stats());
    }
    const double wall = MPI_Wtime() - t0;  // the teacher's forward included
    const double flops = step_flops(global);
    SB_REQUIRE(st.skipped || std::isfinite(st.loss), "step {}: the loss is {} (diverged); lower "
               "lr ({}, now {}) or raise grad_clip's effect by lowering it (now {})", s, st.loss,
               p.key_at("lr"), cfg_.adamw.lr, cfg_.adamw.grad_clip);
    if (cfg_.loss_scaling) ctx.recorder.series("loss_scale", st.loss_scale);
    const sb::StepRecord rec = step_record(ctx, s, st, wall, flops);
    ctx.recorder.step(rec);
    // MFU with attention counted as executed (docs/METRICS.md "MFU"): the same peak, the
    // executed FLOPs (NaN where mfu is).
    ctx.recorder.series("mfu_executed", rec.mfu * executed_flops_ / flops);
    record_routing(ctx.recorder, *model_, comm_->rank(comm::Group::Ep), comm_->size(comm::Group::Ep));
    moe_layers_.add(*model_, comm_->rank(comm::Group::Ep), comm_->size(comm::Group::Ep));
    if (const auto every = models::moe_trace_every(ctx.point); every > 0 && ((s + 1) % every == 0 || s + 1 == steps))
      trace_routing(ctx.recorder, *model_, s, ctx.rank);
    ctx.progress.step(static_cast<long>(s + 1), fmt::format("loss {:.4f}", st.loss));
    if (evaluates) ctx.recorder.series("eval_loss", evaluate(ctx, *engine_));
    sb::heartbeat::set_phase("step end");
    if (ctx.stop_agreed()) break;  // every rank gets the same answer: all leave together
  }
  ctx.progress.end();
  moe_layers_.record(ctx.recorder, ctx.world);
}

// Gradual pruning (docs/PRUNING.md): at the schedule's steps, every rank takes the full
// parameters (collective), prunes them to the step's sparsity by the point's method, and the
// engine masks each rank's part from then on. Outside the timed step; a resumed run re-prunes
// at its first scheduled step (the checkpoint holds the zeros, not the masks).
void TrainWorkload::prune_step(RunContext& ctx, I s) {
  const std::string& name = config<prune::PruneKeys>(ctx.point).method;
  if (name == "none") return;
  const double sparsity = prune::scheduled_sparsity(schedule_, s);
  if (sparsity < 0) return;
  sb::heartbeat::set_phase("pruning");
  const auto full = engine_->full_params();
  const auto pr = prune::prune(name, *model_, full, {sparsity, config<prune::PruneKeys>(ctx.point).scope});
  models::UnitTensors masks;
  const auto& units = model_->units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    auto& m = masks.emplace_back();
    for (std::size_t i = 0; i < units[u].params.size(); ++i)
      m.push_back(prune::is_prunable(units[u].params[i].name, units[u].params[i].shape)
                      ? (pr.weights[u][i] != 0).to(torch::kFloat)
                      : torch::ones_like(pr.weights[u][i]));
  }
  engine_->set_masks(masks);
  ctx.recorder.series("pruning_step", static_cast<double>(s));
  ctx.recorder.series("pruning_step_sparsity", sparsity);
}

// The trained model's sparsity, counted on its final weights (collective).
void TrainWorkload::record_pruning(RunContext& ctx) {
  const auto full = engine_->full_params();
  const auto& units = model_->units();
  double eligible = 0, zeros = 0;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i)
      if (prune::is_prunable(units[u].params[i].name, units[u].params[i].shape)) {
        eligible += static_cast<double>(full[u][i].numel());
        zeros += static_cast<double>(full[u][i].numel() - full[u][i].count_nonzero().item<I>());
      }
  ctx.recorder.scalar("pruning_eligible", eligible);
  ctx.recorder.scalar("pruning_sparsity_final", eligible > 0 ? zeros / eligible : 0.0);
  ctx.recorder.scalar("params_nonzero", static_cast<double>(prune::count_nonzero(full)));
}

// Model FLOPs of one step on the global batch (docs/METRICS.md "Model FLOPs"): the student's
// forward + backward for the objective the batch asks for, plus the teacher's forward when
// distilling (counted apart, recorded apart, and inside MFU: the step's time includes it).
double TrainWorkload::step_flops(const models::Batch& global) {
  const auto student = model_->train_flops(global);
  const double teacher = teacher_ ? models::forward_flops(teacher_->train_flops(global)).total() : 0.0;
  if (flops_counted_.empty())
    flops_counted_ = student.counted +
                     (teacher_ ? "; plus the teacher's forward (a third of its step's FLOPs; teacher_flops_per_token)" : "");
  student_flops_ += student.total();
  teacher_flops_ += teacher;
  flop_tokens_ += static_cast<double>(global.tokens());
  executed_flops_ = student.executed() + teacher;  // attention as the variant runs it
  return student.total() + teacher;
}

// Outside the timed region: the slowest rank's times (docs/METRICS.md).
sb::StepRecord TrainWorkload::step_record(RunContext& ctx, I s, const fsdp::StepStats& st,
                                          double wall, double flops) const {
  double v[5] = {wall, st.forward_s, st.backward_s, st.optimizer_s, st.comm_exposed_s};
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_DOUBLE, MPI_MAX, ctx.world),
                "MPI_Allreduce (step times)");
  const I B = config<ModelKeys>(ctx.point).batch, T = config<ModelKeys>(ctx.point).seq;
  sb::StepRecord r;
  r.step = s;
  r.warmup = s < base_config(ctx.point).warmup;
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
  // MFU against the measured peak (none without units for the dtype), and against the ISA's.
  const train::Mfu mfu = peaks_.no_mfu.empty()
                             ? train::model_flops_utilisation(flops / tokens, tokens, v[0], peaks_.divisor, ctx.size)
                             : train::Mfu{kNan, peaks_.no_mfu};
  r.mfu = mfu.value;
  if (!mfu.invalid.empty() && mfu_invalid_.empty()) mfu_invalid_ = mfu.invalid;
  const train::Mfu isa =
      peaks_.isa.unknown.empty()
          ? train::model_flops_utilisation(flops / tokens, tokens, v[0], peaks_.isa.gflops, ctx.size,
                                           "the ISA peak's FLOP-per-cycle rule or clock does not fit this CPU")
          : train::Mfu{kNan, "no ISA peak: " + peaks_.isa.unknown};
  r.mfu_isa = isa.value;
  if (!isa.invalid.empty() && mfu_isa_invalid_.empty()) mfu_isa_invalid_ = isa.invalid;
  return r;
}

// Held-out loss over eval_batches global batches: every rank its rows, weighted by terms.
double TrainWorkload::evaluate(RunContext& ctx, fsdp::Engine& engine) {
  sb::set_phase("evaluation");
  double sum = 0;
  I terms_total = 0;
  for (I i = 0; i < config<RunKeys>(ctx.point).eval_batches; ++i) {
    sb::heartbeat::tick();
    auto g = source_->heldout(i);
    auto mine = dp_rows(g);
    const I terms = fsdp::loss_terms(mine);
    sum += engine.forward_loss(data::to_device(mine, device_)).item<double>() *
           static_cast<double>(terms);
    terms_total += fsdp::loss_terms(g);
  }
  // The ranks of a tp group computed the same loss, and a pipeline's ranks returned its last
  // stage's: counted once.
  if (!comm_->model_parallel_leader()) sum = 0;
  return comm_->all_reduce_scalar(sum, comm::Group::World) / static_cast<double>(terms_total);
}

// Accuracy and macro-F1 of the trained model on every validation example (each rank scores
// the same rows: the sharded forward is collective), and what the dataset was.
double TrainWorkload::classification_accuracy(RunContext& ctx, fsdp::Engine& engine,
                                              const data::LabelledBatches& src, double* macro_f1) {
  const auto& v = src.data().validation;
  const auto pred = data::predicted_classes(v, config<ModelKeys>(ctx.point).batch, [&](const models::Batch& b) {
    sb::heartbeat::tick();
    return engine.forward_classify(data::to_device(b, device_));
  });
  const auto s = data::classification_score(pred, v.labels, model_->config().num_labels);
  if (macro_f1) *macro_f1 = s.macro_f1;
  return s.accuracy;
}

void TrainWorkload::record_labelled(RunContext& ctx, const data::LabelledBatches& src) {
  const auto& v = src.data().validation;
  double f1 = 0;
  auto& rec = ctx.recorder;
  rec.scalar("classification_accuracy", classification_accuracy(ctx, *engine_, src, &f1));
  rec.scalar("macro_f1", f1);
  rec.scalar("validation_examples", static_cast<double>(v.size()));
  rec.scalar("train_examples", static_cast<double>(src.data().train.size()));
  rec.scalar("truncated_examples", static_cast<double>(src.data().truncated));
  rec.text("labels", nlohmann::json(src.data().labels).dump());
}

// Masked tokens predicted right on the eval_batches held-out batches, over all ranks' rows.
double TrainWorkload::mlm_accuracy(RunContext& ctx) {
  double v[2] = {0, 0};  // hits, masked tokens
  for (I i = 0; i < config<RunKeys>(ctx.point).eval_batches; ++i) {
    sb::heartbeat::tick();
    auto mine = dp_rows(source_->heldout(i));
    auto logits = engine_->forward_logits(data::to_device(mine, device_)).cpu();
    auto masked = mine.targets != -100;
    v[0] += ((logits.argmax(-1) == mine.targets) & masked).sum().item<double>();
    v[1] += masked.sum().item<double>();
  }
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, ctx.world),
                "MPI_Allreduce (MLM accuracy)");
  return v[1] > 0 ? v[0] / v[1] : 0.0;
}

void TrainWorkload::record_results(RunContext& ctx) {
  auto& rec = ctx.recorder;
  // The memory model's prediction beside what the engine measured (docs/METRICS.md).
  const auto predicted = fsdp::predict_memory(memory_inputs(
      ctx.point, *model_, cfg_.param_dtype, comm_->size(comm::Group::Shard)));
  sb::RankMemory m = sb::rank_memory_now(ctx.rank, comm_->mesh());
  fsdp::add_engine_memory(engine_->memory(), m);
  fsdp::add_predicted_memory(predicted, m);
  m.peak_step_tensor_bytes = step_tensor_peak_;
  m.peak_step_tensor_phase = step_tensor_peak_phase_;
  if (const auto* store = engine_->offload_store()) {
    const auto& io = store->stats();
    m.offload_read_bytes = io.read_bytes, m.offload_written_bytes = io.written_bytes;
    m.offload_read_s = io.read_s, m.offload_write_s = io.write_s, m.offload_wait_s = io.wait_s;
    m.offload_update_wait_s = engine_->update_wait_s();
    m.offload_param_read_bytes = io.param_read_bytes, m.offload_param_read_s = io.param_read_s;
    rec.text("offload_file", fmt::format("{} ({})", store->path(), store->direct()
                 ? "O_DIRECT" : "no O_DIRECT on this file system: written pages dropped with posix_fadvise"));
  }
  const auto kv = models::kv_offload_stats();  // this process's: one rank's
  m.kv_offload_read_bytes = kv.read_bytes, m.kv_offload_written_bytes = kv.written_bytes;
  m.kv_offload_read_s = kv.read_s, m.kv_offload_write_s = kv.write_s, m.kv_offload_wait_s = kv.wait_s;
  rec.memory(m);

  const double eval = evaluate(ctx, *engine_);
  rec.scalar("final_eval_loss", eval);
  rec.series("eval_loss", eval);
  if (auto* lb = dynamic_cast<const data::LabelledBatches*>(source_.get())) record_labelled(ctx, *lb);
  if (teacher_engine_) record_teacher(ctx);
  if (config<prune::PruneKeys>(ctx.point).method != "none") record_pruning(ctx);
  if (!corpus_.key.empty()) {  // held-out text: perplexity = exp(mean cross-entropy)
    if (models::family(model_->config().family).objective == models::Objective::CausalLm)
      rec.scalar("perplexity", std::exp(eval));
    else if (comm_->size(comm::Group::Tp) > 1)  // the MLM logits are split by vocabulary
      rec.text("mlm_accuracy", "not measured: the MLM logits of a tensor-parallel model (mesh.tp "
                               "> 1) are split by vocabulary and nothing gathers them yet");
    else if (comm_->size(comm::Group::Pp) > 1)
      rec.text("mlm_accuracy", "not measured: the MLM logits of a pipelined model (mesh.pp > 1) "
                               "live on its last stage and nothing returns them yet");
    else
      rec.scalar("mlm_accuracy", mlm_accuracy(ctx));
    rec.scalar("corpus_documents", static_cast<double>(corpus_.documents));
    rec.scalar("corpus_heldout_documents", static_cast<double>(corpus_.heldout_documents));
    rec.scalar("corpus_train_tokens", static_cast<double>(corpus_.train_tokens));
    rec.scalar("corpus_heldout_tokens", static_cast<double>(corpus_.heldout_tokens));
    rec.text("token_cache", corpus_.manifest + (corpus_.reused ? " (reused)" : " (written)"));
  }
  if (!std::isnan(source_->loss_floor())) rec.scalar("loss_floor", source_->loss_floor());
  record_peaks_and_flops(ctx);
  rec.scalar("params", static_cast<double>(models::count_params(model_->units())));
  rec.scalar("model_state_bytes_formula",  // the plan's prediction
             static_cast<double>(predicted.model_state));
  rec.scalar("threads_per_rank", at::get_num_threads());
  rec.text("torch_version", TORCH_VERSION);
  rec.text("cpu_allocator", models::cpu_allocator_name());
  rec.text("compression_policy", cfg_.compression.describe());
  // How requests progressed: thread / poll / inline, or "blocking" without a thread
  // (MPI_THREAD_MULTIPLE missing) where every collective ran inline and blocking.
  rec.text("comm_progress", comm_->progress_label());
  rec.text("comm_backend", comm_->backend_name());
  if (cfg_.loss_scaling) {
    rec.scalar("skipped_steps", static_cast<double>(engine_->steps_skipped()));
    rec.scalar("final_loss_scale", engine_->loss_scale());
  }
  rec.text("device", device_.str());
  rec.text("compute_dtype", models::dtype_name(cfg_.param_dtype));  // dtype = "auto" resolved
  rec.text("compute_dtype_reason", dtype_why_);
  const std::string note = checkpoint_note_ +
      (checkpoint_note_.empty() || teacher_checkpoint_note_.empty() ? "" : "\n") + teacher_checkpoint_note_;
  if (!note.empty()) rec.text("checkpoint_note", note);
  if (device_.is_cuda())
    rec.scalar("device_peak_allocated_bytes",
               static_cast<double>(models::device_peak_allocated_bytes(device_)));
  if (!comm_->backend_source().empty()) rec.text("comm_tuning_source", comm_->backend_source());
}

// MFU's peaks and FLOP counts (docs/METRICS.md "MFU", "Model FLOPs").
void TrainWorkload::record_peaks_and_flops(RunContext& ctx) {
  auto& rec = ctx.recorder;
  rec.scalar("peak_gflops_per_rank", peaks_.divisor);  // what MFU divides by; NaN: none
  rec.text("peak_dtype", peaks_.divisor_name);
  for (const auto* m : {&peaks_.compute, &peaks_.fp32}) {
    const std::string pre = m == &peaks_.compute ? "peak_" : "peak_fp32_";
    if (m == &peaks_.fp32) rec.scalar("peak_fp32_gflops_per_rank", m->gflops);
    if (!m->none.empty()) {
      rec.text(pre + "note", m->none);  // e.g. no bf16 units: no bf16 peak, no MFU
      continue;
    }
    rec.scalar(pre + "gemm_size", static_cast<double>(m->n));
    rec.text(pre + "gemm_path", m->curve.path);
    rec.text(pre + "source", m->source);
    for (const auto& s : m->curve.sizes) {  // the curve: size -> GFLOP/s, the slowest rank's
      rec.series(pre + "curve_n", static_cast<double>(s.n));
      rec.series(pre + "curve_gflops", s.gflops);
    }
  }
  rec.scalar("isa_peak_gflops_per_rank", peaks_.isa.gflops);
  rec.text("isa_peak", peaks_.isa.unknown.empty() ? peaks_.isa.basis : "unknown: " + peaks_.isa.unknown);
  if (!mfu_invalid_.empty()) rec.text("mfu_invalid", mfu_invalid_);
  if (!mfu_isa_invalid_.empty()) rec.text("mfu_isa_invalid", mfu_isa_invalid_);
  // Per token of the steps run: MFU's numerator (analysis: TFLOP/s per worker), and its parts.
  const double tokens = std::max(flop_tokens_, 1.0);
  rec.scalar("model_flops_per_token", (student_flops_ + teacher_flops_) / tokens);
  if (teacher_) {
    rec.scalar("student_flops_per_token", student_flops_ / tokens);
    rec.scalar("teacher_flops_per_token", teacher_flops_ / tokens);
  }
  rec.text("model_flops", flops_counted_);
}

// The teacher's figures on the same held-out data, for "the student keeps x% of the teacher's
// accuracy" (docs/DISTILLATION.md): its held-out loss (the hard loss, as final_eval_loss),
// classification accuracy on labelled data, and size.
void TrainWorkload::record_teacher(RunContext& ctx) {
  auto& rec = ctx.recorder;
  rec.scalar("teacher_eval_loss", evaluate(ctx, *teacher_engine_));
  if (auto* lb = dynamic_cast<const data::LabelledBatches*>(source_.get()))
    rec.scalar("teacher_classification_accuracy", classification_accuracy(ctx, *teacher_engine_, *lb, nullptr));
  rec.scalar("teacher_params", static_cast<double>(models::count_params(teacher_->units())));
  rec.text("teacher", config<distill::DistillKeys>(ctx.point).teacher);
}

// Expert parallelism: every experts unit's tensors (this ep rank's block of experts) gathered
// over the ep group into the whole stack, in ep rank order (= the experts' order). Collective.
models::UnitTensors whole_experts(const std::vector<models::UnitSpec>& units, models::UnitTensors full,
                                  comm::Communicator& c) {
  const int ep = c.size(comm::Group::Ep);
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (!units[u].expert) continue;
    for (auto& t : full[u]) {
      auto sizes = t.sizes().vec();
      sizes[0] *= ep;
      auto whole = torch::empty(sizes, t.options());
      c.all_gather(t.contiguous().view({-1}), whole.view({-1}), comm::Group::Ep, "export");
      t = whole;
    }
  }
  return full;
}

void TrainWorkload::export_weights(RunContext& ctx) {
  const std::string& out = config<RunKeys>(ctx.point).export_safetensors;
  const std::string& folder = config<RunKeys>(ctx.point).export_folder;
  if (out.empty() && folder.empty()) return;
  std::unique_ptr<models::Model> whole;  // the uncut model, when tp or pp cut this one
  models::UnitTensors full;
  if (comm_->size(comm::Group::Tp) > 1 || comm_->size(comm::Group::Pp) > 1) {
    // The model is spread over tp blocks and pipeline stages: a checkpoint set holds it with
    // its shard layout, and rank 0 assembles the whole model from it as `export-checkpoint`
    // does (one code path for every mesh). The set goes beside the export (every rank writes
    // its file there: the same shared file system as checkpoint_dir) and is removed after.
    const std::string tmp = (out.empty() ? folder : out) + ".mesh-set";
    engine_->save(tmp);  // collective
    if (ctx.rank != 0) return;
    whole = models::make_model(config<ModelKeys>(ctx.point).model, config<ModelKeys>(ctx.point).attention);
    full = fsdp::read_checkpoint_params(tmp, *whole);
    std::filesystem::remove_all(tmp);
  } else {
    full = engine_->full_params();  // collective: every rank takes part
    if (comm_->size(comm::Group::Ep) > 1) {  // each ep rank holds E / ep experts: the whole stack
      full = whole_experts(model_->units(), std::move(full), *comm_);
      if (ctx.rank == 0) whole = make_train_model(ctx.point);  // the model without the ep split
    }
    if (ctx.rank != 0) return;
  }
  const models::Model* model = whole ? whole.get() : model_.get();
  if (const auto* projected = dynamic_cast<const distill::ProjectedStudent*>(model)) {
    model = &projected->inner();  // the distillation projection is not part of the model
    full.resize(model->units().size());
  }
  if (!out.empty()) data::save_checkpoint(*model, full, out);
  if (folder.empty()) return;
  // A complete Hugging Face folder: the labelled data's label names, the tokenizer's files.
  data::HfExport extras;
  extras.tokenizer_dir = data::tokenizer_dir_for(ctx.point);
  if (const auto* lb = dynamic_cast<const data::LabelledBatches*>(source_.get()))
    extras.labels = lb->data().labels;
  data::export_hf_folder(*model, full, folder, extras);
}

}  // namespace

std::unique_ptr<sb::Workload> make_train_workload() { return std::make_unique<TrainWorkload>(); }

}  // namespace sb::train
