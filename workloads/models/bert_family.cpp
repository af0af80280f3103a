// The "bert" family: masked LM (+ sequence classification), MLM accuracy; Hugging Face names
// with or without "bert.", LayerNorm gamma/beta, buffers and task heads we do not use skipped,
// a missing pooler initialised; config.json as transformers' BertConfig.
#include "harness/workload.h"
#include "workloads/models/bert.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config_reader.h"

namespace sb::models {
namespace {

// A file's name in our spelling: "bert." prefix, LayerNorm weight/bias.
std::string canonical(std::string n) {
  if (ends_with(n, "LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  if (ends_with(n, "LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  if (starts_with(n, "embeddings.") || starts_with(n, "encoder.") || starts_with(n, "pooler."))
    n = "bert." + n;
  return n;
}

// What transformers' BertModel / BertForPreTraining / BertForMaskedLM save that is not a
// parameter of ours (4.x saved position_ids as an I64 buffer).
std::string hf_skip(const std::string& file_name) {
  const std::string n = canonical(file_name);
  if (n == "bert.embeddings.position_ids") return "position-ids buffer";
  if (n == "bert.embeddings.token_type_ids") return "token-type-ids buffer";
  if (starts_with(n, "cls.predictions.decoder."))
    return "MLM decoder, tied to the word embeddings and cls.predictions.bias";
  if (starts_with(n, "cls.seq_relationship.")) return "next-sentence head (BertForPreTraining)";
  return "";
}

std::string hf_name(const std::string& n) { return hf_skip(n).empty() ? canonical(n) : ""; }

// BertConfig's required sizes, read and written by these names.
constexpr std::initializer_list<HfSize> kSizes = {
    {"num_hidden_layers", &ModelConfig::n_layer},
    {"num_attention_heads", &ModelConfig::n_head},
    {"hidden_size", &ModelConfig::d_model},
    {"intermediate_size", &ModelConfig::d_ff},
    {"vocab_size", &ModelConfig::vocab},
    {"max_position_embeddings", &ModelConfig::max_pos}};

// BertConfig's fields and defaults (the label count: the caller, from id2label or
// num_labels); what our Bert does not implement is refused by name.
ModelConfig read_config(const HfConfigReader& r) {
  r.refuse_encoder_decoder();
  ModelConfig c;
  r.read_sizes(c, kSizes);
  c.type_vocab = r.has("type_vocab_size") ? r.positive("type_vocab_size") : 2;
  c.ln_eps = r.number("layer_norm_eps", 1e-12);
  r.one_of("hidden_act", r.text("hidden_act", "gelu"), {"gelu"}, "BERT's erf GELU");
  r.one_of("position_embedding_type", r.text("position_embedding_type", "absolute"),
           {"absolute"}, "learned absolute positions");
  r.must_be("is_decoder", false, "BERT as an encoder");
  return c;
}

// What BertForMaskedLM and BertForSequenceClassification load back as this model.
nlohmann::json write_config(const ModelConfig& c) {
  nlohmann::json j = {{"model_type", "bert"},
                      {"architectures", {"BertForMaskedLM", "BertForSequenceClassification"}},
                      {"type_vocab_size", c.type_vocab},
                      {"layer_norm_eps", c.ln_eps},
                      {"hidden_act", "gelu"},
                      {"position_embedding_type", "absolute"}};
  HfConfigReader::write_sizes(c, kSizes, j);
  return j;
}

// BertForMaskedLM saves no pooler: a checkpoint may lack it.
bool hf_optional(const std::string& n) { return starts_with(n, "bert.pooler."); }

const sb::Registrar kRegister([] {
  register_family({.name = "bert", .objective = Objective::MaskedLm, .eval_metric = "mlm_accuracy",
                   .classifies = true, .tensor_parallel = true,
                   .make = make_as<Bert>, .hf_name = hf_name, .hf_skip = hf_skip,
                   .hf_optional = hf_optional, .hf_model_types = {"bert"},
                   .hf_read_config = read_config, .hf_write_config = write_config});
});

}  // namespace
}  // namespace sb::models
