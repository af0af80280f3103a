// `shardbench models`: every model preset with its exact parameter count and fp32 bytes.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/workload.h"
#include "workloads/models/model.h"


namespace sb::models {
namespace {

// names: presets or local Hugging Face folders; empty = every preset.
void print_models(const std::vector<std::string>& names) {
  std::printf("%-12s %-6s %6s %6s %6s %7s %6s %15s %15s %16s\n", "preset", "family", "layers", "d", "heads",
              "vocab", "ctx", "params", "with_heads", "fp32_bytes");
  for (const auto& name : names.empty() ? preset_names() : names) {
    auto m = make_model(name);
    const auto& c = m->config();
    const std::int64_t backbone = count_backbone_params(m->units()), all = count_params(m->units());
    // fp32 bytes of everything the model trains and serves (task heads included).
    std::printf("%-12s %-6s %6lld %6lld %6lld %7lld %6lld %15lld %15lld %16lld\n", name.c_str(), c.family.c_str(),
                static_cast<long long>(c.n_layer), static_cast<long long>(c.d_model),
                static_cast<long long>(c.n_head), static_cast<long long>(c.vocab),
                static_cast<long long>(c.max_pos), static_cast<long long>(backbone), static_cast<long long>(all),
                static_cast<long long>(4 * all));
  }
  std::printf("params: published count (BERT: embeddings + encoder + pooler); with_heads adds BERT's MLM "
              "transform, decoder bias and classifier (GPT-2's LM head is tied: no extra parameters)\n");
}

const sb::Registrar kRegister([] {
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
