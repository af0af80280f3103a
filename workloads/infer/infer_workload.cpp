// The "infer" task: builds the model (seeded init or a safetensors checkpoint), converts its
// weights with the chosen quantizer, runs one LoadGen scenario on held-out Markov samples,
// and records queries, per-batch latency, latency percentiles, throughput, model bytes and
// accuracy against the fp32 model (top-1 agreement; perplexity for GPT-2, MLM accuracy for BERT).
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "workloads/data/batches.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/models/device.h"
#include "workloads/models/family.h"
#include "workloads/models/loss.h"
#include "workloads/infer/infer_config.h"
#include "workloads/infer/loadgen.h"
#include "workloads/infer/served_model.h"
#include "workloads/models/params.h"

namespace sb::infer {
namespace {

using I = std::int64_t;


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
        // fp32 whatever the served dtype (a bf16 sum over a batch's tokens keeps 8 bits)
        return models::cross_entropy(l.reshape({-1, l.size(-1)}), b.targets.reshape({-1}), at::Reduction::Sum)
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
  const InferKeys& k = config<InferKeys>(p);
  lg.scenario = k.scenario;
  lg.queries = k.queries;
  lg.samples_per_query = k.samples_per_query;
  lg.max_batch = config<ModelKeys>(p).batch;
  lg.target_qps = k.target_qps;
  lg.seed = static_cast<std::uint64_t>(base_config(p).seed);
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
    sb::set_phase("build");  // phases and steps: what an out-of-memory message names
    build(ctx);
    sb::heartbeat::set_phase("draw samples");
    draw_samples(ctx);
    sb::set_phase("warm-up");
    warm_up(ctx);
    sb::set_phase("query");
    // Expert-parallel inference's traffic in the comm table (ep_dispatch/ep_combine, or
    // ep_route/ep_context/ep_home, and the engine's gathers): the timed queries' alone.
    if (m_.ep_form) m_.comm->set_trace_hook([&ctx](const sb::CommEvent& e) { ctx.recorder.comm(e); }, MPI_Wtime());
    auto result = run_scenario(lg_, [&](I first, I n) {
      // Every rank issues the same query schedule, so every rank asks here; the scenario's
      // clock is the forwards' own durations, so the agreement costs no measured time.
      if (ctx.stop_agreed()) throw sb::Stopped(ctx.stop.reason);
      const double s = forward(ctx, first, n);
      record_step(ctx, n, s, false);
      return s;
    });
    sb::heartbeat::set_phase("record results");
    if (m_.comm) m_.comm->set_trace_hook(nullptr, 0);
    record_latency(ctx, result);
    record_ep_layers(ctx);
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
  // Logits on m_.device; b may be on the host (moved) or there already (the timed samples).
  // Labelled data: what a classification service computes, the class logits (B, labels),
  // not the MLM head's (B, T, vocab), which costs BERT-base as much as 3 of its layers.
  torch::Tensor serve(const models::Batch& b) {
    const auto on = data::to_device(b, m_.device);
    if (labelled_) return m_.run([&](models::ParamProvider& w) { return m_.served->classify(w, on); });
    if (m_.ep_form) return m_.run([&](models::ParamProvider& w) {
      auto r = dynamic_cast<models::EpInferer&>(*m_.served).ep_inference(w, on.input_ids, *m_.ep_form);
      ep_last_ = std::move(r.layers);
      return r.logits;
    });
    return m_.run([&](models::ParamProvider& w) { return m_.served->logits(w, on); });
  }

  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before these are destroyed (their destructors wait on peers).
  ServedModel m_;
  std::shared_ptr<const data::LabelledData> labelled_;  // data = a labelled .jsonl/.csv
  std::unique_ptr<data::BatchSource> text_;  // data = text: held-out batches of max_batch rows
  std::optional<c10::InferenceMode> inference_;  // from build() on
  LoadgenConfig lg_;
  models::Batch samples_;  // (S, T): every sample the scenario touches, on m_.device
  I step_ = 0;
  // Expert-parallel inference: the last forward's MoE layers, and their sum over the timed ones.
  std::vector<models::EpLayerStats> ep_last_, ep_sum_;
  I ep_forwards_ = 0;
  void record_ep_layers(RunContext& ctx);
};

void InferWorkload::build(RunContext& ctx) {
  const Point& p = ctx.point;
  at::set_num_threads(threads_per_rank(base_config(p).threads, ctx.world));
  build_served(m_, ctx, inference_, config<ModelKeys>(p).batch * config<ModelKeys>(p).seq);
  lg_ = loadgen_config(p);
}

// Drawn before timing starts: held-out rows of the chain `train` uses for this seed (stream
// "heldout", from index 0), each rank its own rows.
// Text (data = a corpus): its held-out batches, see the branch below.
// With labelled data (data = .jsonl/.csv) the timed samples are its validation examples, in
// order from this rank's first, cycled as needed.
void InferWorkload::draw_samples(RunContext& ctx) {
  const auto seed = lg_.seed;
  if (data::is_labelled_path(config<data::DataKeys>(ctx.point).data)) {
    labelled_ = data::load_labelled_for(ctx.point, m_.model->config());
    const auto& v = labelled_->validation;
    auto b = v.select(torch::arange(total_samples(lg_), torch::kLong)
                          .add(static_cast<I>(ctx.rank) * total_samples(lg_))
                          .remainder(v.size()));
    b.labels = torch::Tensor();  // served, not scored: the scenario times forwards only
    samples_ = data::to_device(b, m_.device);
    return;
  }
  if (data::is_text_path(config<data::DataKeys>(ctx.point).data)) {
    // A text corpus is read once, as batches of max_batch held-out rows (never the training
    // stream): record_model scores batches [0, accuracy_batches), the timed rows are the
    // batches after those, each rank its own.
    text_ = data::text_source_for(ctx.point, m_.model->config(), ctx.world, lg_.max_batch).source;
    const I need = total_samples(lg_), per_rank = (need + lg_.max_batch - 1) / lg_.max_batch;
    const I first = config<InferKeys>(ctx.point).accuracy_batches + static_cast<I>(ctx.rank) * per_rank;
    std::vector<models::Batch> batches;
    for (I k = 0; k < per_rank; ++k) batches.push_back(text_->heldout(first + k));
    samples_ = data::to_device(data::slice_rows(cat_rows(batches), 0, need), m_.device);
    return;
  }
  auto src = data::markov_source(m_.model->config(), 1, config<ModelKeys>(ctx.point).seq, seed, seed);
  std::vector<models::Batch> rows;
  const I first_row = static_cast<I>(ctx.rank) * total_samples(lg_);
  for (I i = 0; i < total_samples(lg_); ++i) rows.push_back(src->heldout(first_row + i));
  samples_ = data::to_device(cat_rows(rows), m_.device);
}

// Labelled data: the served model's and the fp32 model's class predictions on every
// validation example, scored against the labels (accuracy, macro-F1) and against each other
// (top1_agreement).
void InferWorkload::record_classification(RunContext& ctx) {
  const auto& v = labelled_->validation;
  const I B = lg_.max_batch, labels = m_.model->config().num_labels;
  models::PersistentParams fp32(m_.weights, /*requires_grad=*/false);
  torch::NoGradGuard ng;
  const auto pf = data::predicted_classes(v, B, [&](const models::Batch& b) {
    return m_.model->classify(fp32, b);
  });
  const auto pq = data::predicted_classes(v, B, [&](const models::Batch& b) {
    const auto on = data::to_device(b, m_.device);
    return m_.run([&](models::ParamProvider& w) { return m_.served->classify(w, on); }).to(torch::kFloat);
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
  const I warmup = base_config(ctx.point).warmup;
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
  sb::heartbeat::set_step(step_);  // the step record_step gives this batch
  sb::heartbeat::set_phase("forward");
  const auto b = data::slice_rows(samples_, first, first + n);
  const auto t0 = std::chrono::steady_clock::now();
  auto logits = serve(b);
  models::synchronize(m_.device);  // GPU kernels run asynchronously: wait for the result
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
  r.tokens_per_s = static_cast<double>(n * config<ModelKeys>(ctx.point).seq) / s;
  ctx.recorder.step(r);
  if (warmup || ep_last_.empty()) return;
  if (ep_sum_.empty()) ep_sum_.resize(ep_last_.size());
  for (std::size_t i = 0; i < ep_last_.size(); ++i) ep_sum_[i] += ep_last_[i];
  ++ep_forwards_;
}

// Per MoE layer over the timed forwards (served_model.h record_ep_layers).
void InferWorkload::record_ep_layers(RunContext& ctx) {
  if (m_.ep_form) infer::record_ep_layers(ctx.recorder, ctx.world, ep_sum_, ep_forwards_, "ep_forwards");
}

void InferWorkload::record_latency(RunContext& ctx, const ScenarioResult& result) {
  auto& rec = ctx.recorder;
  const I T = config<ModelKeys>(ctx.point).seq;
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
  rec.text("timed_output", labelled_ ? "class logits (batch, labels): a classification service"
                                     : "logits (batch, seq, vocab)");
  rec.scalar("throughput_samples_per_s", static_cast<double>(result.samples) / result.duration_s);
  rec.scalar("throughput_tokens_per_s",
             static_cast<double>(result.samples * T) / result.duration_s);
}

// Model bytes, accuracy against fp32 (outside the timed region, on a disjoint held-out
// stream), memory and provenance.
void InferWorkload::record_model(RunContext& ctx) {
  auto& rec = ctx.recorder;
  const Point& p = ctx.point;
  m_.record(rec, p, ctx.rank);
  if (labelled_ && config<InferKeys>(p).accuracy_batches > 0) {
    record_classification(ctx);
  } else if (const I batches = config<InferKeys>(p).accuracy_batches; batches > 0) {
    models::PersistentParams fp32(m_.weights, /*requires_grad=*/false);
    // Same chain, another stream: never the scenario's rows (text: draw_samples keeps them
    // apart).
    auto markov = text_ ? nullptr
                        : data::markov_source(m_.model->config(), lg_.max_batch, config<ModelKeys>(p).seq,
                                              lg_.seed, lg_.seed + 7919);
    auto a = accuracy(*m_.model, fp32,
                      [this](const models::Batch& b) { return serve(b).to(torch::kCPU, torch::kFloat); },
                      text_ ? *text_ : *markov, batches);
    rec.scalar("top1_agreement", a.top1);
    const std::string& metric = models::family(m_.model->config().family).eval_metric;
    rec.scalar(metric, a.metric);
    rec.scalar(metric + "_fp32", a.metric_fp32);
  }
}

void validate(const InferKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const std::string& sc = c.scenario;
  if (sc == "server" && c.target_qps <= 0)
    out.push_back({"target_qps", "the server scenario needs target_qps > 0"});
  if (sc == "server" && c.server_latency_ms <= 0)
    out.push_back({"server_latency_ms", "the server scenario needs a latency bound > 0 (ms)"});
  if (c.queries < 1) out.push_back({"queries", "queries must be >= 1"});
  if (c.samples_per_query < 1)
    out.push_back({"samples_per_query", "samples_per_query must be >= 1"});
  if (c.accuracy_batches < 0)
    out.push_back({"accuracy_batches", "accuracy_batches must be >= 0"});
  const ModelKeys& mk = config<ModelKeys>(p);
  // positions beyond the model's do not exist (train and infer alike)
  if (const std::string bad = models::seq_problem(mk.model, mk.seq); !bad.empty())
    out.push_back({"seq", bad});
}

}  // namespace

void InferKeys::declare(Fields<InferKeys>& f) {
  using I = std::int64_t;
  f.tasks({"infer"});  // the weights' keys, which serve reads too, are served_model.cpp's
  f.name("scenario", &InferKeys::scenario, "scenario", "single-stream",
         "infer: MLPerf LoadGen scenario (single-stream, multi-stream, server, offline)");
  f.add("queries", &InferKeys::queries, 32, "infer: queries issued (offline: x samples_per_query samples)")
      .range(1, I{1} << 24);
  f.add("samples_per_query", &InferKeys::samples_per_query, 8,
        "infer: samples per query (multi-stream, offline)").range(1, I{1} << 20);
  f.add("target_qps", &InferKeys::target_qps, 10.0, "infer: server scenario's mean Poisson arrival rate");
  f.add("server_latency_ms", &InferKeys::server_latency_ms, 100.0,
        "infer: server scenario's p99 latency bound; a point above it is INVALID (LoadGen's rule)");
  f.add("accuracy_batches", &InferKeys::accuracy_batches, 2,
        "infer: held-out batches (of `batch` samples) scored against the fp32 model").range(0, I{1} << 20);
  f.validate(validate);
}
SB_CONFIG_SECTION(InferKeys);

namespace {

const sb::Registrar registrar([] {
  register_task({"infer", [] { return std::make_unique<InferWorkload>(); }, [](const Point& p) {
                   const ModelKeys& mk = config<ModelKeys>(p);
                   auto model = models::make_model(mk.model, mk.attention);
                   return static_cast<double>(
                       quant::quantized_model_bytes(config<InferChoice>(p).quantization, model->units()));
                 },
                 {},  // memory terms: the plan's total only
                 {{"batch", "lower it: fewer rows per query"},
                  {"quantization", "int8 or bf16 weights take 1/4 or 1/2 of fp32's"},
                  {"world", "raise it: sharded inference keeps 1/world of the weights per rank"}}});
});

}  // namespace
}  // namespace sb::infer
