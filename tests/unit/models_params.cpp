// Model presets: published parameter counts, unit layout, seeded initialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using namespace sb::models;

TEST(ModelParams, PublishedCounts) {
  const std::map<std::string, std::int64_t> published = {
      {"gpt2", 124439808},        {"gpt2-medium", 354823168}, {"gpt2-large", 774030080},
      {"gpt2-xl", 1557611200},    {"bert-base", 109482240},   {"bert-large", 335141888}};
  for (const auto& [name, n] : published) {
    auto m = make_model(name);
    EXPECT_EQ(count_backbone_params(m->units()), n) << name;
  }
}

TEST(ModelParams, TinyPresetsAndHeads) {
  // gpt2-tiny: wte 256*64 + wpe 128*64 + 2 blocks * (12 d^2 + 13 d) + ln_f 2d.
  auto g = make_model("gpt2-tiny");
  EXPECT_EQ(count_params(g->units()), 256 * 64 + 128 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64);
  EXPECT_EQ(count_params(g->units()), count_backbone_params(g->units()));  // tied head: nothing extra
  // bert-base heads: MLM transform d^2 + d + 2d, decoder bias V, classifier 2d + 2.
  auto b = make_model("bert-base");
  EXPECT_EQ(count_params(b->units()) - count_backbone_params(b->units()),
            768 * 768 + 768 + 2 * 768 + 30522 + 2 * 768 + 2);
}

TEST(ModelParams, UnitLayout) {
  auto m = make_model("gpt2");
  const auto& u = m->units();
  ASSERT_EQ(u.size(), 14u);
  EXPECT_EQ(u[0].name, "embed");
  EXPECT_EQ(u[1].name, "block.0");
  EXPECT_EQ(u[13].name, "head");
  EXPECT_EQ(u[1].params[2].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(u[1].params[2].shape, (std::vector<std::int64_t>{2304, 768}));  // (out, in)
  EXPECT_FALSE(u[1].params[3].decay);  // bias
  EXPECT_TRUE(u[0].params[0].decay);   // wte (2-D, as nanoGPT)
  EXPECT_DOUBLE_EQ(u[1].params[4].std, 0.02 / std::sqrt(24.0));  // scaled c_proj init
  auto b = make_model("bert-base");
  EXPECT_EQ(b->units()[0].params[3].name, "bert.embeddings.LayerNorm.weight");
  EXPECT_EQ(b->units().back().params[6].name, "cls.predictions.bias");
}

TEST(ModelParams, UnknownNamesListKnownOnes) {
  try {
    make_model("gpt3");
    FAIL() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model preset 'gpt3'; known: gpt2-tiny, gpt2-tiny-8l, gpt2, gpt2-medium"),
              std::string::npos) << e.what();
  }
  try {
    make_model("gpt2-tiny", "flash");
    FAIL() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown attention variant 'flash'; known: naive, chunked, online"),
              std::string::npos) << e.what();
  }
}

TEST(ModelParams, RegisteredWithHarness) {
  auto names = sb::registered_names("model");
  std::vector<std::string> got;
  for (const auto& [n, doc] : names) got.push_back(n);
  for (const auto& p : preset_names()) EXPECT_NE(std::find(got.begin(), got.end(), p), got.end()) << p;
  std::vector<std::string> att;
  for (const auto& [n, doc] : sb::registered_names("attention")) att.push_back(n);
  EXPECT_NE(std::find(att.begin(), att.end(), "chunked"), att.end());
}

TEST(ModelParams, SeededInitIsDeterministicAndIndependent) {
  auto m = make_model("gpt2-tiny");
  auto a = init_params(m->units(), 7), b = init_params(m->units(), 7), c = init_params(m->units(), 8);
  for (std::size_t u = 0; u < a.size(); ++u)
    for (std::size_t i = 0; i < a[u].size(); ++i) EXPECT_TRUE(torch::equal(a[u][i], b[u][i]));
  EXPECT_FALSE(torch::equal(a[0][0], c[0][0]));
  // Any unit alone gives the same values as the whole (FSDP initialises only its units).
  EXPECT_TRUE(torch::equal(init_unit(m->units(), 2, 7)[4], a[2][4]));
  // Statistics follow the specs: normal(0, 0.02), scaled c_proj, ones / zeros.
  EXPECT_NEAR(a[0][0].std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(a[1][4].std().item<double>(), 0.01, 0.001);
  EXPECT_TRUE(torch::equal(a[1][0], torch::ones({64})));
  EXPECT_TRUE(torch::equal(a[1][1], torch::zeros({64})));
}

TEST(ModelParams, FlopsPerToken) {
  auto m = make_model("gpt2");
  Batch b;
  b.input_ids = torch::zeros({2, 128}, torch::kLong);
  b.targets = torch::zeros({2, 128}, torch::kLong);
  // Per token: 6 * (124439808 - 1024*768) + 12 * 12 * 128 * 768
  EXPECT_DOUBLE_EQ(m->train_flops(b).total() / 256, 6.0 * (124439808.0 - 786432.0) + 12.0 * 12 * 128 * 768);
}
