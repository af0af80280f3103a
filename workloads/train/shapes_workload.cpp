// The "shapes" task: the model-shape advisor's measurements as an ordinary point (the Codesign
// issue; docs/MODELS.md "Shapes"). For `model` (a dense GPT-2-family preset or folder) and its
// neighbouring shapes within shapes.tolerance of its parameter count (shapes.h), every distinct
// kernel of one training step (shapes.pass = "train") or inference pass ("infer": forward
// only) at batch x seq in `dtype` is timed on this machine with `threads` threads: a GEMM as
// torch::mm / bmm on operands laid out as the model holds them, every other kernel as the
// operator the model runs (shapes.h's VectorKernel; in a training step the LM head's GEMMs
// inside its fused loss); each the median over 7 rounds of one call of every kernel in turn
// after an untimed one, after half a second of warm-up. A shape's predicted step time is the
// sum over its kernels of count x scale x seconds. Timings of the same kernel on the same CPU
// model and ISA, dtype and threads are taken from earlier shapes points under shapes.reuse
// instead of timed again.
//
// Recorded (docs/METRICS.md "Model shapes"): per shape, best first after the model itself,
// the series shape_d_model, shape_heads, shape_head_size, shape_d_ff, shape_vocab,
// shape_params, shape_gemm_s, shape_other_s, shape_step_s, shape_gain_pct; scalars
// predicted_step_s, predicted_gemm_s, best_gain_pct, kernels_timed, kernels_reused; texts
// shapes_table (the ranked table `shardbench shapes` prints), least_efficient_gemms (the
// model's four lowest GFLOP/s of its block GEMMs), best_config (the best neighbour's
// config.json fields, JSON), kernel_timings (JSON: kernel -> seconds, what a later point
// reuses), shapes_machine (CPU model and ISA flags the timings hold for).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "harness/core/progress.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/trace/recorder.h"
#include "harness/trace/result.h"
#include "harness/workload.h"
#include "workloads/models/dtype.h"
#include "workloads/models/loss.h"
#include "workloads/models/model.h"
#include "workloads/models/shapes.h"
#include "workloads/optim/adamw.h"

namespace sb::train {
using namespace sb::models;

struct ShapesKeys {
  double tolerance = 0;
  std::string reuse, pass;
  static void declare(Fields<ShapesKeys>& f);
};

namespace {

// One call of a kernel on inputs made when the call was made (the closure owns them).
using Call = std::function<void()>;

// Inputs: uniform in [-1, 1) (a kernel's speed does not depend on the values; uniform draws
// cost a fraction of normal ones, and inputs are made once per kernel and round).
torch::Tensor filled(std::vector<std::int64_t> shape, const torch::TensorOptions& o = {}) {
  return torch::empty(shape, o).uniform_(-1, 1);
}

std::string gemm_key(const Gemm& g) {
  return fmt::format("gemm|{}|{}|{}|{}|{}{}", g.batch, g.m, g.k, g.n, g.a_t ? 't' : 'n', g.b_t ? 't' : 'n');
}

Call gemm_call(const Gemm& g, torch::ScalarType dt) {
  const auto o = torch::TensorOptions().dtype(dt);
  // Each operand stored as the model stores it, and viewed as (m x k) by (k x n).
  const auto a = g.a_t ? filled({g.batch, g.k, g.m}, o).transpose(1, 2) : filled({g.batch, g.m, g.k}, o);
  const auto b = g.b_t ? filled({g.batch, g.n, g.k}, o).transpose(1, 2) : filled({g.batch, g.k, g.n}, o);
  const bool one = g.batch == 1;
  return [a, b, one] { one ? torch::mm(a[0], b[0]) : torch::bmm(a, b); };
}

// Half a second of the model's first GEMM before anything is timed: the first kernels of a
// process otherwise measure the thread pool waking, page faults and the clock ramping (the
// first GEMMs timed ran at half the speed of the same shape timed later).
void warm_up(const Gemm& g, torch::ScalarType dt) {
  const Call c = gemm_call(g, dt);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.5) c();
}

// Forward and backward of y = f(inputs) against a random output gradient (drawn once: its
// random numbers cost as much as a layer norm).
Call fwd_bwd(std::vector<torch::Tensor> inputs, std::function<torch::Tensor()> f) {
  torch::AutoGradMode on(true);
  const auto g = torch::empty_like(f().detach()).uniform_(-1, 1);
  return [inputs, f, g] {
    torch::AutoGradMode on(true);
    torch::autograd::grad({f()}, inputs, {g});
  };
}

// y = f(inputs) forward and backward, or forward alone (an inference pass's kernel).
Call op_call(std::vector<torch::Tensor> inputs, std::function<torch::Tensor()> f, bool backward) {
  if (backward) return fwd_bwd(std::move(inputs), std::move(f));
  return [f] {
    torch::NoGradGuard none;
    f();
  };
}

Call vector_call(const VectorKernel& k, torch::ScalarType dt) {
  const auto o = torch::TensorOptions().dtype(dt);
  const auto leaf = [&](std::vector<std::int64_t> shape) { return filled(shape, o).requires_grad_(k.backward); };
  const std::int64_t R = k.rows, W = k.width;
  if (k.op == "add") {
    const auto a = filled({R, W}, o), b = filled({R, W}, o);
    return [a, b] { a + b; };
  }
  if (k.op == "sum_rows") {
    const auto x = filled({R, W}, o);
    return [x] { x.sum(0); };
  }
  if (k.op == "norm") {
    const auto x = filled({W}, o);
    return [x] { x.to(torch::kFloat32).pow(2).sum(); };
  }
  if (k.op == "cast") {
    const auto w = filled({W}), g = filled({W}, o);
    return [w, g, dt] { w.to(dt), g.to(torch::kFloat32); };
  }
  if (k.op == "adamw") {
    auto state = std::make_shared<std::vector<torch::Tensor>>(
        std::vector<torch::Tensor>{filled({W}), torch::zeros({W}), torch::zeros({W}), filled({W}, o)});
    return [state] {
      auto& t = *state;
      optim::AdamWConfig c;
      optim::adamw_update(t[0], t[3], t[1], t[2], 1, c.lr, c, torch::Tensor());
    };
  }
  if (k.op == "layernorm") {
    const auto x = leaf({R, W}), w = leaf({W}), b = leaf({W});
    return op_call({x, w, b}, [x, w, b, W] { return at::layer_norm(x, {W}, w, b, 1e-5); }, k.backward);
  }
  if (k.op == "gelu") {
    const auto x = leaf({R, W});
    return op_call({x}, [x] { return at::gelu(x, "tanh"); }, k.backward);
  }
  if (k.op == "softmax_causal") {  // naive attention: the mask is in its baddbmm's bias
    const auto s = leaf({k.batch, R, R});
    return op_call({s}, [s] { return torch::softmax(s, -1); }, k.backward);
  }
  if (k.op == "sdpa") {
    const auto q = leaf({k.batch, k.heads, R, W}), kk = leaf({k.batch, k.heads, R, W}), v = leaf({k.batch, k.heads, R, W});
    return op_call({q, kk, v}, [q, kk, v] { return at::scaled_dot_product_attention(q, kk, v, {}, 0.0, true); },
                   k.backward);
  }
  if (k.op == "lm_head") {  // the model's own operator: GEMMs and fp32 loss in row chunks
    const auto x = leaf({R, W}), w = leaf({k.classes, W});
    const auto t = torch::randint(k.classes, {R}, torch::kLong);
    return fwd_bwd({x, w}, [x, w, t] { return linear_cross_entropy(x, w, t); });
  }
  SB_CHECK(false, "shapes: no timing for kernel op '{}'", k.op);
  return {};
}

// Each kernel's seconds: the median over `rounds` rounds, each round one timed call of every
// kernel in turn (after an untimed one on the same inputs: packing, first touch, autograd's
// allocations). Interleaved, so that this machine's drift over minutes moves every kernel's
// timings alike instead of favouring the shapes timed in a quiet minute; inputs are made per
// call, so memory holds one kernel's at a time.
std::map<std::string, double> time_interleaved(const std::vector<std::pair<std::string, std::function<Call()>>>& kernels,
                                               int rounds, Progress& progress) {
  std::map<std::string, std::vector<double>> t;
  progress.begin(fmt::format("{} kernels x {} rounds", kernels.size(), rounds), rounds);
  for (int r = 0; r < rounds; ++r) {
    for (const auto& [key, make] : kernels) {
      const Call c = make();
      c();
      const auto t0 = std::chrono::steady_clock::now();
      c();
      t[key].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    progress.step(r + 1, fmt::format("round {}", r + 1));
  }
  progress.end();
  std::map<std::string, double> out;
  for (auto& [key, v] : t) {
    std::sort(v.begin(), v.end());
    out[key] = v[v.size() / 2];
  }
  return out;
}

std::string machine_text() {
  const MachineInfo m = machine_now(host_name());
  return fmt::format("{} ({})", m.cpu_model, fmt::join(m.isa, " "));
}

// kernel -> seconds from the done shapes points under `dir` (its points/ and its subfolders'
// points/) timed on this machine's CPU and ISA, in `dtype` with `threads`.
std::map<std::string, double> reusable(const std::string& dir, const std::string& dtype, int threads,
                                       const std::string& machine) {
  std::map<std::string, double> out;
  namespace fs = std::filesystem;
  if (dir.empty() || !fs::is_directory(dir)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied))
    if (e.is_regular_file() && e.path().extension() == ".h5" && e.path().parent_path().filename() == "points")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    try {
      const ResultMeta m = read_result_meta(f.string());
      const auto cfg = nlohmann::json::parse(m.config);
      if (m.status != "done" || cfg.value("task", "") != "shapes" || cfg.value("dtype", "") != dtype ||
          m.threads_per_rank != threads)
        continue;
      const Recorder r = read_result_records(f.string());
      const auto& texts = r.texts();
      const auto mt = texts.find("shapes_machine"), kt = texts.find("kernel_timings");
      if (mt == texts.end() || kt == texts.end() || mt->second != machine) continue;
      const auto j = nlohmann::json::parse(kt->second);
      for (auto it = j.begin(); it != j.end(); ++it) out.emplace(it.key(), it.value().get<double>());
    } catch (const std::exception&) {
      continue;  // not a readable result of this schema: timed again instead
    }
  }
  return out;
}

struct Shape {
  const ShapeCandidate* c;
  double gemm_s = 0, other_s = 0;
  double step_s() const { return gemm_s + other_s; }
};

std::string table(const std::vector<Shape>& rows, const std::vector<ShapeCandidate>& cands) {
  std::string s = fmt::format("{:>4} {:>6} {:>6} {:>5} {:>7} {:>7} {:>13} {:>8} {:>9} {:>9} {:>9} {:>7}  {}\n", "rank",
                              "d", "heads", "dh", "d_ff", "vocab", "params", "dparam%", "gemm_s", "other_s",
                              "step_s", "gain%", "change; dimensions that do not tile by 64");
  const double s0 = rows[0].step_s();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& c = rows[i].c->cfg;
    const std::string notes = tiling_notes(c);
    s += fmt::format("{:>4} {:>6} {:>6} {:>5} {:>7} {:>7} {:>13} {:>8.2f} {:>9.4f} {:>9.4f} {:>9.4f} {:>7.1f}  {}{}{}\n", i,
                     c.d_model, c.n_head, c.dh(), c.d_ff, c.vocab, rows[i].c->params,
                     100.0 * static_cast<double>(rows[i].c->params - cands[0].params) / static_cast<double>(cands[0].params),
                     rows[i].gemm_s, rows[i].other_s, rows[i].step_s(), 100.0 * (s0 / rows[i].step_s() - 1.0),
                     rows[i].c->change, notes.empty() ? "" : "; ", notes);
  }
  return s;
}

constexpr int kRounds = 7;

class ShapesWorkload : public Workload {
 public:
  void run(RunContext& ctx) override {
    const Point& p = ctx.point;
    const ShapesKeys& k = config<ShapesKeys>(p);
    const ModelKeys& mk = config<ModelKeys>(p);
    const std::string dtype = config<TrainChoice>(p).dtype;
    const auto dt = dtype_from_name(dtype);
    at::set_num_threads(threads_per_rank(base_config(p).threads, ctx.world));
    const int threads = at::get_num_threads();
    const bool naive = mk.attention == "naive", training = k.pass == "train";
    // A training step times the LM head's GEMMs inside its fused loss; an inference pass has
    // no gradients, and its logits are the head's forward GEMM.
    const auto timed_gemm = [training](const Gemm& g) { return training ? !g.lm_head : !g.backward; };
    const ModelConfig base = preset_config(mk.model);
    const auto cands = neighbour_shapes(base, k.tolerance);
    const std::string machine = machine_text();
    const std::map<std::string, double> earlier = reusable(k.reuse, dtype, threads, machine);
    // Each shape's kernels once: (key, count x scale, a GEMM?, how to make a call of it).
    struct Term {
      std::string key;
      double weight;
      bool gemm;
      std::function<Call()> make;
    };
    std::vector<std::vector<Term>> terms(cands.size());
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const auto& c = cands[i];
      for (const auto& g : step_gemms(c.cfg, mk.batch, mk.seq, naive))
        if (timed_gemm(g))
          terms[i].push_back({gemm_key(g), static_cast<double>(g.count), true, [g, dt] { return gemm_call(g, dt); }});
      for (const auto& v : step_vector_kernels(c.cfg, mk.batch, mk.seq, c.params, naive, dt != torch::kFloat32, training))
        terms[i].push_back({v.key(), static_cast<double>(v.count) * v.scale, false,
                            [v, dt] { return vector_call(v, dt); }});
    }
    // Every distinct kernel, in first-use order: taken from `earlier`, or timed.
    std::map<std::string, double> used;  // this point's kernels: what a later point reuses
    std::vector<std::pair<std::string, std::function<Call()>>> to_time;
    std::set<std::string> seen;
    std::int64_t reused = 0;
    for (const auto& shape : terms)
      for (const auto& t : shape) {
        if (!seen.insert(t.key).second) continue;
        const auto it = earlier.find(t.key);
        if (it != earlier.end()) used[t.key] = it->second, ++reused;
        else to_time.emplace_back(t.key, t.make);
      }
    if (!to_time.empty()) {
      warm_up(step_gemms(base, mk.batch, mk.seq, naive).front(), dt);
      for (const auto& [key, s] : time_interleaved(to_time, kRounds, ctx.progress)) used[key] = s;
    }
    const auto timed = static_cast<std::int64_t>(to_time.size());
    std::vector<Shape> rows;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      Shape s{&cands[i]};
      for (const auto& t : terms[i]) (t.gemm ? s.gemm_s : s.other_s) += t.weight * used.at(t.key);
      rows.push_back(s);
    }
    std::sort(rows.begin() + 1, rows.end(), [](const Shape& a, const Shape& b) { return a.step_s() < b.step_s(); });
    record(ctx, rows, cands, used, timed, reused, machine);
    // Where the model's own GEMM time goes: its least efficient GEMMs.
    auto gemms = step_gemms(base, mk.batch, mk.seq, naive);
    gemms.erase(std::remove_if(gemms.begin(), gemms.end(), [&](const Gemm& g) { return !timed_gemm(g) || g.lm_head; }),
                gemms.end());
    const auto gflops = [&](const Gemm& g) { return g.flops() / used.at(gemm_key(g)) / 1e9; };
    std::sort(gemms.begin(), gemms.end(), [&](const Gemm& a, const Gemm& b) { return gflops(a) < gflops(b); });
    std::string worst;
    for (std::size_t i = 0; i < std::min<std::size_t>(4, gemms.size()); ++i)
      worst += fmt::format("  {:<28} {} x ({} x {}) by ({} x {}): {:.1f}\n", gemms[i].what, gemms[i].batch, gemms[i].m,
                           gemms[i].k, gemms[i].k, gemms[i].n, gflops(gemms[i]));
    ctx.recorder.text("least_efficient_gemms", worst);
  }

 private:
  static void record(RunContext& ctx, const std::vector<Shape>& rows, const std::vector<ShapeCandidate>& cands,
                     const std::map<std::string, double>& used, std::int64_t timed, std::int64_t reused,
                     const std::string& machine) {
    auto& rec = ctx.recorder;
    const double s0 = rows[0].step_s();
    for (const auto& r : rows) {
      const auto& c = r.c->cfg;
      rec.series("shape_d_model", static_cast<double>(c.d_model));
      rec.series("shape_heads", static_cast<double>(c.n_head));
      rec.series("shape_head_size", static_cast<double>(c.dh()));
      rec.series("shape_d_ff", static_cast<double>(c.d_ff));
      rec.series("shape_vocab", static_cast<double>(c.vocab));
      rec.series("shape_params", static_cast<double>(r.c->params));
      rec.series("shape_gemm_s", r.gemm_s);
      rec.series("shape_other_s", r.other_s);
      rec.series("shape_step_s", r.step_s());
      rec.series("shape_gain_pct", 100.0 * (s0 / r.step_s() - 1.0));
    }
    rec.scalar("predicted_step_s", s0);
    rec.scalar("predicted_gemm_s", rows[0].gemm_s);
    rec.scalar("best_gain_pct", rows.size() > 1 ? 100.0 * (s0 / rows[1].step_s() - 1.0) : 0.0);
    rec.scalar("kernels_timed", static_cast<double>(timed));
    rec.scalar("kernels_reused", static_cast<double>(reused));
    rec.text("shapes_table", table(rows, cands));
    rec.text("shapes_machine", machine);
    rec.text("kernel_timings", nlohmann::json(used).dump());
    if (rows.size() > 1) {  // the best neighbour, even when predicted slower (its gain says so)
      const auto& b = rows[1].c->cfg;
      rec.text("best_config", nlohmann::json{{"n_embd", b.d_model}, {"n_head", b.n_head}, {"n_inner", b.d_ff},
                                             {"vocab_size", b.vocab}, {"n_layer", b.n_layer},
                                             {"n_positions", b.max_pos}, {"change", rows[1].c->change}}.dump());
    }
  }
};

void validate(const ShapesKeys& k, const Point& p, std::vector<Diagnostic>& out) {
  if (base_config(p).task != "shapes") return;
  if (base_config(p).world != 1)
    out.push_back({"world", fmt::format("the shapes task times kernels in one process: set world = 1 "
                                        "(threads sets its threads), not {}", base_config(p).world)});
  const std::string& att = config<ModelKeys>(p).attention;
  if (att != "naive" && att != "sdpa")
    out.push_back({"attention", fmt::format("the shapes task models attention as naive's batched products "
                                            "and softmax, or sdpa's fused kernel; set attention = \"naive\" or "
                                            "\"sdpa\", not \"{}\"", att)});
  const std::string& dt = config<TrainChoice>(p).dtype;
  if (dt != "fp32" && dt != "bf16")
    out.push_back({"dtype", fmt::format("the shapes task times fp32 or bf16 kernels; set dtype = \"fp32\" "
                                        "or \"bf16\", not \"{}\"", dt)});
}

}  // namespace

void ShapesKeys::declare(Fields<ShapesKeys>& f) {
  f.tasks({"shapes"});
  f.add("shapes.tolerance", &ShapesKeys::tolerance, 0.02,
        "shapes task: the neighbouring shapes kept are within this relative parameter count of the model's")
      .range(0.0, 0.5);
  f.name("shapes.pass", &ShapesKeys::pass, "shapes_pass", "train",
         "shapes task: what is predicted: a training step (forward, backward, optimizer) or an inference "
         "pass (forward only)");
  f.add("shapes.reuse", &ShapesKeys::reuse, std::string(),
        "shapes task: a results folder whose earlier shapes points' kernel timings (same CPU model and ISA, "
        "dtype, threads) are reused instead of timed again; \"\" = time every kernel")
      .accepts_path();
  f.validate(validate);
}
SB_CONFIG_SECTION(ShapesKeys);

namespace {
const Registrar reg([] {
  register_name("shapes_pass", "train", "a training step: forward and backward of every kernel, the loss, AdamW");
  register_name("shapes_pass", "infer", "an inference pass: every kernel forward only, the logits' GEMM, no loss");
  register_task({"shapes", [] { return std::make_unique<ShapesWorkload>(); }, [](const Point&) { return 0.0; }});
});
}  // namespace

}  // namespace sb::train
