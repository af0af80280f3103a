// `shardbench shapes MODEL [--batch B --seq T --dtype D --threads N --tolerance F]`: the
// model-shape advisor (shapes.h; docs/MODELS.md "Shapes"). Times every distinct GEMM a
// training step of the model and of each neighbouring shape runs, on this machine, in the
// dtype and threads given (the median of 3 timed calls after one untimed), and prints the
// shapes ranked by their summed GEMM time with the predicted gain over the model and why
// (which dimensions do not tile by 64). Timings are kept in a cache file keyed by CPU model,
// dtype, threads and shape, so a second call on the same machine reuses them. --folder DIR
// writes the best shape as a model folder (config.json and seeded weights) that `model = DIR`
// trains (in train/: it writes through data's folder exporter).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "harness/command.h"
#include "harness/core/machine.h"
#include "harness/workload.h"
#include "workloads/data/safetensors.h"
#include "workloads/models/dtype.h"
#include "workloads/models/params.h"
#include "workloads/models/shapes.h"

namespace sb::train {
using namespace sb::models;
namespace {

struct Args {
  std::string model, dtype = "bf16", cache = "results/shapes-cache.json", folder;
  std::int64_t batch = 4, seq = 256, top = 12;
  int threads = 0;
  double tolerance = 0.02;
};

double seconds_of(const Gemm& g, torch::ScalarType dt) {
  const auto o = torch::TensorOptions().dtype(dt);
  const auto a = torch::randn({g.batch, g.m, g.k}, o), b = torch::randn({g.batch, g.k, g.n}, o);
  const auto run = [&] { return g.batch == 1 ? torch::mm(a[0], b[0]) : torch::bmm(a, b); };
  run();  // untimed: packing, first-touch
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

void shapes(const Args& a) {
  const int threads = a.threads > 0 ? a.threads : usable_cores();
  torch::set_num_threads(threads);
  const auto dt = dtype_from_name(a.dtype);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const MachineInfo m = machine_now(host);
  const std::string prefix = fmt::format("{}|{}|t{}|", m.cpu_model, a.dtype, threads);
  nlohmann::json cache = nlohmann::json::object(), stored;
  if (std::ifstream in(a.cache); in.good()) {
    try {
      cache = stored = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      cache = nlohmann::json::object();  // unreadable: measured again and rewritten
    }
  }
  std::int64_t measured = 0, reused = 0;
  std::set<std::string> counted;  // stored shapes counted once
  const auto seconds = [&](const Gemm& g) {
    const std::string key = fmt::format("{}{}x{}x{}x{}", prefix, g.batch, g.m, g.k, g.n);
    if (cache.contains(key)) {
      if (stored.contains(key) && counted.insert(key).second) ++reused;
      return cache[key].get<double>();
    }
    ++measured;
    return (cache[key] = seconds_of(g, dt)).get<double>();
  };
  const ModelConfig base = preset_config(a.model);
  const auto cands = neighbour_shapes(base, a.tolerance);
  struct Row {
    const ShapeCandidate* c;
    double s;
  };
  std::vector<Row> rows;
  for (const auto& c : cands) {
    double s = 0;
    for (const auto& g : step_gemms(c.cfg, a.batch, a.seq)) s += static_cast<double>(g.count) * seconds(g);
    rows.push_back({&c, s});
  }
  std::filesystem::create_directories(std::filesystem::path(a.cache).parent_path().empty()
                                          ? "." : std::filesystem::path(a.cache).parent_path());
  std::ofstream(a.cache) << cache.dump(1) << "\n";
  const double s0 = rows[0].s;
  std::sort(rows.begin() + 1, rows.end(), [](const Row& x, const Row& y) { return x.s < y.s; });
  std::printf("shapes of %s: one training step's GEMMs at B %lld x T %lld, %s, %d threads on %s (%s); "
              "%lld GEMM shapes timed, %lld from %s; parameter tolerance %.1f%%\n",
              a.model.c_str(), static_cast<long long>(a.batch), static_cast<long long>(a.seq), a.dtype.c_str(),
              threads, m.cpu_model.c_str(), fmt::format("{}", fmt::join(m.isa, " ")).c_str(),
              static_cast<long long>(measured), static_cast<long long>(reused), a.cache.c_str(), 100 * a.tolerance);
  std::printf("%4s %6s %6s %5s %7s %7s %13s %8s %12s %9s  %s\n", "rank", "d", "heads", "dh", "d_ff", "vocab",
              "params", "dparam%", "gemm_s/step", "gain%", "change; dimensions that do not tile by 64");
  const auto print = [&](int rank, const Row& r) {
    const auto& c = r.c->cfg;
    const std::string notes = tiling_notes(c);
    std::printf("%4d %6lld %6lld %5lld %7lld %7lld %13lld %8.2f %12.4f %9.1f  %s%s%s\n", rank,
                static_cast<long long>(c.d_model), static_cast<long long>(c.n_head), static_cast<long long>(c.dh()),
                static_cast<long long>(c.d_ff), static_cast<long long>(c.vocab), static_cast<long long>(r.c->params),
                100.0 * static_cast<double>(r.c->params - cands[0].params) / static_cast<double>(cands[0].params),
                r.s, 100.0 * (s0 / r.s - 1.0), r.c->change.c_str(), notes.empty() ? "" : "; ", notes.c_str());
  };
  print(0, rows[0]);
  for (std::size_t i = 1; i < rows.size() && static_cast<std::int64_t>(i) <= a.top; ++i) print(static_cast<int>(i), rows[i]);
  // Where the model's own time goes: its least efficient GEMMs.
  auto gemms = step_gemms(base, a.batch, a.seq);
  std::sort(gemms.begin(), gemms.end(), [&](const Gemm& x, const Gemm& y) {
    return x.flops() / seconds(x) < y.flops() / seconds(y);
  });
  std::printf("the model's least efficient GEMMs (GFLOP/s):\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(4, gemms.size()); ++i)
    std::printf("  %-28s %lld x (%lld x %lld) by (%lld x %lld): %.1f\n", gemms[i].what.c_str(),
                static_cast<long long>(gemms[i].batch), static_cast<long long>(gemms[i].m),
                static_cast<long long>(gemms[i].k), static_cast<long long>(gemms[i].k),
                static_cast<long long>(gemms[i].n), gemms[i].flops() / seconds(gemms[i]) / 1e9);
  if (rows.size() > 1 && rows[1].s < s0) {
    const auto& b = rows[1].c->cfg;
    std::printf("best: a GPT-2 folder's config.json with n_embd %lld, n_head %lld, n_inner %lld, vocab_size %lld "
                "(n_layer %lld, n_positions %lld): predicted %.1f%% faster in GEMM time\n",
                static_cast<long long>(b.d_model), static_cast<long long>(b.n_head), static_cast<long long>(b.d_ff),
                static_cast<long long>(b.vocab), static_cast<long long>(b.n_layer), static_cast<long long>(b.max_pos),
                100.0 * (s0 / rows[1].s - 1.0));
    if (!a.folder.empty()) {  // seeded weights: a starting point to train, as a preset is
      ModelConfig best = b;
      best.preset = a.folder;
      const auto model = make_model(best);
      data::export_hf_folder(*model, init_params(model->units(), 0), a.folder);
      std::printf("written: %s (model = \"%s\" trains it)\n", a.folder.c_str(), a.folder.c_str());
    }
  } else if (!a.folder.empty()) {
    std::printf("no neighbour is predicted faster than the model: no folder written\n");
  }
}

const sb::Registrar kRegister([] {
  sb::cli::register_command({"shapes", "Rank a GPT-2 model's neighbouring shapes by their GEMM time on this machine",
                             [](CLI::App& sub) {
                               auto a = std::make_shared<Args>();
                               sub.add_option("model", a->model, "a GPT-2 preset or folder")->required();
                               sub.add_option("--batch", a->batch, "rows a step (default 4)");
                               sub.add_option("--seq", a->seq, "tokens a row (default 256)");
                               sub.add_option("--dtype", a->dtype, "fp32 or bf16 (default bf16)");
                               sub.add_option("--threads", a->threads, "threads (default: this process's cores)");
                               sub.add_option("--tolerance", a->tolerance, "relative parameter-count tolerance (default 0.02)");
                               sub.add_option("--top", a->top, "neighbours printed (default 12)");
                               sub.add_option("--cache", a->cache, "timing cache (default results/shapes-cache.json)");
                               sub.add_option("--folder", a->folder, "write the best shape here as a model folder (seeded weights)");
                               sub.callback([a] { shapes(*a); });
                             }});
});

}  // namespace
}  // namespace sb::train
