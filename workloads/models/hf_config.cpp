// config.json <-> ModelConfig for the two families we implement. Field names and defaults are
// transformers' (GPT2Config, BertConfig); a field we cannot honour is refused by name rather
// than ignored, because a silently different model would benchmark the wrong thing.
#include "workloads/models/hf_config.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"

namespace sb::models {
namespace {

using Json = nlohmann::json;

// One config.json being read: every message names the file and the field.
struct Reader {
  std::string file;
  Json j;

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }

  std::int64_t positive(const char* k) const {
    SB_CHECK(has(k), "{}: field '{}' is missing (a {} config.json has it)", file, k,
             j.value("model_type", std::string("?")));
    SB_CHECK(j[k].is_number_integer() && j[k].get<std::int64_t>() > 0,
             "{}: field '{}' is {}; it must be a positive integer", file, k, j[k].dump());
    return j[k].get<std::int64_t>();
  }
  double number(const char* k, double fallback) const {
    if (!has(k)) return fallback;
    SB_CHECK(j[k].is_number() && j[k].get<double>() > 0,
             "{}: field '{}' is {}; it must be a positive number", file, k, j[k].dump());
    return j[k].get<double>();
  }
  std::string text(const char* k, const std::string& fallback) const {
    if (!has(k)) return fallback;
    SB_CHECK(j[k].is_string(), "{}: field '{}' is {}; it must be a string", file, k, j[k].dump());
    return j[k].get<std::string>();
  }
  // A feature we do not implement: refused unless absent or at its harmless value.
  void must_be(const char* k, const Json& ok, const char* why) const {
    if (has(k) && j[k] != ok)
      SB_FAIL("{}: field '{}' is {}; shardbench supports only {} ({})", file, k, j[k].dump(),
              ok.dump(), why);
  }
  void one_of(const char* k, const std::string& v, std::initializer_list<const char*> ok,
              const char* why) const {
    for (const char* o : ok)
      if (v == o) return;
    std::string list;
    for (const char* o : ok) list += (list.empty() ? "" : ", ") + std::string(o);
    SB_FAIL("{}: field '{}' is \"{}\"; shardbench supports {} ({})", file, k, v, list, why);
  }
};

Reader read(const std::string& dir) {
  Reader r;
  r.file = dir + "/config.json";
  struct stat st;
  SB_REQUIRE(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
             "model folder '{}' does not exist (model = a preset name or a local Hugging Face "
             "folder with config.json and model.safetensors)", dir);
  std::ifstream f(r.file);
  SB_REQUIRE(f.good(), "model folder '{}' has no config.json (a Hugging Face model folder holds "
                       "config.json and model.safetensors)", dir);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    r.j = Json::parse(ss.str());
  } catch (const std::exception& e) {
    SB_FAIL("{}: not valid JSON: {}", r.file, e.what());
  }
  SB_CHECK(r.j.is_object(), "{}: the top level must be a JSON object", r.file);
  return r;
}

// Shared by both families: cross-attention and decoder use are not implemented.
void common_checks(const Reader& r) {
  r.must_be("add_cross_attention", false, "no encoder-decoder cross-attention");
  r.must_be("is_encoder_decoder", false, "no encoder-decoder models");
}

ModelConfig gpt2_config(const Reader& r, const std::string& dir) {
  common_checks(r);
  ModelConfig c;
  c.family = "gpt2", c.preset = dir;
  c.n_layer = r.positive("n_layer");
  c.n_head = r.positive("n_head");
  c.d_model = r.positive("n_embd");
  c.vocab = r.positive("vocab_size");
  c.max_pos = r.positive("n_positions");
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

// id2label (its count is the label count, its names kept for export) or num_labels.
std::int64_t read_labels(const Reader& r, std::vector<std::string>& names) {
  if (r.has("id2label")) {
    const Json& m = r.j["id2label"];
    SB_CHECK(m.is_object() && !m.empty(), "{}: field 'id2label' must be a non-empty object",
             r.file);
    names.assign(m.size(), "");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      const bool digits = !k.empty() && k.size() < 10 && k.find_first_not_of("0123456789") == std::string::npos;
      const std::size_t id = digits ? std::stoul(k) : names.size();
      SB_CHECK(id < names.size() && it.value().is_string(),
               "{}: field 'id2label' must map the ids \"0\" ... \"{}\" to names; it has \"{}\": {}",
               r.file, names.size() - 1, k, it.value().dump());
      names[id] = it.value().get<std::string>();
    }
    return static_cast<std::int64_t>(m.size());
  }
  return r.has("num_labels") ? r.positive("num_labels") : 2;  // transformers' default
}

ModelConfig bert_config(const Reader& r, const std::string& dir) {
  common_checks(r);
  ModelConfig c;
  c.family = "bert", c.preset = dir;
  c.n_layer = r.positive("num_hidden_layers");
  c.n_head = r.positive("num_attention_heads");
  c.d_model = r.positive("hidden_size");
  c.d_ff = r.positive("intermediate_size");
  c.vocab = r.positive("vocab_size");
  c.max_pos = r.positive("max_position_embeddings");
  c.type_vocab = r.has("type_vocab_size") ? r.positive("type_vocab_size") : 2;
  c.ln_eps = r.number("layer_norm_eps", 1e-12);
  std::vector<std::string> names;
  c.num_labels = read_labels(r, names);
  r.one_of("hidden_act", r.text("hidden_act", "gelu"), {"gelu"}, "BERT's erf GELU");
  r.one_of("position_embedding_type", r.text("position_embedding_type", "absolute"),
           {"absolute"}, "learned absolute positions");
  r.must_be("is_decoder", false, "BERT as an encoder");
  return c;
}

}  // namespace

bool is_model_path(const std::string& model) { return model.find('/') != std::string::npos; }

ModelConfig hf_folder_config(const std::string& dir) {
  const Reader r = read(dir);
  SB_CHECK(r.has("model_type"), "{}: field 'model_type' is missing (\"gpt2\" or \"bert\")",
           r.file);
  const std::string type = r.text("model_type", "");
  ModelConfig c;
  if (type == "gpt2") c = gpt2_config(r, dir);
  else if (type == "bert") c = bert_config(r, dir);
  else SB_FAIL("{}: field 'model_type' is \"{}\"; shardbench implements \"gpt2\" and \"bert\"",
               r.file, type);
  SB_CHECK(c.d_model % c.n_head == 0, "{}: the hidden size {} is not a multiple of the {} heads",
           r.file, c.d_model, c.n_head);
  return c;
}

std::vector<std::string> hf_folder_labels(const std::string& dir) {
  std::vector<std::string> names;
  read_labels(read(dir), names);
  return names;
}

std::string hf_config_json(const ModelConfig& c, const std::vector<std::string>& label_names) {
  SB_CHECK(c.attn_width() == c.d_model, "model {}: {} heads of {} make an attention width of {}, not its "
           "hidden size {} (heads were pruned): a Hugging Face config has no field for that, so the "
           "folder could not be loaded; export the model before heads pruning, or prune ffn",
           c.preset, c.n_head, c.dh(), c.attn_width(), c.d_model);
  Json j;
  if (c.family == "gpt2") {
    j = {{"model_type", "gpt2"},          {"architectures", {"GPT2LMHeadModel"}},
         {"n_layer", c.n_layer},          {"n_head", c.n_head},
         {"n_embd", c.d_model},           {"n_inner", c.d_ff},
         {"vocab_size", c.vocab},         {"n_positions", c.max_pos},
         {"n_ctx", c.max_pos},            {"layer_norm_epsilon", c.ln_eps},
         {"activation_function", "gelu_new"}, {"tie_word_embeddings", true},
         {"bos_token_id", c.vocab - 1},   {"eos_token_id", c.vocab - 1}};
  } else if (c.family == "bert") {
    // Both maps, as transformers writes them: pipeline("text-classification") reports
    // id2label's names.
    Json labels = Json::object(), ids = Json::object();
    for (std::int64_t i = 0; i < c.num_labels; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const std::string name = k < label_names.size() && !label_names[k].empty()
                                   ? label_names[k] : "LABEL_" + std::to_string(i);
      SB_CHECK(!ids.contains(name), "model {}: label name '{}' is given to two ids; "
               "config.json's label2id needs distinct names", c.preset, name);
      labels[std::to_string(i)] = name;
      ids[name] = i;
    }
    j = {{"model_type", "bert"},
         {"architectures", {"BertForMaskedLM", "BertForSequenceClassification"}},
         {"num_hidden_layers", c.n_layer},
         {"num_attention_heads", c.n_head},
         {"hidden_size", c.d_model},
         {"intermediate_size", c.d_ff},
         {"vocab_size", c.vocab},
         {"max_position_embeddings", c.max_pos},
         {"type_vocab_size", c.type_vocab},
         {"layer_norm_eps", c.ln_eps},
         {"hidden_act", "gelu"},
         {"position_embedding_type", "absolute"},
         {"id2label", labels},
         {"label2id", ids}};
  } else {
    SB_FAIL("hf_config_json: family '{}' has no Hugging Face config", c.family);
  }
  return j.dump(2) + "\n";
}

}  // namespace sb::models
