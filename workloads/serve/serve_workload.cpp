// The "serve" task: GPT-2 generation for requests that arrive over time (requests.h), batched
// by a policy (policy.h) on rows of a KV cache (server.h, gpt2_executor.h), or BERT
// classification of such requests (bert_executor.h: padded for static and sequential,
// packed for continuous batching). Records every
// request (TTFT, TPOT, queueing), every step (batch size, KV bytes) and their percentiles.
// world > 1: the model is sharded (full_shard) and rank 0's scheduler drives every rank
// (sharded.h).
#include <ATen/Parallel.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <tuple>

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/data/batches.h"
#include "workloads/infer/infer_config.h"
#include "workloads/infer/served_model.h"
#include "workloads/models/device_config.h"
#include "workloads/models/family.h"
#include "workloads/models/kv_decoder.h"
#include "workloads/prune/prune_keys.h"
#include "workloads/quant/quantizer.h"
#include "workloads/serve/bert_executor.h"
#include "workloads/serve/gpt2_executor.h"
#include "workloads/serve/metrics.h"
#include "workloads/serve/serve_config.h"
#include "workloads/serve/sharded.h"

namespace sb::serve {
namespace {

using I = std::int64_t;
using infer::build_served;
using infer::ServedModel;

ArrivalConfig arrival_config(const Point& p) {
  ArrivalConfig a;
  const ServeKeys& k = config<ServeKeys>(p);
  a.arrival = k.arrival;
  a.request_rate = k.request_rate;
  a.requests = k.requests;
  a.prompt_min = k.prompt_len_min, a.prompt_max = k.prompt_len_max;
  a.output_min = k.output_len_min, a.output_max = k.output_len_max;
  a.trace = k.request_trace;
  a.seed = static_cast<std::uint64_t>(base_config(p).seed);
  return a;
}

// Tokens of one KV row: the longest request's prompt + output that fits the context (longer
// requests are refused); the run and the plan-time check both size rows with it.
I row_tokens(const std::vector<RequestSpec>& requests, I context) {
  I tokens = 1;
  for (const auto& r : requests)
    if (r.prompt_len + r.output_len <= context) tokens = std::max(tokens, r.prompt_len + r.output_len);
  return tokens;
}

// "" when kv_cache_bytes = `budget` holds at least one row, else why not and the fix.
std::string kv_budget_problem(I budget, I row_tokens, I per_token) {
  if (budget >= row_tokens * per_token) return "";
  return fmt::format("kv_cache_bytes {} holds no KV row of {} tokens ({} bytes each: the longest "
                     "request's prompt + output at {} bytes per token); raise kv_cache_bytes to at "
                     "least {} or shorten the requests (prompt_len_max, output_len_max)",
                     budget, row_tokens, row_tokens * per_token, per_token, row_tokens * per_token);
}

class ServeWorkload final : public sb::Workload {
 public:
  void run(RunContext& ctx) override {
    sb::set_phase("build");  // phases and steps: what an out-of-memory message names
    build(ctx);
    make_executor(ctx);
    sb::heartbeat::set_phase("serve");
    auto on_step = [&](I step) {
      sb::heartbeat::set_step(step);
      sb::fault_set_step(step);
      sb::set_phase_step(step);
      sb::set_phase("step");
      sb::fault_point("step");  // tests/failure/failure_paths.sh serve-kill
      if (ctx.stop_agreed()) throw sb::Stopped(ctx.stop.reason);
    };
    if (ctx.rank != 0) {  // rank 0's calls: the warm-up's, then the run's
      follow(*executor_, ctx.world, {});
      start_ep_trace(ctx);
      follow(*executor_, ctx.world, on_step);
      record_ep_layers(ctx);
      return;
    }
    Executor* ex = executor_.get();
    std::optional<Leader> leader;
    if (ctx.size > 1) ex = &leader.emplace(*executor_, ctx.world);
    warm_up(*ex, base_config(ctx.point).warmup);
    if (leader) leader->finish();
    start_ep_trace(ctx);
    ServerConfig sc;
    sc.context = m_.served->config().max_pos;
    sc.eos_token = config<ServeKeys>(ctx.point).eos_token;
    auto result = run_server(requests_, *policy_, *ex, sc, [&](I step) {
      if (leader) leader->begin_step(step);
      on_step(step);
    });
    if (leader) leader->finish();
    sb::heartbeat::set_phase("record results");
    record_ep_layers(ctx);
    record(ctx, result);
  }

 private:
  void build(RunContext& ctx);
  void make_executor(RunContext& ctx);
  void warm_up(Executor& ex, I steps);
  void record(RunContext& ctx, const ServeResult& r);
  // Serving under mesh.ep (models/ep_inference.h serve_expert_parallel): after the warm-up,
  // the ep collectives into the comm table and the per-layer counts restarted; after the
  // run, the per-layer series (every rank: collective).
  void start_ep_trace(RunContext& ctx);
  void record_ep_layers(RunContext& ctx);
  models::EpInferer* ep_ = nullptr;
  std::vector<I> prompt(I request) const;

  ServedModel m_;
  // The family's record decides: a family that generates runs on a KV cache (Gpt2Executor);
  // one that classifies answers each request with a label (BertExecutor).
  bool generates_ = false;
  models::KvDecoder* decoder_ = nullptr;  // m_.served's, when generates_
  std::optional<c10::InferenceMode> inference_;
  std::unique_ptr<data::BatchSource> prompts_;
  std::vector<RequestSpec> requests_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Executor> executor_;
};

void ServeWorkload::build(RunContext& ctx) {
  const Point& p = ctx.point;
  at::set_num_threads(threads_per_rank(base_config(p).threads, ctx.world));
  build_served(m_, ctx, inference_, config<ModelKeys>(p).batch);
  m_.weights.clear();  // serving keeps only the served copy (or the engine's shards)
  generates_ = models::family(m_.served->config().family).generates;
  if (generates_) {  // the decoder the KV-cache executor drives
    decoder_ = m_.served->kv_decoder();
    SB_CHECK(decoder_, "family {} generates but its model has no KV-cache decoder "
             "(models/kv_decoder.h)", m_.served->config().family);
  }
  if (m_.ep_form) {
    ep_ = dynamic_cast<models::EpInferer*>(m_.served.get());
    SB_CHECK(ep_, "model {}: mesh.ep > 1 but it does not infer under expert parallelism", m_.served->config().preset);
    ep_->serve_expert_parallel(*m_.ep_form);
  }
  requests_ = draw_requests(arrival_config(p));
  if (!generates_)  // classification: one result per request, at the end of its prefill
    for (auto& r : requests_) r.output_len = 1;
  I longest = 1;
  for (const auto& r : requests_) longest = std::max(longest, r.prompt_len);
  // Prompts: held-out rows of the Markov chain `train` uses for this seed, one per request
  // (BERT's rows are at least half their length: twice the longest prompt covers every prompt).
  const auto seed = static_cast<std::uint64_t>(base_config(p).seed);
  prompts_ = data::markov_source(m_.served->config(), 1, generates_ ? longest : std::max<I>(4, 2 * longest), seed, seed);
  PolicyConfig pc;
  const ServeKeys& k = config<ServeKeys>(p);
  pc.max_batch = config<ModelKeys>(p).batch;
  pc.max_queue_delay_s = k.max_queue_delay_ms / 1e3;
  pc.max_prefill_tokens = k.max_prefill_tokens;
  policy_ = make_policy(k.serve_policy, pc);
}

// Request r's prompt; warm-up uses negative ids (-1 - r: request r's prompt, never sampled).
std::vector<I> ServeWorkload::prompt(I request) const {
  const I r = request < 0 ? -1 - request : request;
  const I len = requests_.at(r).prompt_len;
  auto row = prompts_->heldout(r);
  auto ids = row.input_ids[0];
  if (!generates_) ids = torch::where(row.targets[0] != -100, row.targets[0], ids);  // BERT: unmasked text
  ids = ids.narrow(0, 0, len).contiguous();
  std::vector<I> out(ids.data_ptr<I>(), ids.data_ptr<I>() + len);
  if (!generates_ && len >= 2) out.back() = data::MlmConfig{}.sep_id;  // [CLS] text [SEP]
  return out;
}

// KV rows: `batch` (sequential: 1), each for the longest request that fits the context, and
// as many as kv_cache_bytes holds when it is set.
void ServeWorkload::make_executor(RunContext& ctx) {
  const Point& p = ctx.point;
  const I capacity = row_tokens(requests_, m_.served->config().max_pos);
  const ServeKeys& k = config<ServeKeys>(p);
  I rows = config<ModelKeys>(p).batch;
  if (const I most = policy_->max_running(); most > 0) rows = std::min(rows, most);
  RunForward run = [this](const std::function<torch::Tensor(models::ParamProvider&)>& f) {
    return m_.run(f);
  };
  PromptOf prompt = [this](I r) { return this->prompt(r); };
  if (!generates_) {  // packing joins requests of different lengths; a static batch pads them
    executor_ = std::make_unique<BertExecutor>(*m_.served, run, prompt, rows,
                                               !policy_->batch_runs_to_completion() && rows > 1);
    return;
  }
  const I per_token = kv_bytes_per_token(m_.served->config(), m_.engine ? torch::kFloat : m_.compute);
  if (const I budget = k.kv_cache_bytes; budget > 0) {
    const std::string small = kv_budget_problem(budget, capacity, per_token);
    SB_REQUIRE(small.empty(), "{}: {}", p.key_at("kv_cache_bytes"), small);
    rows = std::min(rows, budget / (capacity * per_token));
  }
  SamplingConfig s;
  s.temperature = k.temperature;
  s.top_k = k.top_k;
  s.seed = static_cast<std::uint64_t>(base_config(p).seed);
  executor_ = std::make_unique<Gpt2Executor>(*decoder_, run, prompt, rows, capacity, s);
  SB_CHECK(executor_->kv_bytes_per_token() == per_token, "serve: KV bytes per token {} != {}",
           executor_->kv_bytes_per_token(), per_token);
}

// `steps` (the warmup key) decode steps of a full batch of request 0's prompt (greedy, ids < 0),
// through the executor the run uses (rank 0's leader when sharded); excluded from every figure.
void ServeWorkload::warm_up(Executor& ex, I steps) {
  const auto& r0 = requests_.front();
  if (r0.prompt_len + r0.output_len > ex.row_capacity()) return;  // refused anyway
  steps = std::min<I>(steps, r0.output_len - 1);
  std::vector<I> ids(ex.rows(), -1), lengths(ex.rows(), r0.prompt_len);
  auto last = ex.prefill(0, ids);
  for (I s = 0; s < steps; ++s) {
    last = ex.decode(ids, last, lengths);
    for (auto& l : lengths) ++l;
  }
}

void ServeWorkload::record(RunContext& ctx, const ServeResult& r) {
  const Point& p = ctx.point;
  Slo slo{config<ServeKeys>(p).slo_ttft_ms / 1e3, config<ServeKeys>(p).slo_tpot_ms / 1e3};
  auto& rec = ctx.recorder;
  const auto rows = request_records(requests_, r, slo);
  for (const auto& row : rows) rec.add(row);
  for (const auto& s : r.steps) rec.add(step_record(s));
  for (const auto& [k, v] : summarize(requests_, r, rows)) rec.scalar(k, v);
  for (double gap : inter_token_gaps(r)) rec.series("itl_s", gap);
  const auto& ex = *executor_;
  rec.scalar("kv_cache_bytes", static_cast<double>(ex.cache_bytes()));
  rec.scalar("kv_cache_rows", static_cast<double>(ex.rows()));
  rec.scalar("kv_row_tokens", static_cast<double>(ex.row_capacity()));
  rec.scalar("kv_bytes_per_token", static_cast<double>(ex.kv_bytes_per_token()));
  m_.record(rec, p, ctx.rank);
  rec.text("serve_policy", policy_->name());
  if (const std::string b = ex.prefill_batching(); !b.empty()) rec.text("prefill_batching", b);
  rec.text("clock", "virtual: arrivals from the request list, steps advance it by their measured "
                    "wall time, idle time skipped (docs/METRICS.md, Serving)");
}

void ServeWorkload::start_ep_trace(RunContext& ctx) {
  if (!ep_) return;
  ep_->take_ep_serve_stats(nullptr);
  m_.comm->set_trace_hook([&ctx](const sb::CommEvent& e) { ctx.recorder.comm(e); }, MPI_Wtime());
}

void ServeWorkload::record_ep_layers(RunContext& ctx) {
  if (!ep_) return;
  m_.comm->set_trace_hook(nullptr, 0);
  I steps = 0;
  const auto sum = ep_->take_ep_serve_stats(&steps);
  infer::record_ep_layers(ctx.recorder, ctx.world, sum, steps, "ep_steps");
}

// Whether the point sets `key` to anything but its registered default.
bool set_off_default(const Point& p, const char* key) {
  const KeySpec* ks = find_key(key);
  return ks && p.has(key) && p.get(key) != ks->default_value;
}

// Classification requests return one label at the end of their prefill: the generation keys
// do nothing (warnings: a suite may vary model across families with one set of keys).
void validate_classifier(const ServeKeys& k, const Point& p, const models::ModelConfig& m,
                         std::vector<Diagnostic>& out) {
  if (k.arrival != "trace" && k.prompt_len_max > m.max_pos)
    out.push_back({"prompt_len_max", fmt::format("prompt_len_max {} exceeds model {}'s {} positions: "
                                                 "longer requests will be refused (and counted)",
                                                 k.prompt_len_max, m.preset, m.max_pos), true});
  for (const char* key : {"output_len_min", "output_len_max", "temperature", "top_k", "eos_token",
                          "kv_cache_bytes"})
    if (set_off_default(p, key))
      out.push_back({key, fmt::format("{} is ignored for BERT requests (model {} classifies: one "
                                      "label each, no generation, no KV cache); set it only on "
                                      "points of a model that generates", key, m.preset),
                     true});
}

// The dtype the KV cache takes, as the run picks it (make_executor): fp32 when sharded, else
// the served forward's (quant_compute) on the host; nullopt on a GPU, judged where it runs.
std::optional<torch::ScalarType> planned_kv_dtype(const Point& p) {
  if (base_config(p).world > 1) return torch::kFloat;
  const KeySpec* dev = find_key("device");
  if (dev && Value(config<models::DeviceConfig>(p).device) != dev->default_value)
    return std::nullopt;  // default: the host
  return quant::compute_dtype(config<InferChoice>(p).quantization, config<infer::WeightsKeys>(p).quant_compute,
                              torch::Device(torch::kCPU));
}

// kv_cache_bytes against one KV row of the requests the run will draw (the same draw), for a
// generating model. Pruning may narrow the attention (heads): then only the run can tell.
void validate_kv_budget(const Point& p, const models::ModelConfig& m, std::vector<Diagnostic>& out) {
  const I budget = config<ServeKeys>(p).kv_cache_bytes;
  if (budget <= 0 || config<prune::PruneKeys>(p).method != "none") return;
  const ArrivalConfig a = arrival_config(p);
  if (a.arrival == "trace" ? !std::filesystem::exists(a.trace) : a.requests > (I{1} << 20))
    return;  // a trace not written yet; or a draw too large to repeat at plan time
  std::optional<torch::ScalarType> dtype;
  std::vector<RequestSpec> requests;
  try {
    dtype = planned_kv_dtype(p);
    requests = draw_requests(a);
  } catch (const sb::Error&) {
    return;  // the keys' own checks say what is wrong (a bad trace: validate's)
  }
  if (!dtype) return;
  const std::string small =
      kv_budget_problem(budget, row_tokens(requests, m.max_pos), kv_bytes_per_token(m, *dtype));
  if (!small.empty()) out.push_back({"kv_cache_bytes", small});
}

void validate(const ServeKeys& k, const Point& p, std::vector<Diagnostic>& out) {
  try {
    const auto m = models::preset_config(config<ModelKeys>(p).model);
    const models::Family& fam = models::family(m.family);
    if (!fam.generates && fam.classifies) {
      validate_classifier(k, p, m, out);
    } else if (!fam.generates) {
      out.push_back({"model", fmt::format("serve runs a model that generates (GPT-2) or classifies "
                                          "(BERT); model {} is a {} model, which does neither",
                                          m.preset, m.family)});
    } else {
      validate_kv_budget(p, m, out);
      if (k.arrival != "trace" && k.prompt_len_max + k.output_len_max > m.max_pos)
        out.push_back({"prompt_len_max",
                       fmt::format("prompt_len_max {} + output_len_max {} exceeds model {}'s {} "
                                   "positions: requests longer than that will be refused (and counted)",
                                   k.prompt_len_max, k.output_len_max, m.preset,
                                   m.max_pos), true});
    }
  } catch (const sb::Error&) {
    // an unknown model is reported by the name check
  }
  for (const auto& [name, lo, hi] : {std::tuple{"prompt_len", k.prompt_len_min, k.prompt_len_max},
                                     std::tuple{"output_len", k.output_len_min, k.output_len_max}}) {
    const std::string lo_key = std::string(name) + "_min", hi_key = std::string(name) + "_max";
    if (lo > hi)
      out.push_back({lo_key, fmt::format("{} {} is above {} {}: lengths are drawn uniformly from "
                                         "[{}, {}] (equal for a fixed length)", lo_key, lo, hi_key,
                                         hi, lo_key, hi_key)});
  }
  const std::string& arrival = k.arrival;
  const std::string& trace = k.request_trace;
  if (arrival == "poisson" && !(k.request_rate > 0))
    out.push_back({"request_rate", "poisson arrivals need request_rate > 0 (requests per second)"});
  if (arrival == "trace" && trace.empty())
    out.push_back({"request_trace", "arrival = \"trace\" needs request_trace = a JSONL file of "
                                    "{\"arrival_s\", \"prompt_len\", \"output_len\"} lines"});
  if (arrival == "trace" && !trace.empty() && !std::filesystem::exists(trace)) {
    out.push_back({"request_trace", fmt::format("request_trace '{}' does not exist (yet): the point "
                                                "will fail unless an earlier suite writes it; check "
                                                "the path", trace), true});
  } else if (arrival == "trace" && !trace.empty()) {
    try {  // read as the run reads it: a bad line is named (file:line) before anything runs
      read_request_trace(trace);
    } catch (const sb::Error& e) {
      out.push_back({"request_trace", e.message()});
    }
  }
  if (arrival != "trace" && !trace.empty())
    out.push_back({"request_trace", fmt::format("request_trace is read only with arrival = \"trace\" "
                                                "(arrival is \"{}\")", arrival)});
}

}  // namespace

void ServeKeys::declare(Fields<ServeKeys>& f) {
  constexpr I kLen = I{1} << 20;
  f.tasks({"serve"});
  f.name("serve_policy", &ServeKeys::serve_policy, "serve_policy", "continuous",
         "serve: batching policy (sequential, static, continuous; docs/SERVING.md)");
  register_name("arrival", "poisson", "exponential gaps at request_rate per second");
  register_name("arrival", "offline", "every request at time 0");
  register_name("arrival", "trace", "arrival times and lengths from request_trace (JSONL)");
  f.name("arrival", &ServeKeys::arrival, "arrival", "poisson",
         "serve: how requests arrive: poisson (at request_rate), offline (all at 0) or trace");
  f.add("request_rate", &ServeKeys::request_rate, 4.0,
        "serve: mean Poisson arrival rate, requests per second").range(0.0, 1e9);
  f.add("requests", &ServeKeys::requests, 64, "serve: requests in the run (poisson, offline)")
      .range(1, I{1} << 24);
  f.add("prompt_len_min", &ServeKeys::prompt_len_min, 32,
        "serve: shortest prompt (tokens; uniform on [min, max])").range(1, kLen);
  f.add("prompt_len_max", &ServeKeys::prompt_len_max, 32, "serve: longest prompt (tokens)").range(1, kLen);
  f.add("output_len_min", &ServeKeys::output_len_min, 16,
        "serve: fewest output tokens (uniform on [min, max]; BERT requests return one label)")
      .range(1, kLen);
  f.add("output_len_max", &ServeKeys::output_len_max, 16, "serve: most output tokens").range(1, kLen);
  f.add("request_trace", &ServeKeys::request_trace, std::string(""),
        "serve: arrival = trace: JSONL, one {\"arrival_s\", \"prompt_len\", \"output_len\"} per line");
  f.add("max_queue_delay_ms", &ServeKeys::max_queue_delay_ms, 10.0,
        "serve: static policy: longest wait (from the oldest request's arrival) for a fuller batch")
      .range(0.0, 1e9);
  f.add("max_prefill_tokens", &ServeKeys::max_prefill_tokens, 1024,
        "serve: continuous policy: prompt tokens prefilled per step (at least one request)")
      .range(1, kLen);
  f.add("kv_cache_bytes", &ServeKeys::kv_cache_bytes, 0,
        "serve: bound on the KV cache; rows = min(batch, bytes / row bytes); 0 = batch rows")
      .range(0, I{1} << 50);
  f.add("temperature", &ServeKeys::temperature, 0.0, "serve: 0 = greedy, else sampling temperature")
      .range(0.0, 1e6);
  f.add("top_k", &ServeKeys::top_k, 0, "serve: sample among the top_k tokens (0 = all)").range(0, I{1} << 24);
  f.add("eos_token", &ServeKeys::eos_token, -1,
        "serve: a request ends at this token (-1: at its output length)").range(-1, I{1} << 24);
  f.add("slo_ttft_ms", &ServeKeys::slo_ttft_ms, 1000.0,
        "serve: time-to-first-token objective of the SLO attainment").range(0.0, 1e9);
  f.add("slo_tpot_ms", &ServeKeys::slo_tpot_ms, 200.0,
        "serve: time-per-output-token objective of the SLO attainment").range(0.0, 1e9);
  f.validate(validate);
}
SB_CONFIG_SECTION(ServeKeys);

namespace {

const sb::Registrar registrar([] {
  register_task({"serve", [] { return std::make_unique<ServeWorkload>(); }, [](const Point& p) {
                   const ModelKeys& mk = config<ModelKeys>(p);
                   auto model = models::make_model(mk.model, mk.attention);
                   return static_cast<double>(
                       quant::quantized_model_bytes(config<InferChoice>(p).quantization, model->units()));
                 },
                 {},  // memory terms: the plan's total only
                 {{"batch", "lower it: fewer KV-cache rows"},
                  {"kv_cache_bytes", "set it: a bound on the KV cache (0 = batch rows)"},
                  {"quantization", "int8 or bf16 weights take 1/4 or 1/2 of fp32's"}}});
});

}  // namespace
}  // namespace sb::serve
