// The "infer" task: builds the model (seeded init or a safetensors checkpoint), converts its
// weights with the chosen quantizer, runs one LoadGen scenario on held-out Markov samples,
// and records queries, per-batch latency, latency percentiles, throughput, model bytes and
// accuracy against the fp32 model (top-1 agreement; perplexity for GPT-2, MLM accuracy for BERT).
#include <ATen/Parallel.h>
#include <torch/version.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "workloads/data/batches.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/comm/communicator.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/models/family.h"
#include "workloads/infer/loadgen.h"
#include "workloads/models/params.h"
#include "workloads/prune/pruner.h"
#include "workloads/prune/sparse_weights.h"
#include "workloads/quant/quantizer.h"

namespace sb::infer {
namespace {

using I = std::int64_t;

bool is_infer(const Point& p) { return p.has("task") && p.get_string("task") == "infer"; }

// Rows of b0 and b1 ... concatenated (undefined fields stay undefined).
models::Batch cat_rows(const std::vector<models::Batch>& bs) {
  auto cat = [&](auto field) {
    std::vector<torch::Tensor> ts;
    for (const auto& b : bs)
      if ((b.*field).defined()) ts.push_back(b.*field);
    return ts.empty() ? torch::Tensor() : torch::cat(ts, 0);
  };
  models::Batch out;
  out.input_ids = cat(&models::Batch::input_ids);
  out.targets = cat(&models::Batch::targets);
  out.attention_mask = cat(&models::Batch::attention_mask);
  out.token_type_ids = cat(&models::Batch::token_type_ids);
  return out;
}


// Samples the scenario issues in total.
I total_samples(const LoadgenConfig& c) {
  if (c.scenario == "multi-stream" || c.scenario == "offline") return c.queries * c.samples_per_query;
  return c.queries;
}

struct Accuracy {
  double top1 = 0;        // fraction of scored positions where argmax agrees with fp32
  double metric = 0;      // the family's eval_metric: perplexity exp(mean CE) or MLM accuracy
  double metric_fp32 = 0;
};

// Scored positions: every target (GPT-2: every next token; BERT: the masked ones).
// q: the served model's logits (quantized weights, or the sharded engine's forward).
Accuracy accuracy(models::Model& model, models::ParamProvider& fp32,
                  const std::function<torch::Tensor(const models::Batch&)>& q,
                  const data::BatchSource& src, I batches) {
  Accuracy a;
  // The family names its metric; these are the two this scorer computes.
  const std::string& metric = models::family(model.config().family).eval_metric;
  SB_CHECK(metric == "perplexity" || metric == "mlm_accuracy",
           "infer scores perplexity or mlm_accuracy; model family {} asks for {}",
           model.config().family, metric);
  const bool perplexity = metric == "perplexity";
  double agree = 0, scored = 0, loss_q = 0, loss_f = 0, hit_q = 0, hit_f = 0;
  for (I i = 0; i < batches; ++i) {
    auto b = src.heldout(i);
    auto lf = model.logits(fp32, b), lq = q(b);  // (B, T, V)
    auto mask = b.targets != -100;                              // (B, T)
    auto af = lf.argmax(-1), aq = lq.argmax(-1);
    agree += ((af == aq) & mask).sum().item<double>();
    scored += mask.sum().item<double>();
    if (perplexity) {
      auto ce = [&](const torch::Tensor& l) {
        return at::cross_entropy_loss(l.reshape({-1, l.size(-1)}), b.targets.reshape({-1}), {},
                                      at::Reduction::Sum, /*ignore_index=*/-100)
            .item<double>();
      };
      loss_q += ce(lq);
      loss_f += ce(lf);
    } else {
      hit_q += ((aq == b.targets) & mask).sum().item<double>();
      hit_f += ((af == b.targets) & mask).sum().item<double>();
    }
  }
  SB_CHECK(scored > 0, "accuracy: the held-out batches have no targets");
  a.top1 = agree / scored;
  a.metric = perplexity ? std::exp(loss_q / scored) : hit_q / scored;
  a.metric_fp32 = perplexity ? std::exp(loss_f / scored) : hit_f / scored;
  return a;
}

LoadgenConfig loadgen_config(const Point& p) {
  LoadgenConfig lg;
  lg.scenario = p.get_string("scenario");
  lg.queries = p.get_int("queries");
  lg.samples_per_query = p.get_int("samples_per_query");
  lg.max_batch = p.get_int("batch");
  lg.target_qps = p.get_double("target_qps");
  lg.seed = static_cast<std::uint64_t>(p.get_int("seed"));
  return lg;
}

// world > 1: sharded inference. The weights live as full_shard shards (1/N per rank); each
// forward all-gathers a unit just before it runs and frees it after (forward prefetch
// overlaps the next unit's gather). Every rank serves its own query stream of the same
// scenario (same seed, so the same schedule and batch sizes: the forwards stay in lockstep)
// on its own samples; step times are the slowest rank's, so every rank's scenario sees the
// same schedule and records the same latencies.
// Stages: build, draw the samples, warm up, run the scenario, record.
class InferWorkload final : public sb::Workload {
 public:
  void run(RunContext& ctx) override {
    build(ctx);
    draw_samples(ctx);
    warm_up(ctx);
    auto result = run_scenario(lg_, [&](I first, I n) {
      // Every rank issues the same query schedule, so every rank asks here; the scenario's
      // clock is the forwards' own durations, so the agreement costs no measured time.
      if (ctx.stop_agreed()) throw sb::Stopped(ctx.stop.reason);
      const double s = forward(ctx, first, n);
      record_step(ctx, n, s, false);
      return s;
    });
    record_latency(ctx, result);
    record_model(ctx);
  }

 private:
  void build(RunContext& ctx);
  void draw_samples(RunContext& ctx);
  void warm_up(RunContext& ctx);
  double forward(RunContext& ctx, I first, I n);
  void record_step(RunContext& ctx, I n, double s, bool warmup);
  void record_latency(RunContext& ctx, const ScenarioResult& result);
  void record_model(RunContext& ctx);
  void record_classification(RunContext& ctx);
  // Logits on device_; b may be on the host (moved) or there already (the timed samples).
  torch::Tensor serve(const models::Batch& b) {
    if (engine_) return engine_->forward_logits(data::to_device(b, device_));
    return served_->logits(*q_, data::to_device(b, device_));
  }

  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before these are destroyed (their destructors wait on peers).
  std::unique_ptr<models::Model> model_;              // as configured: the accuracy reference
  std::vector<std::vector<torch::Tensor>> weights_;  // fp32, the reference for accuracy
  std::unique_ptr<models::Model> served_;  // what runs: model_, or its pruned form (pruning)
  prune::Pruned pruned_info_;              // counts of the pruning (its model moved to served_)
  prune::SparseChoice sparse_;             // magnitude pruning: the kernels chosen
  std::int64_t params_nonzero_ = 0;        // of the served model
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<fsdp::Engine> engine_;        // sharded (world > 1)
  std::unique_ptr<quant::QuantizedWeights> q_;  // one rank
  std::shared_ptr<const data::LabelledData> labelled_;  // data = a labelled .jsonl/.csv
  std::unique_ptr<data::BatchSource> text_;  // data = text: held-out batches of max_batch rows
  std::optional<c10::InferenceMode> inference_;  // from build() on
  LoadgenConfig lg_;
  torch::Device device_ = torch::kCPU;  // the `device` key (models/device.h)
  torch::ScalarType compute_ = torch::kFloat;  // the forward's dtype (key quant_compute)
  std::string compute_why_ = "sharded inference computes in fp32";
  quant::Int8EngineChoice int8_engine_;  // int8-dynamic only
  models::Batch samples_;  // (S, T): every sample the scenario touches, on device_
  I step_ = 0;
};

void InferWorkload::build(RunContext& ctx) {
  const Point& p = ctx.point;
  at::set_num_threads(threads_per_rank(p.get_int("threads"), ctx.world));
  device_ = models::resolve_device(p.get_string("device"), sb::node_local_rank(ctx.world));
  model_ = models::make_model(p.get_string("model"), p.get_string("attention"));
  std::string ckpt = p.get_string("checkpoint");
  if (ckpt.empty() && models::is_model_path(p.get_string("model"))) ckpt = p.get_string("model");
  weights_ = ckpt.empty() ? models::init_params(model_->units(),
                                                static_cast<std::uint64_t>(p.get_int("seed")))
                          : data::load_checkpoint(*model_, ckpt);
  // Pruning (Modelcomp) converts the model first; weights_ stay the unpruned reference.
  const std::string pname = p.get_string("pruning");
  pruned_info_ = prune::prune(pname, *model_, weights_,
                              {p.get_double("pruning.sparsity"), p.get_string("pruning.scope")});
  served_ = std::move(pruned_info_.model);
  auto pruned = std::move(pruned_info_.weights);
  params_nonzero_ = prune::count_nonzero(pruned);
  if (ctx.size > 1) {  // built outside inference mode: the engine's buffers are ordinary tensors
    comm_ = std::make_unique<comm::Communicator>(ctx.world, ctx.size, true, comm::backend_choice(p));
    fsdp::EngineConfig ec;
    ec.strategy = "full_shard";
    ec.device = device_;
    engine_ = std::make_unique<fsdp::Engine>(*served_, *comm_, ec, pruned);
  }
  inference_.emplace();
  if (!engine_) {  // the served copy on device_; weights_ stay the host fp32 reference
    auto served = std::move(pruned);
    if (!device_.is_cpu())
      for (auto& unit : served)
        for (auto& t : unit) t = t.to(device_);
    const std::string qname = p.get_string("quantization");
    if (qname == "int8-dynamic") int8_engine_ = quant::select_int8_engine(p.get_string("int8_engine"));
    compute_ = quant::compute_dtype(qname, p.get_string("quant_compute"), device_, &compute_why_);
    if (pname == "magnitude" && qname == "none" && device_.is_cpu())  // sparse where it pays
      q_ = prune::sparse_weights(*served_, served, p.get_string("pruning.kernel"),
                                 p.get_int("batch") * p.get_int("seq"), &sparse_);
    else
      q_ = quant::quantize(qname, *served_, served, compute_);
  }
  lg_ = loadgen_config(p);
}

// Drawn before timing starts: held-out rows of the chain `train` uses for this seed (stream
// "heldout", from index 0), each rank its own rows.
// Text (data = a corpus): its held-out batches, see the branch below.
// With labelled data (data = .jsonl/.csv) the timed samples are its validation examples, in
// order from this rank's first, cycled as needed.
void InferWorkload::draw_samples(RunContext& ctx) {
  const auto seed = lg_.seed;
  if (data::is_labelled_path(ctx.point.get_string("data"))) {
    labelled_ = data::load_labelled_for(ctx.point, model_->config());
    const auto& v = labelled_->validation;
    auto b = v.select(torch::arange(total_samples(lg_), torch::kLong)
                          .add(static_cast<I>(ctx.rank) * total_samples(lg_))
                          .remainder(v.size()));
    b.labels = torch::Tensor();  // served, not scored: the scenario times forwards only
    samples_ = data::to_device(b, device_);
    return;
  }
  if (data::is_text_path(ctx.point.get_string("data"))) {
    // A text corpus is read once, as batches of max_batch held-out rows (never the training
    // stream): record_model scores batches [0, accuracy_batches), the timed rows are the
    // batches after those, each rank its own.
    text_ = data::text_source_for(ctx.point, model_->config(), ctx.world, lg_.max_batch).source;
    const I need = total_samples(lg_), per_rank = (need + lg_.max_batch - 1) / lg_.max_batch;
    const I first = ctx.point.get_int("accuracy_batches") + static_cast<I>(ctx.rank) * per_rank;
    std::vector<models::Batch> batches;
    for (I k = 0; k < per_rank; ++k) batches.push_back(text_->heldout(first + k));
    samples_ = data::to_device(data::slice_rows(cat_rows(batches), 0, need), device_);
    return;
  }
  auto src = data::markov_source(model_->config(), 1, ctx.point.get_int("seq"), seed, seed);
  std::vector<models::Batch> rows;
  const I first_row = static_cast<I>(ctx.rank) * total_samples(lg_);
  for (I i = 0; i < total_samples(lg_); ++i) rows.push_back(src->heldout(first_row + i));
  samples_ = data::to_device(cat_rows(rows), device_);
}

// Labelled data: the served model's and the fp32 model's class predictions on every
// validation example, scored against the labels (accuracy, macro-F1) and against each other
// (top1_agreement).
void InferWorkload::record_classification(RunContext& ctx) {
  const auto& v = labelled_->validation;
  const I B = lg_.max_batch, labels = model_->config().num_labels;
  models::PersistentParams fp32(weights_, /*requires_grad=*/false);
  torch::NoGradGuard ng;
  const auto pf = data::predicted_classes(v, B, [&](const models::Batch& b) {
    return model_->classify(fp32, b);
  });
  const auto pq = data::predicted_classes(v, B, [&](const models::Batch& b) {
    const auto on = data::to_device(b, device_);
    return (engine_ ? engine_->forward_classify(on) : served_->classify(*q_, on)).to(torch::kFloat);
  });
  const auto sq = data::classification_score(pq, v.labels, labels);
  const auto sf = data::classification_score(pf, v.labels, labels);
  auto& rec = ctx.recorder;
  rec.scalar("top1_agreement", (pq == pf).to(torch::kDouble).mean().item<double>());
  rec.scalar("classification_accuracy", sq.accuracy);
  rec.scalar("classification_accuracy_fp32", sf.accuracy);
  rec.scalar("macro_f1", sq.macro_f1);
  rec.scalar("macro_f1_fp32", sf.macro_f1);
  rec.scalar("validation_examples", static_cast<double>(v.size()));
  rec.scalar("truncated_examples", static_cast<double>(labelled_->truncated));
}

void InferWorkload::warm_up(RunContext& ctx) {  // excluded from statistics
  const I warmup = ctx.point.get_int("warmup");
  ctx.progress.begin(fmt::format("infer {} {}", ctx.point.name, lg_.scenario),
                     static_cast<long>(warmup));
  for (I w = 0; w < warmup && !ctx.stop_agreed(); ++w) {
    const I n = std::min(lg_.max_batch, samples_.input_ids.size(0));
    record_step(ctx, n, forward(ctx, 0, n), true);
    ctx.progress.step(static_cast<long>(w + 1), "warm-up");
  }
  ctx.progress.end();
}

// The slowest rank's forward time of samples [first, first + n) (as train's step times); the
// reduction is outside the timed region.
double InferWorkload::forward(RunContext& ctx, I first, I n) {
  const auto b = data::slice_rows(samples_, first, first + n);
  const auto t0 = std::chrono::steady_clock::now();
  auto logits = serve(b);
  models::synchronize(device_);  // GPU kernels run asynchronously: wait for the result
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, ctx.world),
                "MPI_Allreduce (forward time)");
  return s;
}

void InferWorkload::record_step(RunContext& ctx, I n, double s, bool warmup) {
  sb::StepRecord r;
  r.step = step_++;
  r.warmup = warmup;
  r.wall_s = r.forward_s = s;
  r.samples_per_s = static_cast<double>(n) / s;
  r.tokens_per_s = static_cast<double>(n * ctx.point.get_int("seq")) / s;
  ctx.recorder.step(r);
}

void InferWorkload::record_latency(RunContext& ctx, const ScenarioResult& result) {
  auto& rec = ctx.recorder;
  const I T = ctx.point.get_int("seq");
  std::vector<double> lat;
  for (const auto& qr : result.queries) {
    rec.query({lg_.scenario, qr.query, qr.issue_s, qr.latency_s, qr.samples, qr.samples * T});
    lat.push_back(qr.latency_s);
  }
  rec.scalar("latency_p50_s", quantile(lat, 0.50));
  rec.scalar("latency_p90_s", quantile(lat, 0.90));
  rec.scalar("latency_p99_s", quantile(lat, 0.99));
  double mean = 0;
  for (double l : lat) mean += l / static_cast<double>(lat.size());
  rec.scalar("latency_mean_s", mean);
  rec.scalar("throughput_samples_per_s", static_cast<double>(result.samples) / result.duration_s);
  rec.scalar("throughput_tokens_per_s",
             static_cast<double>(result.samples * T) / result.duration_s);
}

// Model bytes, accuracy against fp32 (outside the timed region, on a disjoint held-out
// stream), memory and provenance.
void InferWorkload::record_model(RunContext& ctx) {
  auto& rec = ctx.recorder;
  const Point& p = ctx.point;
  // Sharded: this rank's fp32 shard is its model bytes (full_shard: about 1/N).
  const double fp32_bytes = static_cast<double>(4 * models::count_params(model_->units()));
  const double model_bytes = engine_ ? static_cast<double>(engine_->memory().param)
                                     : static_cast<double>(q_->model_bytes());
  rec.scalar("model_bytes", model_bytes);
  rec.scalar("model_resident_bytes",
             engine_ ? model_bytes : static_cast<double>(q_->resident_bytes()));
  rec.scalar("model_bytes_fp32", fp32_bytes);
  rec.scalar("model_bytes_ratio", model_bytes / fp32_bytes);
  rec.scalar("params", static_cast<double>(models::count_params(served_->units())));
  rec.scalar("params_nonzero", static_cast<double>(params_nonzero_));
  rec.text("pruning", p.get_string("pruning"));
  if (p.get_string("pruning") != "none") {
    rec.scalar("pruning_eligible", static_cast<double>(pruned_info_.eligible));
    rec.scalar("pruning_removed", static_cast<double>(pruned_info_.removed));
    rec.scalar("pruning_sparsity", p.get_double("pruning.sparsity"));
    rec.scalar("d_ff", static_cast<double>(served_->config().d_ff));
    if (sparse_.csr_matrices + sparse_.dense_matrices > 0) {
      rec.scalar("csr_matrices", static_cast<double>(sparse_.csr_matrices));
      rec.scalar("dense_matrices", static_cast<double>(sparse_.dense_matrices));
      rec.text("pruning_kernel", fmt::format(
          "{}: {} CSR and {} dense matrices{}", p.get_string("pruning.kernel"), sparse_.csr_matrices,
          sparse_.dense_matrices,
          sparse_.csr_seconds > 0 ? fmt::format(" (timed at start-up on batch x seq rows: CSR {:.1f} ms, "
                                                "dense {:.1f} ms over all matrices)",
                                                1e3 * sparse_.csr_seconds, 1e3 * sparse_.dense_seconds)
                                  : std::string()));
    }
  }
  if (labelled_ && p.get_int("accuracy_batches") > 0) {
    record_classification(ctx);
  } else if (const I batches = p.get_int("accuracy_batches"); batches > 0) {
    models::PersistentParams fp32(weights_, /*requires_grad=*/false);
    // Same chain, another stream: never the scenario's rows (text: draw_samples keeps them
    // apart).
    auto markov = text_ ? nullptr
                        : data::markov_source(model_->config(), lg_.max_batch, p.get_int("seq"),
                                              lg_.seed, lg_.seed + 7919);
    auto a = accuracy(*model_, fp32,
                      [this](const models::Batch& b) { return serve(b).to(torch::kCPU, torch::kFloat); },
                      text_ ? *text_ : *markov, batches);
    rec.scalar("top1_agreement", a.top1);
    const std::string& metric = models::family(model_->config().family).eval_metric;
    rec.scalar(metric, a.metric);
    rec.scalar(metric + "_fp32", a.metric_fp32);
  }
  sb::RankMemory m = sb::rank_memory_now(ctx.rank);
  if (engine_) {
    fsdp::add_engine_memory(engine_->memory(), m);
  } else {
    m.param_bytes = static_cast<std::uint64_t>(q_->resident_bytes());
    m.model_state_bytes = m.peak_model_state_bytes = m.param_bytes;
  }
  rec.memory(m);  // host memory; on a GPU the weights' bytes are the device's:
  if (device_.is_cuda())
    rec.scalar("device_peak_allocated_bytes",
               static_cast<double>(models::device_peak_allocated_bytes(device_)));
  rec.text("torch_version", TORCH_VERSION);
  rec.text("cpu_allocator", models::cpu_allocator_name());
  rec.text("quantization", p.get_string("quantization"));
  rec.text("sharding", engine_ ? "full_shard" : "none");
  rec.text("compute_dtype", compute_ == torch::kBFloat16 ? "bf16" : compute_ == torch::kHalf ? "fp16" : "fp32");
  rec.text("compute_dtype_reason", compute_why_);
  if (!int8_engine_.engine.empty()) {
    rec.text("int8_engine", int8_engine_.engine);
    rec.text("int8_engine_reason", int8_engine_.why);
  }
  rec.text("qengine", c10::toString(at::globalContext().qEngine()));
  rec.text("device", device_.str());
}

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (!is_infer(p)) return;
  if (p.get_int("world") > 1) {  // sharded inference: fp32 full_shard only
    if (p.has("strategy") && p.get_string("strategy") != "full_shard")
      out.push_back({"strategy", fmt::format("infer on {} ranks shards the weights with "
                                             "full_shard; set strategy = \"full_shard\" (or "
                                             "world = 1)", p.get_int("world"))});
    if (p.get_string("quantization") != "none")
      out.push_back({"quantization", fmt::format("quantized inference runs on one rank; set "
                                                 "world = 1 or quantization = \"none\" (world "
                                                 "is {})", p.get_int("world"))});
  }
  if (const std::string bad = quant::check_compute_choice(p.get_string("quantization"),
                                                          p.get_string("quant_compute"));
      !bad.empty())
    out.push_back({"quant_compute", bad});
  const std::string sc = p.get_string("scenario");
  if (sc == "server" && p.get_double("target_qps") <= 0)
    out.push_back({"target_qps", "the server scenario needs target_qps > 0"});
  if (sc == "server" && p.get_double("server_latency_ms") <= 0)
    out.push_back({"server_latency_ms", "the server scenario needs a latency bound > 0 (ms)"});
  if (p.get_int("queries") < 1) out.push_back({"queries", "queries must be >= 1"});
  if (p.get_int("samples_per_query") < 1)
    out.push_back({"samples_per_query", "samples_per_query must be >= 1"});
  if (p.get_int("accuracy_batches") < 0)
    out.push_back({"accuracy_batches", "accuracy_batches must be >= 0"});
  try {
    const auto m = models::preset_config(p.get_string("model"));
    if (p.get_int("seq") > m.max_pos)
      out.push_back({"seq", fmt::format("seq {} exceeds model {}'s {} positions; use seq <= {} "
                                        "or a model with more positions (`shardbench models`)",
                                        p.get_int("seq"), m.preset, m.max_pos, m.max_pos)});
  } catch (const sb::Error&) {
    // an unknown model is reported by the name check
  }
  // Only a warning: an earlier suite (quant-accuracy-train) may write the checkpoint.
  const std::string& ckpt = p.get_string("checkpoint");
  if (!ckpt.empty() && !std::filesystem::exists(ckpt))
    out.push_back({"checkpoint", fmt::format("checkpoint '{}' does not exist (yet): the point will "
                                             "fail unless an earlier suite writes it (e.g. with "
                                             "export_safetensors); check the path", ckpt), true});
}

// Every key here is read by the infer task only (a point of another task may not set it),
// except the weights' ones, which serve reads too.
void key(KeySpec ks) {
  ks.tasks = {"infer"};
  register_key(std::move(ks));
}
void weights_key(KeySpec ks) {
  ks.tasks = {"infer", "serve"};
  register_key(std::move(ks));
}

KeySpec integer(const char* k, I def, I lo, I hi, const char* doc) {
  KeySpec ks{k, KeyType::Int, def, "", doc};
  ks.min_int = lo, ks.max_int = hi;
  return ks;
}

const sb::Registrar registrar([] {
  key({"scenario", KeyType::Name, std::string("single-stream"), "scenario",
       "infer: MLPerf LoadGen scenario (single-stream, multi-stream, server, offline)"});
  key(integer("queries", 32, 1, I{1} << 24, "infer: queries issued (offline: x samples_per_query samples)"));
  key(integer("samples_per_query", 8, 1, I{1} << 20, "infer: samples per query (multi-stream, offline)"));
  key({"target_qps", KeyType::Float, 10.0, "", "infer: server scenario's mean Poisson arrival rate"});
  key({"server_latency_ms", KeyType::Float, 100.0, "",
       "infer: server scenario's p99 latency bound; a point above it is INVALID (LoadGen's rule)"});
  weights_key({"checkpoint", KeyType::String, std::string(""), "",
       "infer: safetensors checkpoint (file or folder) to load (empty: the model folder's "
       "weights when model is a folder, else seeded initial weights)"});
  key(integer("accuracy_batches", 2, 0, I{1} << 20,
              "infer: held-out batches (of `batch` samples) scored against the fp32 model"));
  register_name("quant_compute", "auto", "the format's low dtype where the device has its units, else fp32");
  register_name("quant_compute", "fp32", "fp32 activations; weights dequantized to fp32 on the fly");
  register_name("quant_compute", "bf16", "bf16 activations and GEMMs (bf16, int8-weight, int8-weight-channel)");
  register_name("quant_compute", "fp16", "fp16 activations and GEMMs (fp16)");
  weights_key({"quant_compute", KeyType::Name, std::string("auto"), "quant_compute",
       "infer: the dtype a quantized model's forward computes in: auto (the format's low dtype, "
       "bf16 for bf16 and int8-weight*, fp16 for fp16, where the device has fast units for it; "
       "else fp32), fp32, bf16 or fp16"});
  register_name("int8_engine", "auto", "the fastest engine this LibTorch has, timed at start-up");
  register_name("int8_engine", "x86", "PyTorch's x86 engine (FBGEMM or oneDNN per op)");
  register_name("int8_engine", "fbgemm", "FBGEMM");
  register_name("int8_engine", "onednn", "oneDNN (VNNI/AMX where the CPU has them)");
  register_name("int8_engine", "qnnpack", "QNNPACK (mobile kernels)");
  weights_key({"int8_engine", KeyType::Name, std::string("auto"), "int8_engine",
       "infer: LibTorch's int8 engine for int8-dynamic: auto (the fastest this LibTorch has, "
       "measured at start-up), x86, fbgemm, onednn or qnnpack"});
  register_validator(validate);
  register_task({"infer", [] { return std::make_unique<InferWorkload>(); }, [](const Point& p) {
                   auto model = models::make_model(p.get_string("model"), p.get_string("attention"));
                   return static_cast<double>(
                       quant::quantized_model_bytes(p.get_string("quantization"), model->units()));
                 }});
});

}  // namespace
}  // namespace sb::infer
