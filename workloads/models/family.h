// What a model family is and can do. Callers (data, checkpoints, train, infer, config.json)
// ask the family of a model instead of comparing family names; a family registers itself in
// its own file (gpt2_family.cpp, bert_family.cpp), with the Hugging Face config.json it reads
// and writes. Adding one: its model (<name>.h/.cpp), its record (<name>_family.cpp) and its
// presets (model.cpp's table); docs/ARCHITECTURE.md "Where a new variant goes".
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sb::models {

class Model;
struct ModelConfig;
struct HfConfigReader;  // hf_config_reader.h

enum class Objective {
  CausalLm,  // next-token prediction (targets shifted by the data loader)
  MaskedLm,  // masked-token prediction (BERT's MLM; classification when labels are given)
};

struct Family {
  std::string name;  // ModelConfig::family: "gpt2", "bert"
  Objective objective = Objective::CausalLm;
  // The evaluation metric infer records for accuracy_batches (and its fp32 reference with
  // the suffix "_fp32"): "perplexity" (lower is better) or "mlm_accuracy".
  std::string eval_metric;
  bool lower_is_better = false;  // of eval_metric
  // Whether `data` may name a token file (causal LM on real text); else Markov data only.
  bool trains_on_token_files = false;
  bool generates = false;    // has a KV-cache decoder (Gpt2::generate)
  bool classifies = false;   // has a sequence-classification head (Model::classify)
  bool tensor_parallel = false;  // trains over mesh.tp (Model::set_tensor_parallel)
  bool sequence_parallel = false;  // trains over mesh.sp (Model::set_sequence_parallel)
  std::function<std::unique_ptr<Model>(const ModelConfig&)> make;
  // Hugging Face checkpoints: our name for a file's tensor name ("" = not ours: skip it);
  // why a file's tensor is skipped ("" = it is not: ours, or unknown and so an error): the
  // buffers transformers saved (position ids, causal masks, whatever their dtype), tied
  // copies, heads of other tasks; hf_name is "" exactly where this is not; whether a tensor is
  // stored transposed (GPT-2's Conv1D layers keep (in, out)); and which of our parameters a
  // checkpoint may lack besides the task heads (models::is_task_head), initialised from the
  // seed as transformers does (BERT's pooler: BertForMaskedLM saves none). Unset: none.
  std::function<std::string(const std::string&)> hf_name;
  std::function<std::string(const std::string&)> hf_skip;
  std::function<bool(const std::string&)> hf_transposed;  // unset: none is
  std::function<bool(const std::string&)> hf_optional;    // unset: none is
  // Hugging Face config.json (hf_config.h): the model_type values this family reads
  // (transformers' names; the first is the one it writes); its reader, config.json's fields
  // as our sizes (family and preset are set by the caller; a field it cannot honour is
  // refused through the reader's checks, naming file, field and value); its writer, the
  // fields transformers' config class reads back as the same model (a family's sizes: one
  // HfSize table both use, hf_config_reader.h). The label maps
  // (id2label, label2id: every transformers config has them) are read and written for a
  // family that classifies, not by these.
  std::vector<std::string> hf_model_types;
  std::function<ModelConfig(const HfConfigReader&)> hf_read_config;
  std::function<nlohmann::json(const ModelConfig&)> hf_write_config;
};

// Family::make for a model class constructed from its configuration.
template <class M>
std::unique_ptr<Model> make_as(const ModelConfig& c) {
  return std::make_unique<M>(c);
}

void register_family(Family f);
// The family of that name; an unknown one is an error listing the known families.
const Family& family(const std::string& name);
std::vector<std::string> family_names();
// The family whose record reads that config.json model_type; nullptr when none does.
const Family* family_reading(const std::string& model_type);

// Small helpers for the name maps.
inline bool starts_with(const std::string& s, const std::string& pre) { return s.rfind(pre, 0) == 0; }
inline bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace sb::models
