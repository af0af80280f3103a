// Attention variants equal naive (outputs and gradients, causal, padding, KV offsets);
// KV-cached decoding equals the full forward; generation is greedy-correct and seeded.
#include <gtest/gtest.h>

#include "workloads/models/attention.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/params.h"

using namespace sb::models;

namespace {

struct Grads {
  torch::Tensor out, dq, dk, dv;
};

Grads run(const Attention& a, const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
          const AttentionMask& m, const torch::Tensor& dout) {
  auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  auto out = a.forward(q, k, v, m);
  out.backward(dout);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5) << what;
}

void check_all(const AttentionMask& m, std::int64_t tq, std::int64_t tk, const std::string& what) {
  torch::manual_seed(3);
  auto q = torch::randn({2, 3, tq, 8}), k = torch::randn({2, 3, tk, 8}), v = torch::randn({2, 3, tk, 8});
  auto dout = torch::randn({2, 3, tq, 8});
  auto ref = run(*make_attention("naive", 0), q, k, v, m, dout);
  for (const auto& [name, doc] : attention_variants()) {  // every registered variant
    if (name == "naive") continue;
    for (std::int64_t chunk : {1, 5, 16, 64}) {
      auto got = run(*make_attention(name, chunk), q, k, v, m, dout);
      const std::string w = what + " " + name + " chunk " + std::to_string(chunk);
      expect_close(got.out, ref.out, w + " out");
      expect_close(got.dq, ref.dq, w + " dq");
      expect_close(got.dk, ref.dk, w + " dk");
      expect_close(got.dv, ref.dv, w + " dv");
      if (name == "sdpa") break;  // no chunk size
    }
  }
}

}  // namespace

TEST(Attention, VariantsEqualNaiveUnmasked) { check_all({}, 37, 37, "unmasked"); }

TEST(Attention, VariantsEqualNaiveCausal) {
  AttentionMask m;
  m.causal = true;
  check_all(m, 37, 37, "causal");
}

TEST(Attention, VariantsEqualNaiveCausalWithCacheOffset) {
  AttentionMask m;
  m.causal = true;
  m.q_offset = 30;  // 7 new queries after 30 cached keys
  check_all(m, 7, 37, "causal offset");
}

TEST(Attention, VariantsEqualNaivePadding) {
  AttentionMask m;
  m.key_keep = torch::ones({2, 37}, torch::kBool);
  m.key_keep.index_put_({0, torch::indexing::Slice(20, torch::indexing::None)}, false);
  m.key_keep.index_put_({1, torch::indexing::Slice(3, torch::indexing::None)}, false);  // whole key chunks masked
  check_all(m, 37, 37, "padding");
}

TEST(Attention, PaddingMasksKeys) {
  // A padded key must not influence any output: change it and compare.
  AttentionMask m;
  m.key_keep = torch::ones({1, 6}, torch::kBool);
  m.key_keep[0][5] = false;
  torch::manual_seed(1);
  auto q = torch::randn({1, 2, 6, 4}), k = torch::randn({1, 2, 6, 4}), v = torch::randn({1, 2, 6, 4});
  auto a = make_attention("naive", 0)->forward(q, k, v, m);
  auto k2 = k.clone(), v2 = v.clone();
  k2.select(2, 5).fill_(100), v2.select(2, 5).fill_(-100);
  EXPECT_TRUE(torch::allclose(a, make_attention("naive", 0)->forward(q, k2, v2, m)));
}

namespace {
UnitTensors noisy_params(const Model& m) {
  auto p = init_params(m.units(), 11);
  // Larger weights than the 0.02 init so logits differ visibly between positions.
  for (auto& u : p)
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(10);
  return p;
}
}  // namespace

TEST(Gpt2Decode, CachedLogitsEqualFullForward) {
  for (const auto& [attn, doc] : attention_variants()) {
    auto cfg = preset_config("gpt2-tiny");
    cfg.attention = attn;
    cfg.attention_chunk = 4;
    Gpt2 m(cfg);
    PersistentParams p(noisy_params(m), false);
    torch::NoGradGuard ng;
    auto ids = torch::randint(0, 256, {2, 20}, torch::kLong);
    Batch b;
    b.input_ids = ids;
    auto full = m.logits(p, b);  // (2, 20, 256)
    auto cache = m.make_cache(2, 20);
    std::vector<torch::Tensor> parts = {m.forward_cached(p, ids.narrow(1, 0, 7), cache)};
    for (int t = 7; t < 20; ++t) parts.push_back(m.forward_cached(p, ids.narrow(1, t, 1), cache));
    auto cached = torch::cat(parts, 1);
    EXPECT_EQ(cache.length, 20);
    EXPECT_LE((cached - full).abs().max().item<double>(), 1e-4 * full.abs().max().item<double>()) << attn;
  }
}

TEST(Gpt2Decode, GreedyMatchesRecomputedArgmax) {
  auto m = Gpt2(preset_config("gpt2-tiny"));
  PersistentParams p(noisy_params(m), false);
  auto prompt = torch::randint(0, 256, {2, 5}, torch::kLong);
  GenerateConfig g;
  g.max_new_tokens = 8;
  auto r = generate(m, p, prompt, g);
  ASSERT_EQ(r.tokens.sizes(), (std::vector<std::int64_t>{2, 13}));
  EXPECT_EQ(r.per_token_s.size(), 7u);
  EXPECT_GT(r.time_to_first_token_s, 0);
  torch::NoGradGuard ng;
  for (int t = 5; t < 13; ++t) {
    Batch b;
    b.input_ids = r.tokens.narrow(1, 0, t);
    auto want = m.logits(p, b).select(1, t - 1).argmax(-1);
    EXPECT_TRUE(torch::equal(want, r.tokens.select(1, t))) << "position " << t;
  }
}

TEST(Gpt2Decode, SamplingIsSeeded) {
  auto m = Gpt2(preset_config("gpt2-tiny"));
  PersistentParams p(noisy_params(m), false);
  auto prompt = torch::randint(0, 256, {3, 4}, torch::kLong);
  GenerateConfig g;
  g.max_new_tokens = 12, g.temperature = 1.0, g.top_k = 20, g.seed = 5;
  auto a = generate(m, p, prompt, g), b = generate(m, p, prompt, g);
  EXPECT_TRUE(torch::equal(a.tokens, b.tokens));
  g.seed = 6;
  EXPECT_FALSE(torch::equal(a.tokens, generate(m, p, prompt, g).tokens));
  g.top_k = 1;  // top-1 sampling is greedy
  auto greedy_cfg = GenerateConfig{12, 0.0, 0, 0};
  EXPECT_TRUE(torch::equal(generate(m, p, prompt, g).tokens, generate(m, p, prompt, greedy_cfg).tokens));
}
