// The model-shape advisor (models/shapes.h): a step's GEMMs are exactly the model's counted
// matmul FLOPs; every proposed shape keeps the parameter count within the tolerance and the
// family's constraints (heads divide d, d_ff and d positive), includes the tiling neighbours of
// the Codesign issue's misshaped GPT-2 (d 1000, 10 heads of 100, vocab 50257), and loads and
// trains as a model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "workloads/models/params.h"
#include "workloads/models/shapes.h"

using namespace sb::models;

TEST(Shapes, StepGemmsAreTheCountedMatmulFlops) {
  for (const char* preset : {"gpt2-tiny", "gpt2-d1000"}) {
    const auto c = preset_config(preset);
    double sum = 0;
    for (const auto& g : step_gemms(c, 2, 16)) sum += g.flops() * static_cast<double>(g.count);
    Batch b;
    b.input_ids = torch::zeros({2, 16}, torch::kLong);
    EXPECT_DOUBLE_EQ(sum, make_model(c)->train_flops(b).matmul) << preset;
  }
}

TEST(Shapes, NeighboursKeepTheParameterCountAndTheConstraints) {
  const auto base = preset_config("gpt2-d1000");
  const auto cands = neighbour_shapes(base, 0.02);
  ASSERT_GT(cands.size(), 3u);
  const double P = static_cast<double>(cands[0].params);
  EXPECT_EQ(cands[0].change, "the model itself");
  bool tiled = false;
  for (const auto& c : cands) {
    EXPECT_LE(std::abs(static_cast<double>(c.params) - P), 0.02 * P) << c.change;
    EXPECT_EQ(c.cfg.d_model % c.cfg.n_head, 0) << c.change;
    EXPECT_GT(c.cfg.d_ff, 0) << c.change;
    EXPECT_EQ(c.params, count_params(make_model(c.cfg)->units())) << c.change;
    if (c.cfg.d_model == 1024 && c.cfg.dh() == 64 && c.cfg.vocab == 50304) tiled = true;
  }
  EXPECT_TRUE(tiled) << "no d 1024 / head size 64 / vocab 50304 neighbour";
  EXPECT_EQ(tiling_notes(base), "d 1000 % 64 = 40; head size 100 % 64 = 36; d_ff 4000 % 64 = 32; vocab 50257 % 64 = 17");
  EXPECT_EQ(tiling_notes(cands.back().cfg).find("d "), std::string::npos);  // multiples of 64
}

// A proposed shape is an ordinary model: it builds, runs a step and gets gradients.
TEST(Shapes, AProposalTrains) {
  auto base = preset_config("gpt2-tiny");
  base.d_model = 120, base.n_head = 4, base.d_ff = 480, base.vocab = 250;
  const auto cands = neighbour_shapes(base, 0.05);
  ASSERT_GT(cands.size(), 1u);
  auto m = make_model(cands[1].cfg);
  PersistentParams p(init_params(m->units(), 1));
  Batch b;
  b.input_ids = torch::randint(0, cands[1].cfg.vocab, {2, 8}, torch::kLong);
  b.targets = torch::randint(0, cands[1].cfg.vocab, {2, 8}, torch::kLong);
  auto loss = m->loss(p, b);
  loss.backward();
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
}

// The rest of a step: one kernel per kind with its count, the attention core either naive's
// softmax (beside its six batched products) or one fused kernel (and no products).
TEST(Shapes, VectorKernelsOfAStep) {
  const auto c = preset_config("gpt2-d1000");
  const std::int64_t B = 2, T = 16, L = c.n_layer, P = 195439000;
  const auto naive = step_vector_kernels(c, B, T, P, true, true);
  std::map<std::string, std::int64_t> count;
  for (const auto& k : naive) count[k.op] += k.count;
  EXPECT_EQ(count["layernorm"], 2 * L + 1);
  EXPECT_EQ(count["gelu"], L);
  EXPECT_EQ(count["softmax_causal"], L);
  EXPECT_EQ(count.count("sdpa"), 0u);
  EXPECT_EQ(count["lm_head"], 1);
  EXPECT_EQ(count["add"], 2 * L);
  EXPECT_EQ(count["sum_rows"], 4 * L);  // the four linears' bias gradients
  EXPECT_EQ(count["adamw"], 1);
  EXPECT_EQ(count["norm"], 1);
  EXPECT_EQ(count["cast"], 1);
  for (const auto& k : naive) {
    if (k.op == "adamw") {
      EXPECT_EQ(k.width, kStreamedElements);
      EXPECT_DOUBLE_EQ(k.scale * static_cast<double>(k.width), static_cast<double>(P));
    } else if (k.op == "lm_head") {
      EXPECT_EQ(k.rows * k.width * k.classes, B * T * c.d_model * c.vocab);
    }
  }
  const auto fused = step_vector_kernels(c, B, T, P, false, false);
  std::map<std::string, std::int64_t> fc;
  for (const auto& k : fused) fc[k.op] += k.count;
  EXPECT_EQ(fc["sdpa"], L);
  EXPECT_EQ(fc.count("softmax_causal") + fc.count("cast"), 0u);
  // Without naive attention the GEMMs lose exactly its six batched products.
  const auto all = step_gemms(c, B, T, true), dense = step_gemms(c, B, T, false);
  EXPECT_EQ(all.size(), dense.size() + 6);
  for (const auto& g : dense) EXPECT_EQ(g.what.find("attention "), std::string::npos) << g.what;
  std::int64_t head = 0;  // the LM head's three, timed inside the lm_head kernel
  for (const auto& g : dense) head += g.lm_head ? 1 : 0;
  EXPECT_EQ(head, 3);
}

// An inference pass: forward-only kernels, no loss, optimizer, casts or bias gradients; its
// GEMMs are the step's without a gradient (the LM head's forward among them).
TEST(Shapes, InferencePassKernels) {
  const auto c = preset_config("gpt2-d1000");
  const std::int64_t L = c.n_layer;
  std::map<std::string, std::int64_t> count;
  for (const auto& k : step_vector_kernels(c, 2, 16, 195439000, true, true, false)) {
    EXPECT_FALSE(k.backward && k.op != "add") << k.op;
    EXPECT_EQ(k.key().find("|fwd") != std::string::npos, !k.backward) << k.key();
    count[k.op] += k.count;
  }
  EXPECT_EQ(count, (std::map<std::string, std::int64_t>{
                       {"layernorm", 2 * L + 1}, {"gelu", L}, {"softmax_causal", L}, {"add", 2 * L}}));
  std::int64_t forward = 0, head = 0;
  for (const auto& g : step_gemms(c, 2, 16, true))
    if (!g.backward) ++forward, head += g.lm_head ? 1 : 0;
  EXPECT_EQ(forward, 4 + 2 + 1);  // four linears, Q K^T and P V, the logits
  EXPECT_EQ(head, 1);
}
