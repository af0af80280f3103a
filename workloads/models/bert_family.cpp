// The "bert" family: masked LM (+ sequence classification), MLM accuracy; Hugging Face names
// with or without "bert.", LayerNorm gamma/beta, buffers and task heads we do not use skipped,
// a missing pooler initialised.
#include "harness/workload.h"
#include "workloads/models/bert.h"
#include "workloads/models/family.h"

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

const sb::Registrar kRegister([] {
  Family f;
  f.name = "bert";
  f.objective = Objective::MaskedLm;
  f.eval_metric = "mlm_accuracy";
  f.classifies = true;
  f.make = [](const ModelConfig& c) -> std::unique_ptr<Model> { return std::make_unique<Bert>(c); };
  f.hf_name = hf_name;
  f.hf_skip = hf_skip;
  f.hf_transposed = [](const std::string&) { return false; };
  f.hf_optional = [](const std::string& n) { return starts_with(n, "bert.pooler."); };
  register_family(std::move(f));
});

}  // namespace
}  // namespace sb::models
