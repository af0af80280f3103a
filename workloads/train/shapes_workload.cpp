// The "shapes" task: the model-shape advisor's measurements as an ordinary point (the Codesign
// issue; docs/MODELS.md "Shapes"). For `model` (a dense GPT-2-family preset or folder) and
// its neighbouring shapes within shapes.tolerance of its parameter count (shapes.h), every
// distinct kernel of one training step at batch x seq in `dtype` is timed on this machine
// with `threads` threads (a GEMM: the median of 3 torch::mm / bmm calls after an untimed one;
// every other kernel as the operator the model runs, forward and backward: shapes.h's
// VectorKernel), and each shape's predicted step time is the sum over its kernels of
// count x seconds. Timings of the same kernel on the same CPU model and ISA, dtype and threads
// are taken from earlier shapes points under shapes.reuse instead of timed again.
//
// Recorded (docs/METRICS.md "Model shapes"): per shape, best first after the model itself,
// the series shape_d_model, shape_heads, shape_head_size, shape_d_ff, shape_vocab,
// shape_params, shape_gemm_s, shape_other_s, shape_step_s, shape_gain_pct; scalars
// predicted_step_s, predicted_gemm_s, best_gain_pct, kernels_timed, kernels_reused; texts
// shapes_table (the ranked table `shardbench shapes` prints), least_efficient_gemms (the
// model's four lowest GFLOP/s), best_config (the best shape's
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
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/trace/recorder.h"
#include "harness/trace/result.h"
#include "harness/workload.h"
#include "workloads/models/dtype.h"
#include "workloads/models/model.h"
#include "workloads/models/shapes.h"
#include "workloads/optim/adamw.h"

namespace sb::train {
using namespace sb::models;

struct ShapesKeys {
  double tolerance = 0;
  std::string reuse;
  static void declare(Fields<ShapesKeys>& f);
};

namespace {

double median_of_3(const std::function<void()>& f) {
  f();  // untimed: packing, first touch, autograd's graph allocations
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

std::string gemm_key(const Gemm& g) { return fmt::format("gemm|{}|{}|{}|{}", g.batch, g.m, g.k, g.n); }

double time_gemm(const Gemm& g, torch::ScalarType dt) {
  const auto o = torch::TensorOptions().dtype(dt);
  const auto a = torch::randn({g.batch, g.m, g.k}, o), b = torch::randn({g.batch, g.k, g.n}, o);
  return median_of_3([&] { g.batch == 1 ? torch::mm(a[0], b[0]) : torch::bmm(a, b); });
}

// Forward and backward of y = f(inputs) against a random output gradient.
double time_fwd_bwd(const std::vector<torch::Tensor>& inputs, const std::function<torch::Tensor()>& f) {
  return median_of_3([&] {
    const auto y = f();
    torch::autograd::grad({y}, inputs, {torch::randn_like(y)});
  });
}

double time_vector(const VectorKernel& k, torch::ScalarType dt) {
  torch::NoGradGuard none;  // re-enabled below where a backward is timed
  const auto o = torch::TensorOptions().dtype(dt);
  const auto leaf = [&](std::vector<std::int64_t> shape) { return torch::randn(shape, o).requires_grad_(); };
  const std::int64_t R = k.rows, W = k.width;
  if (k.op == "add") {
    const auto a = torch::randn({R, W}, o), b = torch::randn({R, W}, o);
    return median_of_3([&] { a + b; });
  }
  if (k.op == "sum_rows") {
    const auto x = torch::randn({R, W}, o);
    return median_of_3([&] { x.sum(0); });
  }
  if (k.op == "norm") {
    const auto x = torch::randn({W}, o);
    return median_of_3([&] { x.to(torch::kFloat32).pow(2).sum(); });
  }
  if (k.op == "cast") {
    const auto w = torch::randn({W}), g = torch::randn({W}, o);
    return median_of_3([&] { w.to(dt), g.to(torch::kFloat32); });
  }
  if (k.op == "adamw") {
    auto p = torch::randn({W}), m = torch::zeros({W}), v = torch::zeros({W});
    const auto g = torch::randn({W}, o);
    optim::AdamWConfig c;
    return median_of_3([&] { optim::adamw_update(p, g, m, v, 1, c.lr, c, torch::Tensor()); });
  }
  torch::AutoGradMode grad(true);
  if (k.op == "layernorm") {
    const auto x = leaf({R, W}), w = leaf({W}), b = leaf({W});
    return time_fwd_bwd({x, w, b}, [&] { return at::layer_norm(x, {W}, w, b, 1e-5); });
  }
  if (k.op == "gelu") {
    const auto x = leaf({R, W});
    return time_fwd_bwd({x}, [&] { return at::gelu(x, "tanh"); });
  }
  if (k.op == "softmax_causal") {  // naive attention: the mask is in its baddbmm's bias
    const auto s = leaf({k.batch, R, R});
    return time_fwd_bwd({s}, [&] { return torch::softmax(s, -1); });
  }
  if (k.op == "sdpa") {
    const auto q = leaf({k.batch, k.heads, R, W}), kk = leaf({k.batch, k.heads, R, W}), v = leaf({k.batch, k.heads, R, W});
    return time_fwd_bwd({q, kk, v}, [&] { return at::scaled_dot_product_attention(q, kk, v, {}, 0.0, true); });
  }
  if (k.op == "cross_entropy") {  // fp32 whatever the compute dtype (loss.h)
    const auto x = leaf({R, W});
    const auto t = torch::randint(W, {R}, torch::kLong);
    return time_fwd_bwd({x}, [&] { return at::cross_entropy_loss(x.to(torch::kFloat32), t); });
  }
  SB_CHECK(false, "shapes: no timing for kernel op '{}'", k.op);
  return 0;
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
    const bool naive = mk.attention == "naive";
    const ModelConfig base = preset_config(mk.model);
    const auto cands = neighbour_shapes(base, k.tolerance);
    const std::string machine = machine_text();
    std::map<std::string, double> seconds = reusable(k.reuse, dtype, threads, machine);
    std::map<std::string, double> used;  // this point's kernels: what a later point reuses
    std::int64_t timed = 0, reused = 0;
    const auto lookup = [&](const std::string& key, const std::function<double()>& time) {
      auto it = used.find(key);
      if (it != used.end()) return it->second;
      auto old = seconds.find(key);
      const bool have = old != seconds.end();
      const double s = have ? old->second : time();
      (have ? reused : timed) += 1;
      return used[key] = s;
    };
    // Per-parameter kernels (AdamW, the norm, the casts) are timed once at the model's count
    // and scaled to each shape's: they stream their elements (linear in P).
    const std::int64_t P0 = cands[0].params;
    ctx.progress.begin(fmt::format("shapes of {}", mk.model), static_cast<long>(cands.size()));
    std::vector<Shape> rows;
    for (std::size_t i = 0; i < cands.size() && !ctx.stop_agreed(); ++i) {
      const auto& c = cands[i];
      Shape s{&c};
      for (const auto& g : step_gemms(c.cfg, mk.batch, mk.seq, naive))
        s.gemm_s += static_cast<double>(g.count) * lookup(gemm_key(g), [&] { return time_gemm(g, dt); });
      for (const auto& v : step_vector_kernels(c.cfg, mk.batch, mk.seq, P0, naive, dt != torch::kFloat32)) {
        const bool per_param = v.op == "adamw" || v.op == "norm" || v.op == "cast";
        const double scale = per_param ? static_cast<double>(c.params) / static_cast<double>(P0) : 1.0;
        s.other_s += static_cast<double>(v.count) * scale * lookup(v.key(), [&] { return time_vector(v, dt); });
      }
      rows.push_back(s);
      ctx.progress.step(static_cast<long>(i + 1), c.change);
    }
    ctx.progress.end();
    SB_REQUIRE(rows.size() == cands.size(), "shapes: stopped after {} of {} shapes; nothing predicted",
               rows.size(), cands.size());
    std::sort(rows.begin() + 1, rows.end(), [](const Shape& a, const Shape& b) { return a.step_s() < b.step_s(); });
    record(ctx, rows, cands, used, timed, reused, machine);
    // Where the model's own GEMM time goes: its least efficient GEMMs.
    auto gemms = step_gemms(base, mk.batch, mk.seq, naive);
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
    rec.scalar("best_gain_pct", rows.size() > 1 ? std::max(0.0, 100.0 * (s0 / rows[1].step_s() - 1.0)) : 0.0);
    rec.scalar("kernels_timed", static_cast<double>(timed));
    rec.scalar("kernels_reused", static_cast<double>(reused));
    rec.text("shapes_table", table(rows, cands));
    rec.text("shapes_machine", machine);
    rec.text("kernel_timings", nlohmann::json(used).dump());
    if (rows.size() > 1 && rows[1].step_s() < s0) {
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
  f.add("shapes.reuse", &ShapesKeys::reuse, std::string(),
        "shapes task: a results folder whose earlier shapes points' kernel timings (same CPU model and ISA, "
        "dtype, threads) are reused instead of timed again; \"\" = time every kernel")
      .accepts_path();
  f.validate(validate);
}
SB_CONFIG_SECTION(ShapesKeys);

namespace {
const Registrar reg([] {
  register_task({"shapes", [] { return std::make_unique<ShapesWorkload>(); }, [](const Point&) { return 0.0; }});
});
}  // namespace

}  // namespace sb::train
