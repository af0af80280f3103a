// Local Hugging Face model folders (the Realdata issue): an exported folder (config.json +
// model.safetensors) loads back as `model = <folder>` with the same configuration and
// logits; a sharded folder (index + shards) loads the same tensors; every config.json field
// we cannot honour is an error naming the file, the field and its value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "tests/unit/test_error.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/safetensors.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using namespace sb;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string d = sb::test::tmp() + "hf_" + name;
  fs::remove_all(d);
  return d;
}

models::Batch tokens(std::int64_t vocab) {
  models::Batch b;
  b.input_ids = torch::arange(16, torch::kLong).remainder(vocab).view({2, 8});
  return b;
}

torch::Tensor logits(models::Model& m, const models::UnitTensors& w) {
  models::PersistentParams p(w);
  torch::NoGradGuard ng;
  return m.logits(p, tokens(m.config().vocab));
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(); }

nlohmann::json config_of(const std::string& dir) {
  std::ifstream f(dir + "/config.json");
  return nlohmann::json::parse(f);
}

using sb::test::error_of;

}  // namespace

TEST(HfFolder, ExportedFolderLoadsBackWithItsConfigAndLogits) {
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto m = models::make_model(preset);
    auto w = models::init_params(m->units(), 7);
    const std::string dir = fresh_dir(preset);
    data::export_hf_folder(*m, w, dir);
    ASSERT_TRUE(models::is_model_path(dir));
    const auto a = m->config(), b = models::preset_config(dir);
    EXPECT_EQ(b.family, a.family);
    EXPECT_EQ(b.preset, dir);
    EXPECT_EQ(b.vocab, a.vocab);
    EXPECT_EQ(b.max_pos, a.max_pos);
    EXPECT_EQ(b.d_model, a.d_model);
    EXPECT_EQ(b.n_layer, a.n_layer);
    EXPECT_EQ(b.n_head, a.n_head);
    EXPECT_EQ(b.d_ff, a.d_ff);
    EXPECT_EQ(b.ln_eps, a.ln_eps);
    EXPECT_EQ(b.type_vocab, a.type_vocab);
    EXPECT_EQ(b.num_labels, a.num_labels);
    auto back = models::make_model(dir);
    EXPECT_EQ(models::count_params(back->units()), models::count_params(m->units()));
    const auto w2 = data::load_checkpoint(*back, dir);
    EXPECT_TRUE(torch::equal(logits(*m, w), logits(*back, w2))) << preset;
    // transformers' names: GPT-2 without prefix, Conv1D (in, out); BERT under bert.
    const auto cfg = config_of(dir);
    EXPECT_EQ(cfg.at("model_type"), std::string(preset).substr(0, 4) == "gpt2" ? "gpt2" : "bert");
    auto raw = data::read_safetensors(dir + "/model.safetensors");
    if (cfg["model_type"] == "gpt2")
      EXPECT_EQ(raw.at("h.0.mlp.c_fc.weight").sizes(), (std::vector<std::int64_t>{64, 256}));
    else
      EXPECT_TRUE(raw.count("bert.encoder.layer.1.output.dense.weight"));
  }
}

TEST(HfFolder, ANonSquareFfnAndItsLabelsComeFromTheConfig) {
  auto m = models::make_model("bert-tiny");
  const std::string dir = fresh_dir("bert_ffn");
  data::export_hf_folder(*m, models::init_params(m->units(), 1), dir);
  auto cfg = config_of(dir);
  cfg["intermediate_size"] = 96;
  cfg["id2label"] = {{"0", "neg"}, {"1", "neu"}, {"2", "pos"}};
  write_json(dir + "/config.json", cfg);
  const auto c = models::preset_config(dir);
  EXPECT_EQ(c.d_ff, 96);
  EXPECT_EQ(c.num_labels, 3);
  auto back = models::make_model(dir);
  auto w = models::init_params(back->units(), 2);
  models::PersistentParams p(w);
  auto b = tokens(c.vocab);
  EXPECT_EQ(back->classify(p, b).sizes(), (std::vector<std::int64_t>{2, 3}));
  // The names travel: read back, kept by an export of the folder's model, and replaced by the
  // labelled data's names where export is given them (the ids training used).
  using Names = std::vector<std::string>;
  EXPECT_EQ(models::hf_folder_labels(dir), (Names{"neg", "neu", "pos"}));
  const std::string again = fresh_dir("bert_ffn_again");
  data::export_hf_folder(*back, w, again);
  EXPECT_EQ(config_of(again)["id2label"], nlohmann::json({{"0", "neg"}, {"1", "neu"}, {"2", "pos"}}));
  EXPECT_EQ(config_of(again)["label2id"], nlohmann::json({{"neg", 0}, {"neu", 1}, {"pos", 2}}));
  data::export_hf_folder(*back, w, again, {{"bad", "good"}, ""});
  EXPECT_EQ(models::hf_folder_labels(again), (Names{"bad", "good", "pos"}));
  // A preset has no names: LABEL_<i>, as transformers writes them.
  data::export_hf_folder(*m, models::init_params(m->units(), 1), again);
  EXPECT_EQ(models::hf_folder_labels(again), (Names{"LABEL_0", "LABEL_1"}));
  EXPECT_NE(error_of([&] { data::export_hf_folder(*m, models::init_params(m->units(), 1), again,
                                                  {{"a", "b", "c"}, ""}); })
                .find("3 label names for a model of 2 labels"),
            std::string::npos);
  cfg["id2label"] = {{"0", "neg"}, {"2", "pos"}};
  write_json(dir + "/config.json", cfg);
  EXPECT_NE(error_of([&] { models::preset_config(dir); })
                .find("field 'id2label' must map the ids \"0\" ... \"1\" to names; it has \"2\""),
            std::string::npos);
}

TEST(HfFolder, AShardedFolderLoadsTheSameTensors) {
  auto m = models::make_model("gpt2-tiny");
  auto w = models::init_params(m->units(), 3);
  const std::string one = fresh_dir("single"), two = fresh_dir("sharded");
  data::export_hf_folder(*m, w, one);
  fs::create_directories(two);
  fs::copy_file(one + "/config.json", two + "/config.json");
  // Two shards, split by tensor name, and the index transformers writes beside them.
  const auto all = data::read_safetensors(one + "/model.safetensors");
  std::vector<std::pair<std::string, torch::Tensor>> s1, s2;
  nlohmann::json map;
  for (const auto& [name, t] : all) {
    const bool first = name.rfind("h.1.", 0) != 0;
    (first ? s1 : s2).emplace_back(name, t);
    map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  data::write_safetensors(two + "/model-00001-of-00002.safetensors", s1);
  data::write_safetensors(two + "/model-00002-of-00002.safetensors", s2);
  write_json(two + "/model.safetensors.index.json",
             {{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
  auto back = models::make_model(two);
  const auto w2 = data::load_checkpoint(*back, two);
  for (std::size_t u = 0; u < w.size(); ++u)
    for (std::size_t i = 0; i < w[u].size(); ++i) EXPECT_TRUE(torch::equal(w[u][i], w2[u][i]));
  // A shard the index names but the folder lacks is named.
  fs::remove(two + "/model-00002-of-00002.safetensors");
  const auto e = error_of([&] { data::load_checkpoint(*back, two); });
  EXPECT_NE(e.find("shard 'model-00002-of-00002.safetensors'"), std::string::npos) << e;
  EXPECT_NE(e.find("is missing"), std::string::npos) << e;
}

TEST(HfFolder, UnsupportedFieldsAreNamedWithTheirValue) {
  auto gm = models::make_model("gpt2-tiny");
  auto bm = models::make_model("bert-tiny");
  struct Case {
    bool gpt2;
    const char* field;
    nlohmann::json value;  // null: remove the field
    const char* expect;
  };
  const std::vector<Case> cases = {
      {true, "model_type", "t5", "field 'model_type' is \"t5\"; shardbench implements \"gpt2\", \"bert\" and \"shardbench-gpt2-moe\""},
      {true, "activation_function", "relu", "field 'activation_function' is \"relu\"; shardbench supports gelu_new, gelu_pytorch_tanh"},
      {true, "add_cross_attention", true, "field 'add_cross_attention' is true; shardbench supports only false"},
      {true, "tie_word_embeddings", false, "field 'tie_word_embeddings' is false; shardbench supports only true"},
      {true, "n_layer", nullptr, "field 'n_layer' is missing"},
      {true, "n_head", 0, "field 'n_head' is 0; it must be a positive integer"},
      {true, "n_embd", 63, "the hidden size 63 is not a multiple of the 4 heads"},
      {false, "hidden_act", "gelu_new", "field 'hidden_act' is \"gelu_new\"; shardbench supports gelu"},
      {false, "position_embedding_type", "relative_key", "field 'position_embedding_type' is \"relative_key\""},
      {false, "is_decoder", true, "field 'is_decoder' is true"},
  };
  for (const auto& c : cases) {
    const std::string dir = fresh_dir(std::string("bad_") + c.field);
    auto& m = c.gpt2 ? *gm : *bm;
    fs::create_directories(dir);
    auto cfg = nlohmann::json::parse(models::hf_config_json(m.config()));
    if (c.value.is_null()) cfg.erase(c.field);
    else cfg[c.field] = c.value;
    write_json(dir + "/config.json", cfg);
    const auto e = error_of([&] { models::preset_config(dir); });
    EXPECT_NE(e.find(dir + "/config.json: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.field << ": " << e;
  }
  const std::string none = fresh_dir("no_config");
  fs::create_directories(none);
  EXPECT_NE(error_of([&] { models::preset_config(none); }).find("has no config.json"),
            std::string::npos);
  EXPECT_NE(error_of([&] { models::preset_config(none + "/absent"); }).find("does not exist"),
            std::string::npos);
}
