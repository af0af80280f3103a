// The "gpt2" family: causal LM, perplexity, token-file training, generation; Hugging Face
// names with or without "transformer.", Conv1D weights stored (in, out); config.json as
// transformers' GPT2Config.
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/hf_config_reader.h"

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

// GPT2Config's required sizes, read and written by these names.
constexpr std::initializer_list<HfSize> kSizes = {
    {"n_layer", &ModelConfig::n_layer},   {"n_head", &ModelConfig::n_head},
    {"n_embd", &ModelConfig::d_model},    {"vocab_size", &ModelConfig::vocab},
    {"n_positions", &ModelConfig::max_pos}};

// GPT2Config's fields and defaults; what our Gpt2 does not implement is refused by name.
ModelConfig read_config(const HfConfigReader& r) {
  r.refuse_encoder_decoder();
  ModelConfig c;
  r.read_sizes(c, kSizes);
  c.d_ff = r.has("n_inner") ? r.positive("n_inner") : 4 * c.d_model;
  c.ln_eps = r.number("layer_norm_epsilon", 1e-5);
  // Our GELU is torch's tanh approximation, which is exactly transformers' gelu_new and
  // gelu_pytorch_tanh; erf "gelu" or "relu" would be another model.
  r.one_of("activation_function", r.text("activation_function", "gelu_new"),
           {"gelu_new", "gelu_pytorch_tanh"}, "the tanh-approximate GELU of GPT-2");
  r.must_be("tie_word_embeddings", true, "GPT-2's LM head is the word embedding");
  r.must_be("scale_attn_by_inverse_layer_idx", false, "attention scaled by 1/sqrt(head dim) only");
  r.must_be("reorder_and_upcast_attn", false, "attention computed in the compute dtype");
  return c;
}

// What GPT2LMHeadModel loads back as this model (the last token id as BOS/EOS, as GPT-2's).
nlohmann::json write_config(const ModelConfig& c) {
  nlohmann::json j = {{"model_type", "gpt2"},          {"architectures", {"GPT2LMHeadModel"}},
                      {"n_inner", c.d_ff},             {"n_ctx", c.max_pos},
                      {"layer_norm_epsilon", c.ln_eps}, {"activation_function", "gelu_new"},
                      {"tie_word_embeddings", true},   {"bos_token_id", c.vocab - 1},
                      {"eos_token_id", c.vocab - 1}};
  HfConfigReader::write_sizes(c, kSizes, j);
  return j;
}

const sb::Registrar kRegister([] {
  register_family({.name = "gpt2", .objective = Objective::CausalLm, .eval_metric = "perplexity",
                   .lower_is_better = true, .trains_on_token_files = true, .generates = true,
                   .tensor_parallel = true, .sequence_parallel = true,
                   .make = make_as<Gpt2>, .hf_name = hf_name, .hf_skip = hf_skip,
                   .hf_transposed = hf_transposed, .hf_model_types = {"gpt2"},
                   .hf_read_config = read_config, .hf_write_config = write_config});
});

}  // namespace
}  // namespace sb::models
