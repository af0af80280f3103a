// The model an inference point serves (served_model.h).
#include "workloads/infer/served_model.h"

#include "workloads/parallel/layer_stats.h"

#include <torch/version.h>

#include <algorithm>
#include <filesystem>

#include <fmt/ranges.h>  // fmt::join

#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/model_keys.h"
#include "harness/core/mpi_context.h"
#include "workloads/data/labelled.h"
#include "workloads/data/safetensors.h"
#include "workloads/data/training_source.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/infer/infer_config.h"
#include "workloads/models/hf_config.h"
#include "workloads/parallel/ep_layers.h"
#include "workloads/prune/prune_keys.h"

namespace sb::infer {

// Sharded inference (world > 1) runs this strategy, whatever the point's `strategy` key says
// (the validator refuses another): its record shards parameters and frees them after use.
constexpr const char* kServingStrategy = "full_shard";

namespace {

// The training loss's gradient w.r.t. every weight, summed over the batches (fp32, host).
models::UnitTensors loss_gradient(models::Model& model, const models::UnitTensors& weights,
                                  const std::vector<models::Batch>& batches) {
  models::UnitTensors copy;
  for (const auto& u : weights) {
    auto& dst = copy.emplace_back();
    for (const auto& t : u) dst.push_back(t.detach().to(torch::kFloat).clone());
  }
  models::PersistentParams w(std::move(copy), /*requires_grad=*/true);
  for (const auto& b : batches) model.loss(w, b).backward();
  models::UnitTensors g;
  for (const auto& u : w.tensors()) {
    auto& dst = g.emplace_back();
    for (const auto& t : u) dst.push_back(t.grad().defined() ? t.grad().detach() : torch::zeros_like(t));
  }
  return g;
}

// int8-static's activation ranges, from `calibration_batches` batches of the training split
// (held out from every batch an infer point scores or times, as Taylor importance's are).
quant::Calibration calibrate(models::Model& served, const models::UnitTensors& weights, RunContext& ctx) {
  const WeightsKeys& wk = config<WeightsKeys>(ctx.point);
  auto src = data::training_source(ctx.point, served.config(), ctx.world);
  std::vector<models::Batch> batches;
  for (std::int64_t i = 0; i < wk.calibration_batches; ++i) batches.push_back(src->train(i));
  quant::CalibrationOptions o;
  o.observer = wk.calibration;
  o.observer_options.percentile = wk.calibration_percentile;
  o.observer_options.levels = quant::host_int8_units().full_range ? 255 : 127;
  o.skip_error = wk.int8_skip_error;
  return quant::calibrate(served, weights, batches, o);
}

// The checkpoint a point serves: the `checkpoint` key, else the model folder when `model` is
// one; "" = seeded weights.
std::string weights_path(const Point& p) {
  const std::string& ckpt = config<WeightsKeys>(p).checkpoint;
  const std::string& model = config<ModelKeys>(p).model;
  if (ckpt.empty() && models::is_model_path(model)) return model;
  return ckpt;
}

}  // namespace

void build_served(ServedModel& s, RunContext& ctx, std::optional<c10::InferenceMode>& inference,
                  std::int64_t rows) {
  const Point& p = ctx.point;
  s.device = models::resolve_device(config<models::DeviceConfig>(p).device, sb::node_local_rank(ctx.world));
  models::ModelConfig mc = models::preset_config(config<ModelKeys>(p).model);
  mc.attention = config<ModelKeys>(p).attention;
  models::apply_moe_keys(p, mc);  // a gpt2-moe model's routing (moe_keys.cpp)
  s.model = models::make_model(mc);
  const std::string ckpt = weights_path(p);
  s.weights = ckpt.empty() ? models::init_params(s.model->units(), static_cast<std::uint64_t>(base_config(p).seed))
                           : data::load_checkpoint(*s.model, ckpt, {}, &s.checkpoint_note);
  if (ctx.rank == 0 && !s.checkpoint_note.empty())
    std::fprintf(stderr, "note: %s\n", s.checkpoint_note.c_str());
  // Pruning converts the model first; s.weights stay the unpruned reference.
  const auto& pk = config<prune::PruneKeys>(p);
  const auto& pconv = config<prune::PruneConvertKeys>(p);
  const std::string& pname = pk.method;
  prune::PruneConfig pc{pk.sparsity, pk.scope, pconv.importance};
  models::UnitTensors grads;
  if (pc.importance == "taylor") {
    // Batches of the training split (never the data an infer point scores).
    auto src = data::training_source(p, s.model->config(), ctx.world);
    std::vector<models::Batch> batches;
    for (std::int64_t i = 0; i < pconv.taylor_batches; ++i) batches.push_back(src->train(i));
    grads = loss_gradient(*s.model, s.weights, batches);
    pc.gradients = &grads;
  }
  s.pruning = prune::prune(pname, *s.model, s.weights, pc);
  s.served = std::move(s.pruning.model);
  auto served = std::move(s.pruning.weights);
  // The pruned checkpoint, written back out (ffn: its smaller d_ff in config.json).
  if (const std::string& out = pconv.export_folder; !out.empty() && ctx.rank == 0)
    data::export_hf_folder(*s.served, served, out, {{}, data::tokenizer_dir_for(p)});
  s.params_nonzero = prune::count_nonzero(served);
  if (const int ep = config<MeshConfig>(p).ep; ep > 1) {  // experts split over the ep group
    s.comm = std::make_unique<comm::Communicator>(ctx.world, config<MeshConfig>(p).mesh(), true,
                                                  comm::backend_choice(p));
    auto par = parallel::expert_parallel(*s.comm);
    s.expert_placement = models::moe_expert_placement(p);
    if (!s.expert_placement.empty())
      par.placement = models::read_placement(s.expert_placement, config<ModelKeys>(p).model, mc.moe, mc.n_layer, ep);
    s.ep_form = models::parse_ep_form(models::moe_ep_form(p));
    s.served->set_expert_parallel(par);
    served = models::ep_rank_weights(s.served->units(), std::move(served), par.placement, ep);
  }
  if (ctx.size > 1) {  // built outside inference mode: the engine's buffers are ordinary tensors
    if (!s.comm) s.comm = std::make_unique<comm::Communicator>(ctx.world, ctx.size, true, comm::backend_choice(p));
    fsdp::EngineConfig ec;
    ec.strategy = kServingStrategy;
    ec.forward_only = true;
    ec.device = s.device;
    s.engine = std::make_unique<fsdp::Engine>(*s.served, *s.comm, ec, served);
  }
  inference.emplace();
  if (s.engine) return;
  if (!s.device.is_cpu())  // the served copy on the device; s.weights stay on the host
    for (auto& unit : served)
      for (auto& t : unit) t = t.to(s.device);
  const std::string& qname = config<InferChoice>(p).quantization;
  const WeightsKeys& wk = config<WeightsKeys>(p);
  if (qname == "int8-dynamic")  // auto: timed on this model's linears at a batch's rows
    s.int8_engine = quant::select_int8_engine(wk.int8_engine, quant::linear_shapes(s.served->units(), rows));
  s.compute = quant::compute_dtype(qname, wk.quant_compute, s.device, &s.compute_why);
  if (quant::needs_calibration(qname)) s.calibration = calibrate(*s.served, served, ctx);
  // Single weights zeroed (a threshold method): sparse kernels where they pay.
  if (prune::pruner_info(pname).threshold && qname == "none" && s.device.is_cpu())
    s.q = prune::sparse_weights(*s.served, served, config<prune::PruneConvertKeys>(p).kernel, rows, &s.sparse);
  else
    s.q = quant::quantize(qname, *s.served, served, s.compute, s.calibration ? &*s.calibration : nullptr);
}

namespace {
void record_calibration(Recorder& rec, const quant::Calibration& c, const quant::QuantizedWeights& q) {
  double worst = 0;
  for (const auto& [key, l] : c.layers) worst = std::max(worst, l.error);
  rec.text("calibration", c.options.observer);
  rec.scalar("calibration_batches", static_cast<double>(c.batches));
  rec.scalar("calibration_s", c.seconds);
  rec.scalar("calibration_layers", static_cast<double>(c.layers.size()));
  rec.scalar("calibration_max_layer_error", worst);
  rec.scalar("int8_skipped_layers", static_cast<double>(c.skipped().size()));
  rec.scalar("unquantized_matrices", static_cast<double>(q.unquantized_matrices()));
  rec.text("int8_skipped", c.skipped().empty() ? std::string("none")
                                               : fmt::format("{}", fmt::join(c.skipped(), ", ")));
  rec.text("int8_units", quant::host_int8_units().note);
  rec.text("int8_engine", "onednn");  // the calibrated format's kernel (quant_int8_static.cpp)
  rec.text("int8_engine_reason", "int8-static runs oneDNN's qlinear_pointwise (output dequantized "
                                 "in the kernel into the compute dtype)");
}
}  // namespace

double ServedModel::model_bytes() const {
  return engine ? static_cast<double>(engine->memory().param) : static_cast<double>(q->model_bytes());
}

void ServedModel::record(Recorder& rec, const Point& p, int rank) const {
  // Sharded: this rank's fp32 shard is its model bytes (full_shard: about 1/N).
  const double fp32_bytes = static_cast<double>(4 * models::count_params(model->units()));
  rec.scalar("model_bytes", model_bytes());
  rec.scalar("model_resident_bytes", engine ? model_bytes() : static_cast<double>(q->resident_bytes()));
  rec.scalar("model_bytes_fp32", fp32_bytes);
  rec.scalar("model_bytes_ratio", model_bytes() / fp32_bytes);
  rec.scalar("params", static_cast<double>(models::count_params(served->units())));
  rec.scalar("params_nonzero", static_cast<double>(params_nonzero));
  const auto& pk = config<prune::PruneKeys>(p);
  rec.text("pruning", pk.method);
  if (!checkpoint_note.empty()) rec.text("checkpoint_note", checkpoint_note);
  if (pk.method != "none") {
    rec.scalar("pruning_eligible", static_cast<double>(pruning.eligible));
    rec.scalar("pruning_removed", static_cast<double>(pruning.removed));
    rec.scalar("pruning_sparsity", pk.sparsity);
    rec.scalar("d_ff", static_cast<double>(served->config().d_ff));
    if (sparse.csr_matrices + sparse.dense_matrices > 0) {
      rec.scalar("csr_matrices", static_cast<double>(sparse.csr_matrices));
      rec.scalar("dense_matrices", static_cast<double>(sparse.dense_matrices));
      rec.text("pruning_kernel", fmt::format(
          "{}: {} CSR and {} dense matrices{}", config<prune::PruneConvertKeys>(p).kernel, sparse.csr_matrices,
          sparse.dense_matrices,
          sparse.csr_seconds > 0 ? fmt::format(" (timed at start-up: CSR {:.1f} ms, dense {:.1f} ms "
                                               "over all matrices)", 1e3 * sparse.csr_seconds,
                                               1e3 * sparse.dense_seconds)
                                 : std::string()));
    }
  }
  sb::RankMemory m = sb::rank_memory_now(rank, config<MeshConfig>(p).mesh());
  if (engine) {
    fsdp::add_engine_memory(engine->memory(), m);
  } else {
    m.param_bytes = static_cast<std::uint64_t>(q->resident_bytes());
    m.model_state_bytes = m.peak_model_state_bytes = m.param_bytes;
  }
  rec.memory(m);  // host memory; on a GPU the weights' bytes are the device's:
  if (device.is_cuda())
    rec.scalar("device_peak_allocated_bytes", static_cast<double>(models::device_peak_allocated_bytes(device)));
  rec.text("torch_version", TORCH_VERSION);
  rec.text("cpu_allocator", models::cpu_allocator_name());
  rec.text("quantization", config<InferChoice>(p).quantization);
  rec.text("sharding", engine ? kServingStrategy : "none");
  rec.text("compute_dtype", compute == torch::kBFloat16 ? "bf16" : compute == torch::kHalf ? "fp16" : "fp32");
  rec.text("compute_dtype_reason", compute_why);
  if (!int8_engine.engine.empty()) {
    rec.text("int8_engine", int8_engine.engine);
    rec.text("int8_engine_reason", int8_engine.why);
    rec.text("int8_units", quant::host_int8_units().note);
  }
  if (calibration) record_calibration(rec, *calibration, *q);
  rec.text("qengine", c10::toString(at::globalContext().qEngine()));
  rec.text("device", device.str());
  if (ep_form) {
    rec.text("ep_form", models::ep_form_name(*ep_form));
    rec.text("expert_placement", expert_placement.empty() ? "contiguous" : expert_placement);
  }
}

void record_ep_layers(Recorder& rec, MPI_Comm world, const std::vector<models::EpLayerStats>& sum,
                      std::int64_t forwards, const char* count) {
  std::vector<double> sums, slowest;
  for (const auto& a : sum) {
    sums.insert(sums.end(), {static_cast<double>(a.tokens), static_cast<double>(a.cross_rank),
                             static_cast<double>(a.received), static_cast<double>(a.dropped),
                             static_cast<double>(a.a2a_bytes)});
    slowest.push_back(a.a2a_s);
  }
  parallel::reduce_layer_stats(sums, slowest, world);
  const double n = static_cast<double>(std::max<std::int64_t>(forwards, 1));
  for (std::size_t i = 0; i < sum.size(); ++i) {
    const double* c = &sums[5 * i];
    rec.series("ep_layer", static_cast<double>(sum[i].layer));
    rec.series("ep_layer_cross_rank_fraction", c[0] > 0 ? c[1] / c[0] : 0.0);
    rec.series("ep_layer_dropped_fraction", c[2] > 0 ? c[3] / c[2] : 0.0);
    rec.series("ep_layer_a2a_bytes", c[4] / n);
    rec.series("ep_layer_a2a_s", slowest[i] / n);
  }
  rec.scalar(count, n);
}

namespace {

// The served model's cross-key rules, for both tasks.
void validate(const WeightsKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const BaseConfig& b = base_config(p);
  const std::string& quantization = config<InferChoice>(p).quantization;
  if (b.world > 1) {  // sharded: fp32 full_shard only
    if (const std::string& strategy = config<ModelKeys>(p).strategy; strategy != kServingStrategy)
      out.push_back({"strategy", fmt::format("{} on {} ranks shards the weights with {}; set "
                                             "strategy = \"{}\" (or world = 1)", b.task,
                                             b.world, kServingStrategy, kServingStrategy)});
    if (quantization != "none")
      out.push_back({"quantization", fmt::format("quantized {} runs on one rank; set world = 1 or "
                                                 "quantization = \"none\" (world is {})", b.task,
                                                 b.world)});
  }
  if (const std::string bad = quant::check_compute_choice(quantization, c.quant_compute); !bad.empty())
    out.push_back({"quant_compute", bad});
  if (quant::needs_calibration(quantization) && c.calibration_batches == 0)
    out.push_back({"calibration_batches", fmt::format(
        "quantization = \"{}\" fixes activation ranges from calibration data: set calibration_batches "
        "> 0 (batches of the training split of `data`, held out from what the point scores)", quantization)});
  // Only a warning: an earlier suite (quant-accuracy-train) may write the checkpoint.
  const std::string& ckpt = c.checkpoint;
  if (!ckpt.empty() && !std::filesystem::exists(ckpt))
    out.push_back({"checkpoint", fmt::format("checkpoint '{}' does not exist (yet): the point will "
                                             "fail unless an earlier suite writes it (e.g. with "
                                             "export_safetensors); check the path", ckpt), true});
  // The weights the point loads, checked from their headers (names, shapes, dtypes).
  if (const std::string bad = data::checkpoint_problem(config<ModelKeys>(p).model, weights_path(p));
      !bad.empty())
    out.push_back({ckpt.empty() ? "model" : "checkpoint", bad});
}

}  // namespace

void WeightsKeys::declare(Fields<WeightsKeys>& f) {
  f.tasks({"infer", "serve"});
  f.add("checkpoint", &WeightsKeys::checkpoint, std::string(""),
        "infer, serve: safetensors checkpoint (file or folder) to load (empty: the model folder's "
        "weights when model is a folder, else seeded initial weights)");
  register_name("quant_compute", "auto", "the format's low dtype where the device has its units, else fp32");
  register_name("quant_compute", "fp32", "fp32 activations; weights dequantized to fp32 on the fly");
  register_name("quant_compute", "bf16", "bf16 activations and GEMMs (bf16, int8-weight, int8-weight-channel)");
  register_name("quant_compute", "fp16", "fp16 activations and GEMMs (fp16)");
  f.name("quant_compute", &WeightsKeys::quant_compute, "quant_compute", "auto",
         "infer, serve: the dtype a quantized model's forward computes in: auto (the format's low dtype, "
         "bf16 for bf16 and int8-weight*, fp16 for fp16, where the device has fast units for it; "
         "else fp32), fp32, bf16 or fp16");
  register_name("int8_engine", "auto", "the fastest engine this LibTorch has, timed at start-up");
  register_name("int8_engine", "x86", "PyTorch's x86 engine (FBGEMM or oneDNN per op)");
  register_name("int8_engine", "fbgemm", "FBGEMM");
  register_name("int8_engine", "onednn", "oneDNN (VNNI/AMX where the CPU has them)");
  register_name("int8_engine", "qnnpack", "QNNPACK (mobile kernels)");
  f.name("int8_engine", &WeightsKeys::int8_engine, "int8_engine", "auto",
         "infer, serve: LibTorch's int8 engine for int8-dynamic: auto (the fastest this LibTorch has, "
         "measured at start-up), x86, fbgemm, onednn or qnnpack");
  f.name("calibration", &WeightsKeys::calibration, "calibration", "percentile",
         "infer, serve: int8-static's activation observer: minmax, percentile or entropy "
         "(workloads/quant/observer_*.cpp)");
  f.add("calibration_batches", &WeightsKeys::calibration_batches, 4,
        "infer, serve: int8-static: batches (of `batch` x `seq`) of the training split the ranges "
        "are calibrated on").range(0, std::int64_t{1} << 20);
  f.add("calibration_percentile", &WeightsKeys::calibration_percentile, 99.99,
        "infer, serve: calibration = percentile: the share of values (%) each layer's range keeps")
      .range(50.0, 100.0);
  f.add("int8_skip_error", &WeightsKeys::int8_skip_error, 0.1,
        "infer, serve: int8-static keeps a linear layer in the compute dtype when its output's "
        "relative L2 error under int8, measured in calibration, exceeds this (1: quantize all)")
      .range(0.0, 1e9);
  f.validate(validate);
}
SB_CONFIG_SECTION(WeightsKeys);

}  // namespace sb::infer
