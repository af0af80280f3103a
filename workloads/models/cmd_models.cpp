// `shardbench models`: every model preset with its exact parameter count and fp32 bytes; the
// same counts as the `params` and `with_heads` columns of `shardbench plan`.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/spec/plan.h"
#include "harness/workload.h"
#include "workloads/models/model.h"


namespace sb::models {
namespace {

// Exact parameter counts of a preset or folder: the published one (no task heads) and all.
struct Counts {
  std::int64_t backbone = 0, all = 0;
};
Counts counts(const std::string& name) {
  auto m = make_model(name);
  return {count_backbone_params(m->units()), count_params(m->units())};
}

// The plan's cells: a point's model counted as `shardbench models` counts it; "-" for a task
// that builds no model (one that may not set the `model` key).
std::string plan_cell(const sb::Point& p, bool with_heads) {
  const auto& tasks = sb::find_key("model")->tasks;
  if (!tasks.empty() && std::find(tasks.begin(), tasks.end(), sb::base_config(p).task) == tasks.end())
    return "-";
  const Counts c = counts(sb::config<sb::ModelKeys>(p).model);
  return std::to_string(with_heads ? c.all : c.backbone);
}

// names: presets or local Hugging Face folders; empty = every preset.
void print_models(const std::vector<std::string>& names) {
  std::printf("%-14s %-8s %6s %6s %6s %7s %6s %15s %15s %16s %15s\n", "preset", "family", "layers", "d", "heads",
              "vocab", "ctx", "params", "with_heads", "fp32_bytes", "active");
  for (const auto& name : names.empty() ? preset_names() : names) {
    const ModelConfig c = preset_config(name);
    const auto [backbone, all] = counts(name);
    // fp32 bytes of everything the model trains and serves (task heads included).
    std::printf("%-14s %-8s %6lld %6lld %6lld %7lld %6lld %15lld %15lld %16lld %15lld\n", name.c_str(), c.family.c_str(),
                static_cast<long long>(c.n_layer), static_cast<long long>(c.d_model),
                static_cast<long long>(c.n_head), static_cast<long long>(c.vocab),
                static_cast<long long>(c.max_pos), static_cast<long long>(backbone), static_cast<long long>(all),
                static_cast<long long>(4 * all), static_cast<long long>(active_params(c, make_model(c)->units())));
  }
  std::printf("params: published count (BERT: embeddings + encoder + pooler); with_heads adds BERT's MLM "
              "transform, decoder bias and classifier (GPT-2's LM head is tied: no extra parameters); active: "
              "the parameters one token meets (with_heads, less the experts a mixture of experts does not "
              "route it to: (E - top_k) / E of each MoE block's experts)\n");
}

const sb::Registrar kRegister([] {
  sb::register_plan_column({"params", [](const sb::Point& p) { return plan_cell(p, false); }});
  sb::register_plan_column({"with_heads", [](const sb::Point& p) { return plan_cell(p, true); }});
  sb::cli::register_command({"models", "List model presets (or the given presets and local Hugging "
                             "Face folders) with exact parameter counts and fp32 weight bytes",
                             [](CLI::App& sub) {
                               static std::vector<std::string> names;
                               sub.add_option("model", names, "presets or model folders (default: every preset)");
                               sub.callback([] { print_models(names); });
                             }});
});

}  // namespace
}  // namespace sb::models
