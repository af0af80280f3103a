// The "gpt2" family: causal LM, perplexity, token-file training, generation; Hugging Face
// names with or without "transformer.", Conv1D weights stored (in, out).
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/models/gpt2.h"

namespace sb::models {
namespace {

std::string canonical(const std::string& n) {
  return starts_with(n, "transformer.") ? n.substr(12) : n;
}

// Buffers (the causal mask, in 4.x files F32, U8 or BOOL) and the tied LM head are not
// parameters of ours.
std::string hf_skip(const std::string& file_name) {
  const std::string n = canonical(file_name);
  if (ends_with(n, ".attn.bias")) return "causal-mask buffer";
  if (ends_with(n, ".attn.masked_bias")) return "masked-bias buffer";
  if (n == "lm_head.weight") return "LM head, tied to wte";
  return "";
}

std::string hf_name(const std::string& n) { return hf_skip(n).empty() ? canonical(n) : ""; }

bool hf_transposed(const std::string& n) {
  return ends_with(n, "attn.c_attn.weight") || ends_with(n, "attn.c_proj.weight") ||
         ends_with(n, "mlp.c_fc.weight") || ends_with(n, "mlp.c_proj.weight");
}

const sb::Registrar kRegister([] {
  Family f;
  f.name = "gpt2";
  f.objective = Objective::CausalLm;
  f.eval_metric = "perplexity";
  f.lower_is_better = true;
  f.trains_on_token_files = true;
  f.generates = true;
  f.make = [](const ModelConfig& c) -> std::unique_ptr<Model> { return std::make_unique<Gpt2>(c); };
  f.hf_name = hf_name;
  f.hf_skip = hf_skip;
  f.hf_transposed = hf_transposed;
  register_family(std::move(f));
});

}  // namespace
}  // namespace sb::models
