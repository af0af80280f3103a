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

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"
#include "workloads/data/batches.h"
#include "workloads/infer/served_model.h"
#include "workloads/models/device_config.h"
#include "workloads/models/family.h"
#include "workloads/models/gpt2.h"
#include "workloads/quant/quantizer.h"
#include "workloads/serve/bert_executor.h"
#include "workloads/serve/gpt2_executor.h"
#include "workloads/serve/metrics.h"
#include "workloads/serve/sharded.h"

namespace sb::serve {
namespace {

using I = std::int64_t;
using infer::build_served;
using infer::ServedModel;

bool is_serve(const Point& p) { return p.has("task") && p.get_string("task") == "serve"; }

ArrivalConfig arrival_config(const Point& p) {
  ArrivalConfig a;
  a.arrival = p.get_string("arrival");
  a.request_rate = p.get_double("request_rate");
  a.requests = p.get_int("requests");
  a.prompt_min = p.get_int("prompt_len_min"), a.prompt_max = p.get_int("prompt_len_max");
  a.output_min = p.get_int("output_len_min"), a.output_max = p.get_int("output_len_max");
  a.trace = p.get_string("request_trace");
  a.seed = static_cast<std::uint64_t>(p.get_int("seed"));
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
      follow(*executor_, ctx.world, on_step);
      return;
    }
    Executor* ex = executor_.get();
    std::optional<Leader> leader;
    if (ctx.size > 1) ex = &leader.emplace(*executor_, ctx.world);
    warm_up(*ex, ctx.point.get_int("warmup"));
    if (leader) leader->finish();
    ServerConfig sc;
    sc.context = m_.served->config().max_pos;
    sc.eos_token = ctx.point.get_int("eos_token");
    auto result = run_server(requests_, *policy_, *ex, sc, [&](I step) {
      if (leader) leader->begin_step(step);
      on_step(step);
    });
    if (leader) leader->finish();
    sb::heartbeat::set_phase("record results");
    record(ctx, result);
  }

 private:
  void build(RunContext& ctx);
  void make_executor(RunContext& ctx);
  void warm_up(Executor& ex, I steps);
  void record(RunContext& ctx, const ServeResult& r);
  std::vector<I> prompt(I request) const;

  ServedModel m_;
  // The family's record decides: a family that generates runs on a KV cache (Gpt2Executor);
  // one that classifies answers each request with a label (BertExecutor).
  bool generates_ = false;
  models::Gpt2* gpt2_ = nullptr;  // m_.served, when generates_
  std::optional<c10::InferenceMode> inference_;
  std::unique_ptr<data::BatchSource> prompts_;
  std::vector<RequestSpec> requests_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Executor> executor_;
};

void ServeWorkload::build(RunContext& ctx) {
  const Point& p = ctx.point;
  at::set_num_threads(threads_per_rank(p.get_int("threads"), ctx.world));
  build_served(m_, ctx, inference_, p.get_int("batch"));
  m_.weights.clear();  // serving keeps only the served copy (or the engine's shards)
  generates_ = models::family(m_.served->config().family).generates;
  if (generates_) {  // the decoder the KV-cache executor drives
    gpt2_ = dynamic_cast<models::Gpt2*>(m_.served.get());
    SB_CHECK(gpt2_, "family {} generates but its model is no Gpt2", m_.served->config().family);
  }
  requests_ = draw_requests(arrival_config(p));
  if (!generates_)  // classification: one result per request, at the end of its prefill
    for (auto& r : requests_) r.output_len = 1;
  I longest = 1;
  for (const auto& r : requests_) longest = std::max(longest, r.prompt_len);
  // Prompts: held-out rows of the Markov chain `train` uses for this seed, one per request
  // (BERT's rows are at least half their length: twice the longest prompt covers every prompt).
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  prompts_ = data::markov_source(m_.served->config(), 1, generates_ ? longest : std::max<I>(4, 2 * longest), seed, seed);
  PolicyConfig pc;
  pc.max_batch = p.get_int("batch");
  pc.max_queue_delay_s = p.get_double("max_queue_delay_ms") / 1e3;
  pc.max_prefill_tokens = p.get_int("max_prefill_tokens");
  policy_ = make_policy(p.get_string("serve_policy"), pc);
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
  I rows = p.get_int("batch");
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
  if (const I budget = p.get_int("kv_cache_bytes"); budget > 0) {
    const std::string small = kv_budget_problem(budget, capacity, per_token);
    SB_REQUIRE(small.empty(), "{}: {}", p.key_at("kv_cache_bytes"), small);
    rows = std::min(rows, budget / (capacity * per_token));
  }
  SamplingConfig s;
  s.temperature = p.get_double("temperature");
  s.top_k = p.get_int("top_k");
  s.seed = static_cast<std::uint64_t>(p.get_int("seed"));
  executor_ = std::make_unique<Gpt2Executor>(*gpt2_, run, prompt, rows, capacity, s);
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
  Slo slo{p.get_double("slo_ttft_ms") / 1e3, p.get_double("slo_tpot_ms") / 1e3};
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

// Whether the point sets `key` to anything but its registered default.
bool set_off_default(const Point& p, const char* key) {
  const KeySpec* ks = find_key(key);
  return ks && p.has(key) && p.get(key) != ks->default_value;
}

// Classification requests return one label at the end of their prefill: the generation keys
// do nothing (warnings: a suite may vary model across families with one set of keys).
void validate_classifier(const Point& p, const models::ModelConfig& m, std::vector<Diagnostic>& out) {
  if (p.get_string("arrival") != "trace" && p.get_int("prompt_len_max") > m.max_pos)
    out.push_back({"prompt_len_max", fmt::format("prompt_len_max {} exceeds model {}'s {} positions: "
                                                 "longer requests will be refused (and counted)",
                                                 p.get_int("prompt_len_max"), m.preset, m.max_pos), true});
  for (const char* k : {"output_len_min", "output_len_max", "temperature", "top_k", "eos_token",
                        "kv_cache_bytes"})
    if (set_off_default(p, k))
      out.push_back({k, fmt::format("{} is ignored for BERT requests (model {} classifies: one "
                                    "label each, no generation, no KV cache); set it only on "
                                    "points of a model that generates", k, m.preset),
                     true});
}

// The dtype the KV cache takes, as the run picks it (make_executor): fp32 when sharded, else
// the served forward's (quant_compute) on the host; nullopt on a GPU, judged where it runs.
std::optional<torch::ScalarType> planned_kv_dtype(const Point& p) {
  if (p.get_int("world") > 1) return torch::kFloat;
  const KeySpec* dev = find_key("device");
  if (dev && Value(config<models::DeviceConfig>(p).device) != dev->default_value)
    return std::nullopt;  // default: the host
  return quant::compute_dtype(p.get_string("quantization"), p.get_string("quant_compute"),
                              torch::Device(torch::kCPU));
}

// kv_cache_bytes against one KV row of the requests the run will draw (the same draw), for a
// generating model. Pruning may narrow the attention (heads): then only the run can tell.
void validate_kv_budget(const Point& p, const models::ModelConfig& m, std::vector<Diagnostic>& out) {
  const I budget = p.get_int("kv_cache_bytes");
  if (budget <= 0 || set_off_default(p, "pruning")) return;
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

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (!is_serve(p)) return;
  try {
    const auto m = models::preset_config(p.get_string("model"));
    const models::Family& fam = models::family(m.family);
    if (!fam.generates && fam.classifies) {
      validate_classifier(p, m, out);
    } else if (!fam.generates) {
      out.push_back({"model", fmt::format("serve runs a model that generates (GPT-2) or classifies "
                                          "(BERT); model {} is a {} model, which does neither",
                                          m.preset, m.family)});
    } else {
      validate_kv_budget(p, m, out);
      if (p.get_string("arrival") != "trace" &&
          p.get_int("prompt_len_max") + p.get_int("output_len_max") > m.max_pos)
        out.push_back({"prompt_len_max",
                       fmt::format("prompt_len_max {} + output_len_max {} exceeds model {}'s {} "
                                   "positions: requests longer than that will be refused (and counted)",
                                   p.get_int("prompt_len_max"), p.get_int("output_len_max"), m.preset,
                                   m.max_pos), true});
    }
  } catch (const sb::Error&) {
    // an unknown model is reported by the name check
  }
  for (const char* k : {"prompt_len", "output_len"}) {
    const std::string lo = std::string(k) + "_min", hi = std::string(k) + "_max";
    if (p.get_int(lo) > p.get_int(hi))
      out.push_back({lo, fmt::format("{} {} is above {} {}: lengths are drawn uniformly from "
                                     "[{}, {}] (equal for a fixed length)", lo, p.get_int(lo), hi,
                                     p.get_int(hi), lo, hi)});
  }
  const std::string arrival = p.get_string("arrival"), trace = p.get_string("request_trace");
  if (arrival == "poisson" && !(p.get_double("request_rate") > 0))
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

void key(KeySpec ks) {
  ks.tasks = {"serve"};
  register_key(std::move(ks));
}
KeySpec integer(const char* k, I def, I lo, I hi, const char* doc) {
  KeySpec ks{k, KeyType::Int, def, "", doc};
  ks.min_int = lo, ks.max_int = hi;
  return ks;
}
KeySpec real(const char* k, double def, double lo, double hi, const char* doc) {
  KeySpec ks{k, KeyType::Float, def, "", doc};
  ks.min_float = lo, ks.max_float = hi;
  return ks;
}

const sb::Registrar registrar([] {
  constexpr I kLen = I{1} << 20;
  key({"serve_policy", KeyType::Name, std::string("continuous"), "serve_policy",
       "serve: batching policy (sequential, static, continuous; docs/SERVING.md)"});
  register_name("arrival", "poisson", "exponential gaps at request_rate per second");
  register_name("arrival", "offline", "every request at time 0");
  register_name("arrival", "trace", "arrival times and lengths from request_trace (JSONL)");
  key({"arrival", KeyType::Name, std::string("poisson"), "arrival",
       "serve: how requests arrive: poisson (at request_rate), offline (all at 0) or trace"});
  key(real("request_rate", 4.0, 0.0, 1e9, "serve: mean Poisson arrival rate, requests per second"));
  key(integer("requests", 64, 1, I{1} << 24, "serve: requests in the run (poisson, offline)"));
  key(integer("prompt_len_min", 32, 1, kLen, "serve: shortest prompt (tokens; uniform on [min, max])"));
  key(integer("prompt_len_max", 32, 1, kLen, "serve: longest prompt (tokens)"));
  key(integer("output_len_min", 16, 1, kLen, "serve: fewest output tokens (uniform on [min, max]; BERT requests return one label)"));
  key(integer("output_len_max", 16, 1, kLen, "serve: most output tokens"));
  key({"request_trace", KeyType::String, std::string(""), "",
       "serve: arrival = trace: JSONL, one {\"arrival_s\", \"prompt_len\", \"output_len\"} per line"});
  key(real("max_queue_delay_ms", 10.0, 0.0, 1e9,
           "serve: static policy: longest wait (from the oldest request's arrival) for a fuller batch"));
  key(integer("max_prefill_tokens", 1024, 1, kLen,
              "serve: continuous policy: prompt tokens prefilled per step (at least one request)"));
  key(integer("kv_cache_bytes", 0, 0, I{1} << 50,
              "serve: bound on the KV cache; rows = min(batch, bytes / row bytes); 0 = batch rows"));
  key(real("temperature", 0.0, 0.0, 1e6, "serve: 0 = greedy, else sampling temperature"));
  key(integer("top_k", 0, 0, I{1} << 24, "serve: sample among the top_k tokens (0 = all)"));
  key(integer("eos_token", -1, -1, I{1} << 24, "serve: a request ends at this token (-1: at its output length)"));
  key(real("slo_ttft_ms", 1000.0, 0.0, 1e9, "serve: time-to-first-token objective of the SLO attainment"));
  key(real("slo_tpot_ms", 200.0, 0.0, 1e9, "serve: time-per-output-token objective of the SLO attainment"));
  register_validator(validate);
  register_task({"serve", [] { return std::make_unique<ServeWorkload>(); }, [](const Point& p) {
                   auto model = models::make_model(p.get_string("model"), p.get_string("attention"));
                   return static_cast<double>(
                       quant::quantized_model_bytes(p.get_string("quantization"), model->units()));
                 },
                 {},  // memory terms: the plan's total only
                 {{"batch", "lower it: fewer KV-cache rows"},
                  {"kv_cache_bytes", "set it: a bound on the KV cache (0 = batch rows)"},
                  {"quantization", "int8 or bf16 weights take 1/4 or 1/2 of fp32's"}}});
});

}  // namespace
}  // namespace sb::serve
