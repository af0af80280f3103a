// The "gpt2-moe" family (moe.h; docs/MODELS.md "GPT-2 MoE"): GPT-2 whose every `moe.every`-th
// block has a mixture-of-experts MLP; the same model class as "gpt2". No transformers
// architecture matches this layout, so its folders are shardbench's own: our parameter names
// as they are, and a config.json of model_type "shardbench-gpt2-moe" (GPT2Config's sizes and
// the MoE fields) that only shardbench reads. It does not yet split over tp, sp or pp.
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/hf_config_reader.h"

namespace sb::models {
namespace {

constexpr std::initializer_list<HfSize> kSizes = {
    {"n_layer", &ModelConfig::n_layer},   {"n_head", &ModelConfig::n_head},
    {"n_embd", &ModelConfig::d_model},    {"vocab_size", &ModelConfig::vocab},
    {"n_positions", &ModelConfig::max_pos}, {"n_inner", &ModelConfig::d_ff}};

ModelConfig read_config(const HfConfigReader& r) {
  r.refuse_encoder_decoder();
  ModelConfig c;
  r.read_sizes(c, kSizes);
  c.ln_eps = r.number("layer_norm_epsilon", 1e-5);
  c.moe.experts = r.positive("num_experts");
  c.moe.every = r.positive("moe_every");
  c.moe.top_k = r.positive("moe_top_k");
  c.moe.capacity_factor = r.number("moe_capacity_factor", c.moe.capacity_factor);
  c.moe.eval_capacity_factor = r.number("moe_eval_capacity_factor", c.moe.eval_capacity_factor);
  return c;
}

nlohmann::json write_config(const ModelConfig& c) {
  nlohmann::json j = {{"model_type", "shardbench-gpt2-moe"}, {"layer_norm_epsilon", c.ln_eps},
                      {"num_experts", c.moe.experts},        {"moe_every", c.moe.every},
                      {"moe_top_k", c.moe.top_k},            {"moe_capacity_factor", c.moe.capacity_factor},
                      {"moe_eval_capacity_factor", c.moe.eval_capacity_factor}};
  HfConfigReader::write_sizes(c, kSizes, j);
  return j;
}

const sb::Registrar kRegister([] {
  register_family({.name = "gpt2-moe", .objective = Objective::CausalLm, .eval_metric = "perplexity",
                   .lower_is_better = true, .trains_on_token_files = true, .generates = true,
                   .tensor_parallel = false, .sequence_parallel = true, .make = make_as<Gpt2>,
                   .hf_name = [](const std::string& n) { return n; },
                   .hf_skip = [](const std::string&) { return std::string(); },
                   .hf_model_types = {"shardbench-gpt2-moe"},
                   .hf_read_config = read_config, .hf_write_config = write_config});
});

}  // namespace
}  // namespace sb::models
