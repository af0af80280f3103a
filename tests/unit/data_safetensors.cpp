// safetensors: our writer round-trips; a file written by an independent Python writer
// (tests/data/make_gpt2_safetensors.py: json + struct) loads with Hugging Face names,
// F16/BF16 conversion, Conv1D transposition and skipped buffers; errors are precise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/safetensors.h"
#include "workloads/data/tokenizer.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using namespace sb;

TEST(Safetensors, RoundTripGpt2AndBert) {
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto m = models::make_model(preset);
    auto w = models::init_params(m->units(), 4);
    const std::string path = sb::test::tmp() + preset + ".safetensors";
    data::save_checkpoint(*m, w, path);
    auto back = data::load_checkpoint(*m, path);
    for (std::size_t u = 0; u < w.size(); ++u)
      for (std::size_t i = 0; i < w[u].size(); ++i) EXPECT_TRUE(torch::equal(w[u][i], back[u][i])) << preset;
    // On disk GPT-2's Conv1D weights are (in, out), as Hugging Face stores them.
    auto raw = data::read_safetensors(path);
    if (std::string(preset) == "gpt2-tiny") {
      EXPECT_EQ(raw.at("h.0.attn.c_attn.weight").sizes(), (std::vector<std::int64_t>{64, 192}));
      EXPECT_TRUE(torch::equal(raw.at("h.0.attn.c_attn.weight"), w[1][2].t()));
    }
  }
}

TEST(Safetensors, PythonWrittenGpt2Fixture) {
  const std::string path = sb::test::tmp() + "python_gpt2.safetensors";
  const std::string cmd = "/usr/bin/python3 " SB_SOURCE_DIR "/tests/data/make_gpt2_safetensors.py " + path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto m = models::make_model("gpt2-tiny");
  auto w = data::load_checkpoint(*m, path);
  // File order of the tensors (the k in sin(0.01 i + k)), as the script writes them.
  std::vector<std::string> order = {"wte.weight", "wpe.weight"};
  for (int l = 0; l < 2; ++l)
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
                          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      order.push_back("h." + std::to_string(l) + "." + s);
  order.push_back("ln_f.weight"), order.push_back("ln_f.bias");
  int checked = 0;
  for (std::size_t u = 0; u < w.size(); ++u)
    for (std::size_t i = 0; i < w[u].size(); ++i) {
      const auto& spec = m->units()[u].params[i];
      const auto k = std::find(order.begin(), order.end(), spec.name) - order.begin();
      ASSERT_LT(k, static_cast<long>(order.size())) << spec.name;
      const bool conv = spec.name.find(".c_") != std::string::npos && spec.name.find("weight") != std::string::npos;
      auto file_layout = conv ? w[u][i].t().contiguous() : w[u][i];
      auto idx = torch::arange(file_layout.numel(), torch::kFloat64);
      auto want = torch::sin(idx * 0.01 + static_cast<double>(k)).to(torch::kFloat32).view(file_layout.sizes());
      const double tol = spec.name == "wte.weight" ? 1e-3 : spec.name == "wpe.weight" ? 8e-3 : 0.0;
      EXPECT_LE((file_layout - want).abs().max().item<double>(), tol) << spec.name;
      ++checked;
    }
  EXPECT_EQ(checked, 2 + 2 * 12 + 2);
}

TEST(Safetensors, BertModelCheckpointWithoutHeads) {
  // A BertModel file: no "bert." prefix, legacy gamma/beta names, no cls.* / classifier.*.
  auto m = models::make_model("bert-tiny");
  auto w = models::init_params(m->units(), 4);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (std::size_t u = 0; u < w.size(); ++u)
    for (std::size_t i = 0; i < w[u].size(); ++i) {
      std::string n = m->units()[u].params[i].name;
      if (n.rfind("cls.", 0) == 0 || n.rfind("classifier.", 0) == 0) continue;
      if (n.rfind("bert.", 0) == 0) n = n.substr(5);
      if (n == "embeddings.LayerNorm.weight") n = "embeddings.LayerNorm.gamma";
      named.emplace_back(n, w[u][i]);
    }
  const std::string path = sb::test::tmp() + "bertmodel.safetensors";
  data::write_safetensors(path, named);
  data::CheckpointLoadOptions opt;
  opt.seed = 4;
  auto back = data::load_checkpoint(*m, path, opt);
  for (std::size_t u = 0; u < w.size(); ++u)
    for (std::size_t i = 0; i < w[u].size(); ++i) EXPECT_TRUE(torch::equal(w[u][i], back[u][i]));
  opt.init_missing_heads = false;
  try {
    data::load_checkpoint(*m, path, opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks 7 tensors of model 'bert-tiny': cls.predictions.transform.dense.weight"),
              std::string::npos) << e.what();
  }
}

namespace {

// The file's tensors (fp32, Hugging Face names) of a checkpoint save_checkpoint writes.
std::vector<std::pair<std::string, torch::Tensor>> saved_tensors(const models::Model& m,
                                                                 const models::UnitTensors& w,
                                                                 const std::string& path) {
  data::save_checkpoint(m, w, path);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& [name, t] : data::read_safetensors(path)) out.emplace_back(name, t);
  return out;
}

void expect_same(const models::UnitTensors& a, const models::UnitTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t u = 0; u < a.size(); ++u)
    for (std::size_t i = 0; i < a[u].size(); ++i) EXPECT_TRUE(torch::equal(a[u][i], b[u][i])) << u << "." << i;
}

// The message of the sb::Error `f` throws ("" when none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

// transformers 4.x saved integer buffers (BERT's position_ids as I64; GPT-2's causal mask as
// BOOL or U8): they are skipped, whatever their dtype, and the note says which and why.
TEST(Safetensors, IntegerBuffersOfTransformers4AreSkippedWithANote) {
  auto bert = models::make_model("bert-tiny");
  auto w = models::init_params(bert->units(), 5);
  const std::string path = sb::test::tmp() + "bert_4x.safetensors";
  auto named = saved_tensors(*bert, w, path);
  named.emplace_back("bert.embeddings.position_ids", torch::arange(128, torch::kLong).view({1, 128}));
  named.emplace_back("bert.embeddings.token_type_ids", torch::zeros({1, 128}, torch::kLong));
  data::write_safetensors(path, named);
  const auto header = data::read_safetensors_header(path);
  EXPECT_EQ(header.at("bert.embeddings.position_ids").dtype_name, "I64");
  EXPECT_EQ(header.at("bert.embeddings.position_ids").bytes, 128 * 8);
  EXPECT_FALSE(header.at("bert.embeddings.position_ids").parameter_dtype());
  EXPECT_TRUE(header.at("bert.embeddings.word_embeddings.weight").parameter_dtype());
  std::string note;
  expect_same(w, data::load_checkpoint(*bert, path, {}, &note));
  EXPECT_EQ(note, "checkpoint '" + path + "': skipped 2 tensors that are not parameters "
                  "(position-ids buffer: bert.embeddings.position_ids [I64]; token-type-ids "
                  "buffer: bert.embeddings.token_type_ids [I64])");
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", path), "");

  auto gpt2 = models::make_model("gpt2-tiny");
  auto g = models::init_params(gpt2->units(), 6);
  const std::string gpath = sb::test::tmp() + "gpt2_4x.safetensors";
  named = saved_tensors(*gpt2, g, gpath);
  auto mask = torch::ones({128, 128}, torch::kBool).tril().view({1, 1, 128, 128});
  named.emplace_back("h.0.attn.bias", mask);
  named.emplace_back("h.1.attn.bias", mask.to(torch::kUInt8));
  named.emplace_back("h.0.attn.masked_bias", torch::tensor(-1e4));
  named.emplace_back("lm_head.weight", g[0][0]);
  data::write_safetensors(gpath, named);
  data::CheckpointReader r(*gpt2, gpath);
  models::UnitTensors back;
  for (int u = 0; u < static_cast<int>(gpt2->units().size()); ++u) back.push_back(r.unit(u));
  expect_same(g, back);
  EXPECT_EQ(r.skipped().size(), 4u);
  EXPECT_EQ(r.note(), "checkpoint '" + gpath + "': skipped 4 tensors that are not parameters "
                      "(causal-mask buffer: h.0.attn.bias [BOOL], h.1.attn.bias [U8]; masked-bias "
                      "buffer: h.0.attn.masked_bias [F32]; LM head, tied to wte: lm_head.weight [F32])");
  // Nothing skipped or initialised: no note.
  data::save_checkpoint(*gpt2, g, gpath);
  EXPECT_EQ(data::CheckpointReader(*gpt2, gpath).note(), "");
}

// An integer tensor where a parameter is expected is an error naming it, from the headers
// alone: what `plan` reports (checkpoint_problem) before a sweep.
TEST(Safetensors, AParameterStoredAsIntegersIsAnErrorNamingIt) {
  auto m = models::make_model("bert-tiny");
  const std::string path = sb::test::tmp() + "bert_int.safetensors";
  auto named = saved_tensors(*m, models::init_params(m->units(), 1), path);
  for (auto& [name, t] : named)
    if (name == "bert.embeddings.word_embeddings.weight") t = t.mul(100).to(torch::kInt32);
  data::write_safetensors(path, named);
  const std::string want = "checkpoint '" + path + "': parameter tensor "
      "'bert.embeddings.word_embeddings.weight' (I32) of model 'bert-tiny' is stored as integers; "
      "a parameter needs F32, F16, BF16 or F64 (re-save the model in floating point)";
  EXPECT_EQ(error_of([&] { data::load_checkpoint(*m, path); }), want);
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", path), want);
  // A missing tensor and a wrong shape, the same way.
  named.erase(std::remove_if(named.begin(), named.end(), [](const auto& n) {
    return n.first == "bert.embeddings.word_embeddings.weight" || n.first == "bert.pooler.dense.bias";
  }), named.end());
  data::write_safetensors(path, named);
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", path),
            "checkpoint '" + path + "' lacks 1 tensors of model 'bert-tiny': "
            "bert.embeddings.word_embeddings.weight");
  named.emplace_back("bert.embeddings.word_embeddings.weight", torch::zeros({64, 64}));
  data::write_safetensors(path, named);
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", path),
            "checkpoint '" + path + "': tensor 'bert.embeddings.word_embeddings.weight' has shape "
            "(64, 64), model 'bert-tiny' expects (128, 64); wrong preset?");
  // Nothing to check yet: the task warns about a missing path, the model check a bad model.
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", path + ".absent"), "");
  EXPECT_EQ(data::checkpoint_problem("bert-absent", path), "");
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", ""), "");
}

// A folder with PyTorch's pytorch_model.bin only is refused with the conversion to run.
TEST(Safetensors, AFolderWithOnlyPytorchBinIsRefusedWithTheConversion) {
  auto m = models::make_model("bert-tiny");
  const std::string dir = sb::test::tmp() + "bin_only";
  data::export_hf_folder(*m, models::init_params(m->units(), 1), dir);
  std::filesystem::rename(dir + "/model.safetensors", dir + "/pytorch_model.bin");
  EXPECT_EQ(error_of([&] { data::load_checkpoint(*m, dir); }),
            "model folder '" + dir + "' holds pytorch_model.bin (PyTorch's pickle format) but no "
            "model.safetensors: shardbench reads safetensors only; convert it once, weights "
            "unchanged, with `.venv/bin/python suite/data/convert_to_safetensors.py " + dir +
            "` (from the shardbench checkout; docs/DATA.md)");
  std::filesystem::remove(dir + "/pytorch_model.bin");
  EXPECT_EQ(data::checkpoint_problem("bert-tiny", dir),
            "model folder '" + dir + "' has no weights: it needs model.safetensors, or "
            "model.safetensors.index.json and its shards (transformers' save_pretrained writes "
            "them); a train point may start from seeded weights instead: init = \"seed\"");
}

TEST(Safetensors, WrongPresetIsAnError) {
  auto tiny = models::make_model("gpt2-tiny");
  const std::string path = sb::test::tmp() + "tiny.safetensors";
  data::save_checkpoint(*tiny, models::init_params(tiny->units(), 1), path);
  try {
    data::load_checkpoint(*models::make_model("bert-tiny"), path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks"), std::string::npos) << e.what();
  }
}

namespace {

// A tokenizer folder for an export: BERT's vocab.txt and a tokenizer_config.json, or GPT-2's
// vocab.json + merges.txt (byte symbols and a few merges); notes.txt must not be copied.
std::string tokenizer_folder(const std::string& family) {
  const std::string dir = sb::test::tmp() + "tok_" + family;
  std::filesystem::create_directories(dir);
  if (family == "bert") {
    std::ofstream(dir + "/vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nfine\nfilm\ndull\n"
                                         "!\nnot\n##s\n";
    std::ofstream(dir + "/tokenizer_config.json") << R"({"do_lower_case": true, "model_max_length": 128})";
  } else {
    std::ofstream(dir + "/vocab.json") << R"({"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5,
      "r": 6, "d": 7, "!": 8, "he": 9, "ll": 10, "hell": 11, "hello": 12, "\u0120hello": 13,
      "wo": 14, "rl": 15, "worl": 16})";
    std::ofstream(dir + "/merges.txt") << "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 hello\n"
                                          "w o\nr l\nwo rl\n";
  }
  std::ofstream(dir + "/notes.txt") << "not a tokenizer file\n";
  return dir;
}

}  // namespace

// An exported folder loads into Hugging Face transformers (GPT2LMHeadModel, BertForMaskedLM,
// BertForSequenceClassification) with no missing or unexpected weights and the same logits,
// and is a complete model folder: AutoTokenizer reads the copied tokenizer files and encodes
// as ours does, and pipeline("text-classification") answers with the data's label names and
// our probability (tests/data/check_hf_transformers.py, run from the project's venv, where
// install-deps.sh puts transformers).
TEST(Safetensors, TransformersLoadsAnExportWithTheSameLogits) {
  const std::string python = SB_SOURCE_DIR "/.venv/bin/python";
  ASSERT_EQ(std::system((python + " -c 'import transformers' 2>/dev/null").c_str()), 0)
      << "transformers is not in " << python << ": run jobscripts/install-deps.sh";
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto m = models::make_model(preset);
    auto w = models::init_params(m->units(), 9);
    const std::string dir = sb::test::tmp() + "hf_export_" + preset;
    const bool bert = m->config().family == "bert";
    data::HfExport extras;
    extras.tokenizer_dir = tokenizer_folder(m->config().family);
    if (bert) extras.labels = {"negative", "positive"};
    data::export_hf_folder(*m, w, dir, extras);
    for (const auto& f : data::hf_tokenizer_files())
      EXPECT_EQ(std::filesystem::exists(dir + "/" + f),
                std::filesystem::exists(extras.tokenizer_dir + "/" + f)) << f;
    EXPECT_FALSE(std::filesystem::exists(dir + "/notes.txt"));
    models::Batch b;
    b.input_ids = torch::arange(16, torch::kLong).mul(7).remainder(m->config().vocab).view({2, 8});
    models::PersistentParams p(w, false);
    torch::NoGradGuard ng;
    std::vector<std::pair<std::string, torch::Tensor>> expected = {
        {"input_ids", b.input_ids.to(torch::kFloat)}, {"logits", m->logits(p, b)}};
    if (bert) expected.emplace_back("class_logits", m->classify(p, b));
    data::write_safetensors(dir + "/expected.safetensors", expected);
    // Our tokenizer on a sentence, and for BERT our class and its probability on it.
    const std::string text = bert ? "A fine film! Not dull" : "hello hello world!";
    auto tok = data::make_tokenizer(bert ? "bert-wordpiece" : "gpt2-bpe", extras.tokenizer_dir);
    std::vector<std::int32_t> ids = tok->encode(text);
    nlohmann::json j = {{"text", text}};
    if (bert) {
      ids.insert(ids.begin(), tok->token_id("[CLS]"));
      ids.push_back(tok->token_id("[SEP]"));
      models::Batch one;
      one.input_ids = torch::tensor(std::vector<std::int64_t>(ids.begin(), ids.end())).view({1, -1});
      const auto probs = torch::softmax(m->classify(p, one), -1)[0];
      const auto best = probs.argmax().item<std::int64_t>();
      j["label"] = extras.labels.at(static_cast<std::size_t>(best));
      j["score"] = probs[best].item<double>();
      j["labels"] = extras.labels;
    }
    j["ids"] = ids;
    std::ofstream(dir + "/expected.json") << j.dump();
    const std::string cmd = python + " " SB_SOURCE_DIR "/tests/data/check_hf_transformers.py " + dir;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << preset << ": " << cmd;
  }
}

namespace {

// Runs the project's Python on a script of tests/data (output to a log, shown on failure).
void venv_python(const std::string& args) {
  const std::string python = SB_SOURCE_DIR "/.venv/bin/python";
  ASSERT_EQ(std::system((python + " -c 'import transformers' 2>/dev/null").c_str()), 0)
      << "transformers is not in " << python << ": run jobscripts/install-deps.sh";
  const std::string log = sb::test::tmp() + "python.log";
  const std::string cmd = python + " " + args + " > " + log + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream f(log);
    FAIL() << cmd << ":\n" << std::string(std::istreambuf_iterator<char>(f), {});
  }
}

// max |a - b| over same-shaped tensors; infinity when the shapes differ.
double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return INFINITY;
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace

// Layouts transformers saves (and 4.x saved) load, with transformers' own outputs on them
// (tests/data/make_hf_layouts.py): a BertModel without "bert." and with a pooler plus 4.x's
// I64 position_ids; BertForPreTraining (its NSP head skipped, its MLM head loaded);
// BertForMaskedLM (no pooler: initialised); GPT-2 with 4.x's BOOL/U8 causal masks; and a
// pytorch_model.bin folder: refused, converted by suite/data/convert_to_safetensors.py, loaded.
TEST(Safetensors, LayoutsTransformersSavesLoadWithItsOutputs) {
  const std::string out = sb::test::tmp() + "layouts";
  venv_python(SB_SOURCE_DIR "/tests/data/make_hf_layouts.py " + out);
  const double tol = 1e-4;  // as tests/data/check_hf_transformers.py
  auto load = [](const std::string& dir, std::string* note) {
    auto m = models::make_model(dir);
    auto w = data::load_checkpoint(*m, dir, {}, note);
    return std::make_pair(std::move(m), std::move(w));
  };
  auto batch = [](const std::map<std::string, torch::Tensor>& expected) {
    models::Batch b;
    b.input_ids = expected.at("input_ids").to(torch::kLong);
    return b;
  };
  torch::NoGradGuard ng;
  {  // BertModel: the last hidden states (our encoder's, captured through the loss).
    const std::string dir = out + "/bertmodel-4x";
    std::string note;
    auto [m, w] = load(dir, &note);
    const auto exp = data::read_safetensors(dir + "/expected.safetensors");
    auto b = batch(exp);
    b.targets = torch::zeros_like(b.input_ids);
    torch::Tensor hidden;
    models::LossCombiner keep{[&](const models::LossParts& p) { hidden = p.hidden; return p.loss; }, true};
    models::PersistentParams p(w, false);
    m->loss_with(p, b, keep);
    const auto& want = exp.at("logits");  // (B, T, d) last_hidden_state
    EXPECT_LE(max_diff(hidden.view(want.sizes()), want), tol);
    EXPECT_EQ(note, "checkpoint '" + dir + "/model.safetensors': skipped 1 tensor that is not a "
                    "parameter (position-ids buffer: embeddings.position_ids [I64]); initialised 7 "
                    "parameters the checkpoint lacks from seed 1234: "
                    "cls.predictions.transform.dense.weight, cls.predictions.transform.dense.bias, "
                    "cls.predictions.transform.LayerNorm.weight, "
                    "cls.predictions.transform.LayerNorm.bias, cls.predictions.bias, "
                    "classifier.weight, classifier.bias");
  }
  for (const char* name : {"pretraining", "maskedlm", "gpt2-4x"}) {  // MLM / LM logits
    const std::string dir = out + "/" + name;
    std::string note;
    auto [m, w] = load(dir, &note);
    const auto exp = data::read_safetensors(dir + "/expected.safetensors");
    models::PersistentParams p(w, false);
    EXPECT_LE(max_diff(m->logits(p, batch(exp)), exp.at("logits")), tol) << name;
    const std::string file = "checkpoint '" + dir + "/model.safetensors': ";
    const std::string heads = "classifier.weight, classifier.bias";
    if (std::string(name) == "pretraining")
      EXPECT_EQ(note, file + "skipped 2 tensors that are not parameters (next-sentence head "
                             "(BertForPreTraining): cls.seq_relationship.bias [F32], "
                             "cls.seq_relationship.weight [F32]); initialised 2 parameters the "
                             "checkpoint lacks from seed 1234: " + heads);
    else if (std::string(name) == "maskedlm")
      EXPECT_EQ(note, file + "initialised 4 parameters the checkpoint lacks from seed 1234: "
                             "bert.pooler.dense.weight, bert.pooler.dense.bias, " + heads);
    else
      EXPECT_EQ(note, file + "skipped 4 tensors that are not parameters (causal-mask buffer: "
                             "h.0.attn.bias [BOOL], h.1.attn.bias [U8]; masked-bias buffer: "
                             "h.0.attn.masked_bias [F32], h.1.attn.masked_bias [F32])");
  }
  {  // pytorch_model.bin only: refused with the command, which converts it; then it loads.
    const std::string dir = out + "/classifier-bin";
    auto m = models::make_model(dir);
    EXPECT_NE(data::checkpoint_problem(dir, dir).find(
                  "convert it once, weights unchanged, with `.venv/bin/python "
                  "suite/data/convert_to_safetensors.py " + dir + "`"),
              std::string::npos);
    venv_python(SB_SOURCE_DIR "/suite/data/convert_to_safetensors.py " + dir);
    EXPECT_EQ(data::checkpoint_problem(dir, dir), "");
    const auto exp = data::read_safetensors(dir + "/expected.safetensors");
    models::PersistentParams p(data::load_checkpoint(*m, dir), false);
    EXPECT_LE(max_diff(m->classify(p, batch(exp)), exp.at("logits")), tol);
    EXPECT_EQ(models::hf_folder_labels(dir), (std::vector<std::string>{"negative", "neutral", "positive"}));
  }
}
