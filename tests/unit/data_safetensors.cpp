// safetensors: our writer round-trips; a file written by an independent Python writer
// (tests/data/make_gpt2_safetensors.py: json + struct) loads with Hugging Face names,
// F16/BF16 conversion, Conv1D transposition and skipped buffers; errors are precise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/safetensors.h"
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

// An exported folder loads into Hugging Face transformers (GPT2LMHeadModel, BertForMaskedLM,
// BertForSequenceClassification) with no missing or unexpected weights and the same logits
// (tests/data/check_hf_transformers.py, run from the project's venv, where install-deps.sh
// puts transformers).
TEST(Safetensors, TransformersLoadsAnExportWithTheSameLogits) {
  const std::string python = SB_SOURCE_DIR "/.venv/bin/python";
  ASSERT_EQ(std::system((python + " -c 'import transformers' 2>/dev/null").c_str()), 0)
      << "transformers is not in " << python << ": run jobscripts/install-deps.sh";
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto m = models::make_model(preset);
    auto w = models::init_params(m->units(), 9);
    const std::string dir = sb::test::tmp() + "hf_export_" + preset;
    data::export_hf_folder(*m, w, dir);
    models::Batch b;
    b.input_ids = torch::arange(16, torch::kLong).mul(7).remainder(m->config().vocab).view({2, 8});
    models::PersistentParams p(w, false);
    torch::NoGradGuard ng;
    std::vector<std::pair<std::string, torch::Tensor>> expected = {
        {"input_ids", b.input_ids.to(torch::kFloat)}, {"logits", m->logits(p, b)}};
    if (m->config().family == "bert") expected.emplace_back("class_logits", m->classify(p, b));
    data::write_safetensors(dir + "/expected.safetensors", expected);
    const std::string cmd = python + " " SB_SOURCE_DIR "/tests/data/check_hf_transformers.py " + dir;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << preset << ": " << cmd;
  }
}
