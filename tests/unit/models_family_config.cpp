// A model family reads and writes its own Hugging Face config.json (Family::hf_model_types,
// hf_read_config, hf_write_config): a family registered from this file, with its own
// model_type and field names, is read from a folder and written back through its record
// alone; an unknown model_type lists what the registered families read; GPT-2's and BERT's
// config.json are byte for byte what export wrote before the records held them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "tests/unit/test_error.h"
#include "tests/unit/test_tmp.h"
#include "workloads/models/bert.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/hf_config_reader.h"
#include "workloads/models/model.h"

using namespace sb::models;
namespace fs = std::filesystem;

namespace {

// "toy": our BERT under another config.json spelling, read as model_type "toy" or "toy_v0".
const sb::Registrar kToy([] {
  Family f;
  f.name = "toy";
  f.objective = Objective::MaskedLm;
  f.eval_metric = "mlm_accuracy";
  f.classifies = true;
  f.make = [](const ModelConfig& c) -> std::unique_ptr<Model> { return std::make_unique<Bert>(c); };
  f.hf_name = [](const std::string& n) { return n; };
  f.hf_skip = [](const std::string&) { return std::string(); };
  f.hf_transposed = [](const std::string&) { return false; };
  f.hf_model_types = {"toy", "toy_v0"};
  f.hf_read_config = [](const HfConfigReader& r) {
    ModelConfig c;
    c.n_layer = r.positive("depth");
    c.n_head = r.positive("heads");
    c.d_model = r.positive("width");
    c.d_ff = r.has("ffn") ? r.positive("ffn") : 4 * c.d_model;
    c.vocab = r.positive("tokens");
    c.max_pos = r.positive("context");
    c.ln_eps = r.number("eps", 1e-12);
    r.one_of("act", r.text("act", "gelu"), {"gelu"}, "the toy's GELU");
    return c;
  };
  f.hf_write_config = [](const ModelConfig& c) -> nlohmann::json {
    return {{"model_type", "toy"}, {"depth", c.n_layer}, {"heads", c.n_head},
            {"width", c.d_model},  {"ffn", c.d_ff},      {"tokens", c.vocab},
            {"context", c.max_pos}, {"eps", c.ln_eps}};
  };
  register_family(std::move(f));
});

std::string folder_with(const std::string& name, const std::string& config_json) {
  const std::string d = sb::test::tmp() + name;
  fs::create_directories(d);
  std::ofstream(d + "/config.json") << config_json;
  return d;
}

using sb::test::error_of;

}  // namespace

TEST(FamilyConfig, AFamilyReadsItsOwnConfigJson) {
  const std::string dir = folder_with(
      "toy", R"({"model_type": "toy_v0", "depth": 2, "heads": 4, "width": 64, "ffn": 256,
                 "tokens": 128, "context": 128, "id2label": {"0": "neg", "1": "neu", "2": "pos"}})");
  const ModelConfig c = hf_folder_config(dir);
  EXPECT_EQ(c.family, "toy");
  EXPECT_EQ(c.preset, dir);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.d_ff, 256);
  EXPECT_EQ(c.vocab, 128);
  EXPECT_EQ(c.max_pos, 128);
  EXPECT_EQ(c.ln_eps, 1e-12);
  EXPECT_EQ(c.num_labels, 3);  // the family classifies: the label maps are read for it
  // `model = <folder>` builds the family's model: bert-tiny's sizes, so its parameters.
  auto m = make_model(dir);
  EXPECT_EQ(m->config().family, "toy");
  ModelConfig tiny = preset_config("bert-tiny");
  tiny.num_labels = 3;
  EXPECT_EQ(count_params(m->units()), count_params(Bert(tiny).units()));
  // The reader's checks name the file, the field and its value.
  const std::string bad =
      folder_with("toy_bad", R"({"model_type": "toy", "depth": 0, "heads": 4})");
  EXPECT_NE(error_of([&] { hf_folder_config(bad); })
                .find(bad + "/config.json: field 'depth' is 0; it must be a positive integer"),
            std::string::npos);
  const std::string relu = folder_with(
      "toy_relu", R"({"model_type": "toy", "depth": 1, "heads": 4, "width": 64, "tokens": 8,
                      "context": 8, "act": "relu"})");
  EXPECT_NE(error_of([&] { hf_folder_config(relu); })
                .find("field 'act' is \"relu\"; shardbench supports gelu (the toy's GELU)"),
            std::string::npos);
}

TEST(FamilyConfig, AFamilyWritesItsOwnConfigJson) {
  ModelConfig c;
  c.family = "toy", c.preset = "toy-test";
  c.n_layer = 3, c.n_head = 2, c.d_model = 32, c.d_ff = 48, c.vocab = 100, c.max_pos = 64;
  c.ln_eps = 1e-6, c.num_labels = 2;
  EXPECT_EQ(hf_config_json(c, {"", "yes"}), R"({
  "context": 64,
  "depth": 3,
  "eps": 1e-06,
  "ffn": 48,
  "heads": 2,
  "id2label": {
    "0": "LABEL_0",
    "1": "yes"
  },
  "label2id": {
    "LABEL_0": 0,
    "yes": 1
  },
  "model_type": "toy",
  "tokens": 100,
  "width": 32
}
)");
  // What it writes, it reads back.
  const std::string dir = folder_with("toy_back", hf_config_json(c));
  const ModelConfig back = hf_folder_config(dir);
  EXPECT_EQ(back.family, "toy");
  EXPECT_EQ(back.n_layer, 3);
  EXPECT_EQ(back.d_ff, 48);
  EXPECT_EQ(back.ln_eps, 1e-6);
}

TEST(FamilyConfig, AnUnknownOrMissingModelTypeListsWhatTheFamiliesRead) {
  const std::string t5 = folder_with("t5", R"({"model_type": "t5"})");
  const std::string e = error_of([&] { hf_folder_config(t5); });
  EXPECT_NE(e.find(t5 + "/config.json: field 'model_type' is \"t5\"; shardbench implements "
                        "\"gpt2\", \"bert\", \"shardbench-gpt2-moe\", \"toy\" and \"toy_v0\""),
            std::string::npos) << e;
  const std::string none = folder_with("no_type", R"({"n_layer": 2})");
  const std::string m = error_of([&] { hf_folder_config(none); });
  EXPECT_NE(m.find(none + "/config.json: field 'model_type' is missing (\"gpt2\", \"bert\", "
                          "\"shardbench-gpt2-moe\", \"toy\" or \"toy_v0\")"),
            std::string::npos) << m;
}

TEST(FamilyConfig, TwoFamiliesCannotReadOneModelType) {
  Family dup = family("toy");
  dup.name = "toy2";
  dup.hf_model_types = {"toy_v1", "toy_v0"};
  const std::string e = error_of([&] { register_family(dup); });
  EXPECT_NE(e.find("model families 'toy' and 'toy2' both read config.json model_type 'toy_v0'"),
            std::string::npos) << e;
  EXPECT_EQ(family_names(), (std::vector<std::string>{"bert", "gpt2", "gpt2-moe", "toy"}));
}

// The records write what export wrote before they held the fields (captured from
// `shardbench sweep` with export_folder on gpt2-tiny and bert-tiny at 90a4530).
TEST(FamilyConfig, Gpt2AndBertWriteTheSameConfigJsonAsBefore) {
  EXPECT_EQ(hf_config_json(preset_config("gpt2-tiny")), R"({
  "activation_function": "gelu_new",
  "architectures": [
    "GPT2LMHeadModel"
  ],
  "bos_token_id": 255,
  "eos_token_id": 255,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 128,
  "n_embd": 64,
  "n_head": 4,
  "n_inner": 256,
  "n_layer": 2,
  "n_positions": 128,
  "tie_word_embeddings": true,
  "vocab_size": 256
}
)");
  EXPECT_EQ(hf_config_json(preset_config("bert-tiny")), R"({
  "architectures": [
    "BertForMaskedLM",
    "BertForSequenceClassification"
  ],
  "hidden_act": "gelu",
  "hidden_size": 64,
  "id2label": {
    "0": "LABEL_0",
    "1": "LABEL_1"
  },
  "intermediate_size": 256,
  "label2id": {
    "LABEL_0": 0,
    "LABEL_1": 1
  },
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 128,
  "model_type": "bert",
  "num_attention_heads": 4,
  "num_hidden_layers": 2,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 128
}
)");
}
