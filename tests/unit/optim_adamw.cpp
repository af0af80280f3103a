// AdamW math: agrees with torch::optim::AdamW, is bit-identical on pieces, schedule values.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/core/check.h"
#include "workloads/optim/adamw.h"

#include <torch/optim/adamw.h>

using namespace sb::optim;

TEST(AdamW, MatchesTorchAdamW) {
  AdamWConfig c;
  c.weight_decay = 0.1, c.beta1 = 0.9, c.beta2 = 0.95, c.eps = 1e-8;
  torch::manual_seed(0);
  auto p0 = torch::randn({37, 5});
  auto ours = p0.clone(), m = torch::zeros_like(p0), v = torch::zeros_like(p0);
  auto theirs = p0.clone().requires_grad_();
  torch::optim::AdamW opt({theirs}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int s = 1; s <= 5; ++s) {
    auto g = torch::randn({37, 5});
    adamw_update(ours, g, m, v, s, 1e-2, c, {});
    theirs.mutable_grad() = g.clone();
    opt.step();
  }
  EXPECT_LE((ours - theirs.detach()).abs().max().item<double>(), 1e-6);
}

TEST(AdamW, DecayMaskSkipsElements) {
  AdamWConfig c;
  c.weight_decay = 0.5;
  auto p = torch::ones({4}), g = torch::zeros({4}), m = torch::zeros({4}), v = torch::zeros({4});
  auto mask = torch::tensor({1.f, 0.f, 1.f, 0.f});
  adamw_update(p, g, m, v, 1, 0.1, c, mask);  // zero gradient: only decay acts
  EXPECT_FLOAT_EQ(p[0].item<float>(), 1.f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(p[1].item<float>(), 1.f);
}

TEST(AdamW, PiecesAreBitIdenticalToWhole) {
  AdamWConfig c;
  torch::manual_seed(2);
  const std::int64_t n = 100003;  // odd sizes: pieces start at unaligned offsets
  auto p = torch::randn({n}), m = torch::randn({n}).abs() * 0.1, v = torch::randn({n}).abs() * 0.01;
  auto mask = (torch::rand({n}) > 0.3).to(torch::kFloat32);
  auto p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  for (int s = 1; s <= 3; ++s) {
    auto g = torch::randn({n});
    adamw_update(p, g, m, v, s, 3e-4, c, mask);
    for (std::int64_t b : {std::int64_t(0), std::int64_t(13), std::int64_t(40001), std::int64_t(99999)}) {
      const std::int64_t e = b == 0 ? 13 : b == 13 ? 40001 : b == 40001 ? 99999 : n;
      auto pp = p2.narrow(0, b, e - b), mm = m2.narrow(0, b, e - b), vv = v2.narrow(0, b, e - b);
      adamw_update(pp, g.narrow(0, b, e - b), mm, vv, s, 3e-4, c, mask.narrow(0, b, e - b));
    }
  }
  EXPECT_TRUE(torch::equal(p, p2));
  EXPECT_TRUE(torch::equal(m, m2));
  EXPECT_TRUE(torch::equal(v, v2));
  // Any shape: the same update on a 2-D view.
  auto q = torch::randn({6, 7}), q2 = q.clone().view({42});
  auto g = torch::randn({6, 7});
  auto a = torch::zeros({6, 7}), b = torch::zeros({6, 7}), a2 = torch::zeros({42}), b2 = torch::zeros({42});
  adamw_update(q, g, a, b, 1, 1e-3, c, {});
  adamw_update(q2, g.view({42}), a2, b2, 1, 1e-3, c, {});
  EXPECT_TRUE(torch::equal(q.view({42}), q2));
}

TEST(AdamW, RejectsMismatchedTensors) {
  AdamWConfig c;
  auto p = torch::zeros({4}), g = torch::zeros({5}), m = torch::zeros({4}), v = torch::zeros({4});
  try {
    adamw_update(p, g, m, v, 1, 0.1, c, {});
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("param has 4 elements but grad 5"), std::string::npos) << e.what();
  }
}

TEST(Schedule, WarmupCosine) {
  AdamWConfig c;
  c.lr = 1.0, c.min_lr = 0.1, c.warmup_steps = 4, c.total_steps = 14;
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(c, 3), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 4), 1.0);                                  // cosine starts at the peak
  EXPECT_NEAR(lr_at(c, 9), 0.1 + 0.5 * (1 + std::cos(M_PI * 0.5)) * 0.9, 1e-15);  // halfway
  EXPECT_DOUBLE_EQ(lr_at(c, 14), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 100), 0.1);
}

TEST(Clip, Coefficient) {
  EXPECT_DOUBLE_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_coefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_coefficient(4.0, 0.0), 1.0);
}
