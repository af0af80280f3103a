// `shardbench shapes MODEL [--batch B --seq T --dtype D --threads N --tolerance F --attention A
// --pass train|infer]`:
// the model-shape advisor (shapes.h; docs/MODELS.md "Shapes"). Writes a one-point suite of the
// "shapes" task (shapes_workload.cpp) and runs it through the ordinary sweep, so the kernel
// timings and the ranked shapes are a result file under --results (default
// results/shapes/<model>-b<B>-s<T>-<dtype>-t<threads>) that the index and `report` read; then
// prints the point's ranked table (predicted step time = the step's kernels summed) and the
// model's least efficient GEMMs. A second call with the same arguments finds the point done
// and prints it again; a call for another model reuses the kernel timings of earlier points
// under --reuse (default results/shapes) taken on the same CPU model and ISA, dtype and
// threads. --folder DIR writes the best neighbour (even one predicted slower, as the printed
// gain says) as a model folder (config.json and seeded weights) that `model = DIR` trains (in
// train/: it writes through data's folder exporter).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/core/subprocess.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"
#include "harness/workload.h"
#include "workloads/data/safetensors.h"
#include "workloads/models/params.h"
#include "workloads/models/shapes.h"

namespace sb::train {
using namespace sb::models;
namespace {
namespace fs = std::filesystem;

struct Args {
  std::string model, dtype = "bf16", attention = "naive", pass = "train", results, reuse = "results/shapes", folder;
  std::int64_t batch = 4, seq = 256, top = 12;
  int threads = 0;
  double tolerance = 0.02;
};

// An absolute path for a value with '/' (the suite file lives elsewhere); a preset as it is.
std::string as_given(const std::string& v) { return v.find('/') == std::string::npos ? v : fs::absolute(v).string(); }

std::string slug(const Args& a, int threads) {
  std::string m = fs::path(a.model).filename().string();
  if (m.empty()) m = fs::path(a.model).parent_path().filename().string();
  for (auto& ch : m)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return fmt::format("{}-b{}-s{}-{}-t{}{}{}", m, a.batch, a.seq, a.dtype, threads,
                     a.attention == "naive" ? "" : "-" + a.attention, a.pass == "train" ? "" : "-" + a.pass);
}

std::string suite_text(const Args& a, const std::string& name, int threads) {
  return fmt::format(
      "# Written by `shardbench shapes`: the model-shape advisor's measurements as one point.\n"
      "[suite]\nname = \"{}\"\ndescription = \"shapes of {}: the kernels of one {} pass, B {} x T {}, {}, {} threads\"\n\n"
      "[base]\ntask = \"shapes\"\nmodel = \"{}\"\nbatch = {}\nseq = {}\ndtype = \"{}\"\nattention = \"{}\"\n"
      "world = 1\nthreads = {}\n\"shapes.tolerance\" = {}\n\"shapes.reuse\" = \"{}\"\n\"shapes.pass\" = \"{}\"\n",
      name, a.model, a.pass, a.batch, a.seq, a.dtype, threads, as_given(a.model), a.batch, a.seq, a.dtype, a.attention,
      threads, a.tolerance, a.reuse.empty() ? "" : fs::absolute(a.reuse).string(), a.pass);
}

// The result file of the suite's one point (earlier points of other arguments may lie beside it).
std::string point_file(const std::string& suite, const std::string& results) {
  const Suite s = load_suite(suite);
  SB_CHECK(s.points.size() == 1, "shapes: the suite {} has {} points, one expected", suite, s.points.size());
  return result_path(results, s.points[0].index, s.points[0].id);
}

void write_folder(const Args& a, const std::string& best_json) {
  const auto b = nlohmann::json::parse(best_json);
  ModelConfig best = preset_config(a.model);
  best.d_model = b.at("n_embd"), best.n_head = b.at("n_head"), best.head_dim = 0;
  best.d_ff = b.at("n_inner"), best.vocab = b.at("vocab_size");
  best.preset = a.folder;
  const auto model = make_model(best);
  data::export_hf_folder(*model, init_params(model->units(), 0), a.folder);  // seeded: a start to train
  std::printf("written: %s (model = \"%s\" trains it)\n", a.folder.c_str(), a.folder.c_str());
}

void shapes(Args a) {
  const int threads = a.threads > 0 ? a.threads : usable_cores();
  const std::string name = slug(a, threads);
  if (a.results.empty()) a.results = "results/shapes/" + name;
  fs::create_directories(a.results);
  const std::string suite = a.results + "/shapes.toml";
  std::ofstream(suite) << suite_text(a, "shapes-" + name, threads);
  const auto r = run_process({self_exe(), "sweep", suite, "--results", a.results}, {});
  SB_REQUIRE(r.ok(), "shapes: the sweep of {} failed ({}); its log is under {}/logs", suite, r.describe(), a.results);
  const std::string file = point_file(suite, a.results);
  const ResultMeta meta = read_result_meta(file);
  SB_REQUIRE(meta.status == "done", "shapes: {} is {}: {}", file, meta.status, meta.failure_reason);
  const Recorder rec = read_result_records(file);
  const auto& t = rec.texts();
  const auto& sc = rec.scalars();
  std::printf("shapes of %s: one %s's kernels at B %lld x T %lld, %s, %s attention, %d threads on %s; "
              "%.0f kernels timed, %.0f reused from %s; parameter tolerance %.1f%%; result %s\n",
              a.model.c_str(), a.pass == "train" ? "training step" : "inference pass",
              static_cast<long long>(a.batch), static_cast<long long>(a.seq), a.dtype.c_str(), a.attention.c_str(),
              threads, t.at("shapes_machine").c_str(), sc.at("kernels_timed"),
              sc.at("kernels_reused"), a.reuse.c_str(), 100 * a.tolerance, file.c_str());
  std::istringstream lines(t.at("shapes_table"));
  std::string line;
  for (std::int64_t i = 0; std::getline(lines, line) && i <= a.top + 1; ++i) std::printf("%s\n", line.c_str());
  std::printf("the model's least efficient GEMMs (GFLOP/s):\n%s", t.at("least_efficient_gemms").c_str());
  const auto best = t.find("best_config");
  if (best == t.end()) {
    std::printf("no neighbour within the tolerance%s\n", a.folder.empty() ? "" : ": no folder written");
    return;
  }
  const auto b = nlohmann::json::parse(best->second);
  const double gain = sc.at("best_gain_pct");
  if (gain <= 0) std::printf("no neighbour is predicted faster than the model; the best of them:\n");
  std::printf("best: a GPT-2 folder's config.json with n_embd %lld, n_head %lld, n_inner %lld, vocab_size %lld "
              "(n_layer %lld, n_positions %lld): predicted step %.1f%% %s (%s)\n",
              b.at("n_embd").get<long long>(), b.at("n_head").get<long long>(), b.at("n_inner").get<long long>(),
              b.at("vocab_size").get<long long>(), b.at("n_layer").get<long long>(),
              b.at("n_positions").get<long long>(), std::abs(gain), gain > 0 ? "faster" : "slower",
              b.at("change").get<std::string>().c_str());
  if (!a.folder.empty()) write_folder(a, best->second);
}

const sb::Registrar kRegister([] {
  sb::cli::register_command({"shapes", "Rank a GPT-2 model's neighbouring shapes by their predicted step time on this machine",
                             [](CLI::App& sub) {
                               auto a = std::make_shared<Args>();
                               sub.add_option("model", a->model, "a GPT-2 preset or folder")->required();
                               sub.add_option("--batch", a->batch, "rows a step (default 4)");
                               sub.add_option("--seq", a->seq, "tokens a row (default 256)");
                               sub.add_option("--dtype", a->dtype, "fp32 or bf16 (default bf16)");
                               sub.add_option("--attention", a->attention, "naive or sdpa (default naive)");
                               sub.add_option("--pass", a->pass,
                                              "train (a training step) or infer (an inference pass: forward only)");
                               sub.add_option("--threads", a->threads, "threads (default: this process's cores)");
                               sub.add_option("--tolerance", a->tolerance, "relative parameter-count tolerance (default 0.02)");
                               sub.add_option("--top", a->top, "neighbours printed (default 12)");
                               sub.add_option("--results", a->results,
                                              "the point's results folder "
                                              "(default results/shapes/<model>-b<B>-s<T>-<dtype>-t<threads>)");
                               sub.add_option("--reuse", a->reuse,
                                              "reuse kernel timings of earlier shapes points under this folder "
                                              "(default results/shapes; \"\": none)");
                               sub.add_option("--folder", a->folder, "write the best shape here as a model folder (seeded weights)");
                               sub.callback([a] { shapes(*a); });
                             }});
});

}  // namespace
}  // namespace sb::train
