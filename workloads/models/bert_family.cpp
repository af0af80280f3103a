// The "bert" family: masked LM (+ sequence classification), MLM accuracy; Hugging Face names
// with or without "bert.", LayerNorm gamma/beta, task heads we do not use skipped.
#include "harness/workload.h"
#include "workloads/models/bert.h"
#include "workloads/models/family.h"

namespace sb::models {
namespace {

std::string hf_name(std::string n) {
  if (ends_with(n, "LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  if (ends_with(n, "LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  if (starts_with(n, "embeddings.") || starts_with(n, "encoder.") || starts_with(n, "pooler."))
    n = "bert." + n;
  if (n == "bert.embeddings.position_ids" || starts_with(n, "cls.predictions.decoder.") ||
      starts_with(n, "cls.seq_relationship."))
    return "";
  return n;
}

const sb::Registrar kRegister([] {
  Family f;
  f.name = "bert";
  f.objective = Objective::MaskedLm;
  f.eval_metric = "mlm_accuracy";
  f.classifies = true;
  f.make = [](const ModelConfig& c) -> std::unique_ptr<Model> { return std::make_unique<Bert>(c); };
  f.hf_name = hf_name;
  f.hf_transposed = [](const std::string&) { return false; };
  register_family(std::move(f));
});

}  // namespace
}  // namespace sb::models
