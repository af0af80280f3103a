// The GPT-2 MoE family (models/moe.h): the MoE MLP equals a per-token loop over the chosen
// experts (top-1 Switch gating, top-2 renormalized), capacity drops the assignments with the
// lowest router probability and passes their tokens through, the aux and z losses follow
// their formulas, parameter counts are exact, and the model's gradients pass a finite-
// difference check (tests/unit/models_gradcheck.cpp) and train.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/models/gpt2.h"
#include "workloads/models/moe.h"
#include "workloads/models/params.h"

using namespace sb::models;

namespace {

struct Experts {
  torch::Tensor router, fc, fc_b, proj, proj_b;
};

Experts experts(std::int64_t E, std::int64_t d, std::int64_t f) {
  torch::manual_seed(4);
  return {torch::randn({E, d}), torch::randn({E, f, d}) * 0.3, torch::randn({E, f}) * 0.1,
          torch::randn({E, d, f}) * 0.3, torch::randn({E, d}) * 0.1};
}

// One token through the experts it chose, written out: the obviously correct form.
torch::Tensor by_hand(const MoeConfig& c, const Experts& w, const torch::Tensor& xn) {
  const auto probs = torch::softmax(torch::matmul(w.router, xn), 0);  // (E)
  const auto top = probs.topk(c.top_k);
  const auto p = std::get<0>(top), idx = std::get<1>(top);
  const auto norm = c.top_k > 1 ? p.sum().item<double>() : 1.0;
  auto y = torch::zeros_like(xn);
  for (std::int64_t s = 0; s < c.top_k; ++s) {
    const auto e = idx[s].item<std::int64_t>();
    const auto h = at::gelu(torch::matmul(w.fc[e], xn) + w.fc_b[e], "tanh");
    y += (p[s].item<double>() / norm) * (torch::matmul(w.proj[e], h) + w.proj_b[e]);
  }
  return y;
}

}  // namespace

TEST(Moe, EqualsThePerTokenLoopWithoutDrops) {
  const auto w = experts(4, 8, 16);
  const auto x = torch::randn({12, 8});
  for (const std::int64_t k : {1, 2}) {
    MoeConfig c;
    c.experts = 4, c.top_k = k, c.capacity_factor = 0;  // no limit
    const auto out = moe_mlp(c, x, w.router, w.fc, w.fc_b, w.proj, w.proj_b, true);
    EXPECT_EQ(out.routing.dropped_assignments, 0);
    std::int64_t load = 0;
    for (const auto n : out.routing.load) load += n;
    EXPECT_EQ(load, 12 * k);
    for (std::int64_t n = 0; n < 12; ++n)
      EXPECT_LE((out.y[n] - by_hand(c, w, x[n])).abs().max().item<double>(), 1e-5) << "top-" << k << " token " << n;
  }
}

// Every token prefers expert 0, more strongly the later it comes: a capacity of 4 (1.0 x 8 / 2)
// keeps tokens 4..7 there and drops 0..3, whose outputs are 0 (the residual passes them).
TEST(Moe, CapacityKeepsTheHighestProbabilities) {
  MoeConfig c;
  c.experts = 2, c.top_k = 1, c.capacity_factor = 1.0;
  auto w = experts(2, 4, 8);
  w.router = torch::zeros({2, 4});
  w.router[0][0] = 1.0;
  auto x = torch::zeros({8, 4});
  for (int n = 0; n < 8; ++n) x[n][0] = 1.0 + n, x[n][1] = 0.5;
  const auto out = moe_mlp(c, x, w.router, w.fc, w.fc_b, w.proj, w.proj_b, true);
  EXPECT_EQ(c.capacity(8, true), 4);
  EXPECT_EQ(out.routing.load, (std::vector<std::int64_t>{4, 0}));
  EXPECT_EQ(out.routing.dropped_tokens, 4);
  EXPECT_EQ(out.routing.dropped_assignments, 4);
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(out.routing.kept[n][0].item<bool>(), n >= 4) << n;
    if (n < 4) EXPECT_EQ(out.y[n].abs().max().item<double>(), 0.0) << n;
    else EXPECT_GT(out.y[n].abs().max().item<double>(), 0.0) << n;
  }
  // Without gradients the eval factor applies: 2.0 x 8 / 2 = 8, nothing dropped.
  torch::NoGradGuard ng;
  EXPECT_EQ(moe_mlp(c, x, w.router, w.fc, w.fc_b, w.proj, w.proj_b, false).routing.dropped_tokens, 0);
}

TEST(Moe, AuxAndZLossesFollowTheirFormulas) {
  MoeConfig c;
  c.experts = 4, c.top_k = 2, c.aux_loss_coef = 0.01, c.z_loss_coef = 0.001;
  const auto w = experts(4, 8, 16);
  const auto x = torch::randn({10, 8});
  const auto out = moe_mlp(c, x, w.router, w.fc, w.fc_b, w.proj, w.proj_b, true);
  const auto logits = torch::matmul(x, w.router.t());
  const auto probs = torch::softmax(logits, -1);
  const auto first = probs.argmax(-1);
  double aux = 0;
  for (std::int64_t e = 0; e < 4; ++e)
    aux += (first == e).sum().item<double>() / 10.0 * probs.select(1, e).mean().item<double>();
  EXPECT_NEAR(out.aux.item<double>(), 0.01 * 4 * aux, 1e-7);
  double z = 0;
  for (std::int64_t n = 0; n < 10; ++n) z += std::pow(torch::logsumexp(logits[n], 0).item<double>(), 2);
  EXPECT_NEAR(out.z.item<double>(), 0.001 * z / 10, 1e-7);
}

// gpt2-moe-tiny: vocab 256, ctx 128, d 64, 4 layers (blocks 1 and 3 MoE), 4 experts, f 256.
TEST(Moe, ParameterCountsAreExact) {
  Gpt2 m(preset_config("gpt2-moe-tiny"));
  const std::int64_t V = 256, P = 128, d = 64, f = 256, E = 4;
  const std::int64_t attn = 2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d;
  const std::int64_t dense = attn + f * d + f + d * f + d;
  const std::int64_t moe = attn + E * d + E * (f * d + f + d * f + d);
  EXPECT_EQ(count_params(m.units()), V * d + P * d + 2 * dense + 2 * moe + 2 * d);
  // A token meets one expert of four: 3 experts' weights of each of the 2 MoE blocks less.
  EXPECT_EQ(active_params(m.config(), m.units()),
            count_params(m.units()) - 2 * 3 * (f * d + f + d * f + d));
  // The block keeps the router; each MoE layer's experts are a unit after the head.
  ASSERT_EQ(m.units().size(), 4u + 2u + 2u);
  EXPECT_EQ(m.units()[2].params.size(), 9u);
  EXPECT_EQ(m.units()[2].params[8].name, "h.1.moe.router.weight");
  EXPECT_EQ(m.units()[5].name, "head");
  EXPECT_EQ(m.units()[6].name, "experts.1");
  EXPECT_TRUE(m.units()[6].expert && !m.units()[2].expert);
  EXPECT_EQ(m.units()[6].params[0].name, "h.1.moe.experts.c_fc.weight");
  EXPECT_EQ(m.units()[6].params[0].shape, (std::vector<std::int64_t>{E, f, d}));
  EXPECT_EQ(m.units()[7].name, "experts.3");
  // The step's FLOPs count one expert of four a token: the dense model's minus 3/4 of each
  // MoE block's expert weights, plus the router.
  auto dense_cfg = preset_config("gpt2-moe-tiny");
  dense_cfg.moe = MoeConfig{};
  dense_cfg.family = "gpt2";
  Gpt2 dm(dense_cfg);
  Batch b;
  b.input_ids = torch::zeros({2, 16}, torch::kLong);
  const double tokens = 32;
  EXPECT_DOUBLE_EQ(m.train_flops(b).matmul - dm.train_flops(b).matmul, tokens * 6.0 * 2 * E * d);
}

// A training step routes, records each MoE layer's routing and adds its aux and z losses.
TEST(Moe, TheModelTrainsAndRecordsRouting) {
  Gpt2 m(preset_config("gpt2-moe-tiny"));
  PersistentParams p(init_params(m.units(), 3));
  torch::manual_seed(1);
  Batch b;
  b.input_ids = torch::randint(0, 256, {2, 16}, torch::kLong);
  b.targets = torch::randint(0, 256, {2, 16}, torch::kLong);
  auto loss = m.loss(p, b);
  loss.backward();
  ASSERT_EQ(m.routing().size(), 4u);
  EXPECT_FALSE(m.routing()[0].choice.defined());  // block 0 is dense
  ASSERT_TRUE(m.routing()[1].choice.defined());
  std::int64_t load = 0;
  for (const auto n : m.routing()[1].load) load += n;
  EXPECT_EQ(load + m.routing()[1].dropped_assignments, 32);
  // The router's weight gets a gradient (through the gates and the two losses).
  EXPECT_GT(p.tensors()[2][8].grad().abs().sum().item<double>(), 0.0);
  EXPECT_THROW(m.set_activation_checkpoint({CheckpointMode::Full, 1}), std::exception);
}
