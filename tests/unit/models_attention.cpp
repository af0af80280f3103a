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

namespace {
AttentionOptions fpdt_options(std::int64_t chunk, std::int64_t seq_chunks, const std::string& kv) {
  AttentionOptions o;
  o.chunk = chunk, o.seq_chunks = seq_chunks, o.kv_offload = kv, o.offload_dir = ::testing::TempDir();
  return o;
}
void expect_equal(const Grads& a, const Grads& b, const std::string& what) {
  EXPECT_TRUE(torch::equal(a.out, b.out)) << what << " out";
  EXPECT_TRUE(torch::equal(a.dq, b.dq)) << what << " dq";
  EXPECT_TRUE(torch::equal(a.dk, b.dk)) << what << " dk";
  EXPECT_TRUE(torch::equal(a.dv, b.dv)) << what << " dv";
}
}  // namespace

// FPDT with its key/value chunks in a file equals FPDT with them in memory bit for bit, and
// moves exactly each chunk's k and v (padded to O_DIRECT's 4096 bytes) out once and back once.
TEST(Attention, FpdtOffloadedChunksEqualInMemory) {
  for (const bool causal : {true, false}) {
    AttentionMask m;
    m.causal = causal;
    m.key_keep = torch::ones({2, 37}, torch::kBool);
    m.key_keep.index_put_({1, torch::indexing::Slice(9, torch::indexing::None)}, false);
    if (causal) m.key_keep = torch::Tensor();  // padding: bidirectional (BERT's case)
    torch::manual_seed(5);
    auto q = torch::randn({2, 3, 37, 8}), k = torch::randn({2, 3, 37, 8}), v = torch::randn({2, 3, 37, 8});
    auto dout = torch::randn({2, 3, 37, 8});
    const auto mem = run(*make_attention("fpdt", fpdt_options(5, 0, "none")), q, k, v, m, dout);
    const auto before = kv_offload_stats();
    const auto disk = run(*make_attention("fpdt", fpdt_options(5, 0, "disk")), q, k, v, m, dout);
    const auto after = kv_offload_stats();
    expect_equal(disk, mem, causal ? "causal" : "padding");
    // 8 chunks: 7 of 5 tokens and one of 2; k and v of a chunk: 2 x 2 x 3 x n x 8 x 4 bytes.
    const std::uint64_t moved = 7 * 4096 + 4096;  // 1920 and 768 bytes, each padded to 4096
    EXPECT_EQ(after.written_bytes - before.written_bytes, moved);
    EXPECT_EQ(after.read_bytes - before.read_bytes, moved);
    // The ground truth for both: naive.
    const auto ref = run(*make_attention("naive", 0), q, k, v, m, dout);
    expect_close(disk.out, ref.out, "fpdt disk out");
    expect_close(disk.dk, ref.dk, "fpdt disk dk");
  }
}

// seq_chunks splits the keys into that many chunks whatever attention_chunk says.
TEST(Attention, FpdtSeqChunks) {
  AttentionMask m;
  m.causal = true;
  torch::manual_seed(6);
  auto q = torch::randn({1, 2, 37, 8}), k = torch::randn({1, 2, 37, 8}), v = torch::randn({1, 2, 37, 8});
  auto dout = torch::randn({1, 2, 37, 8});
  const auto ref = run(*make_attention("naive", 0), q, k, v, m, dout);
  const auto before = kv_offload_stats();
  const auto got = run(*make_attention("fpdt", fpdt_options(128, 3, "disk")), q, k, v, m, dout);
  const auto after = kv_offload_stats();
  expect_close(got.out, ref.out, "seq_chunks out");
  expect_close(got.dq, ref.dq, "seq_chunks dq");
  expect_close(got.dk, ref.dk, "seq_chunks dk");
  expect_close(got.dv, ref.dv, "seq_chunks dv");
  // 3 chunks of 13, 13 and 11 tokens: 2 x 2 x n x 8 x 4 bytes each, padded to 4096.
  EXPECT_EQ(after.written_bytes - before.written_bytes, 3u * 4096u);
  // Without gradients nothing is stored.
  torch::NoGradGuard ng;
  make_attention("fpdt", fpdt_options(128, 3, "disk"))->forward(q, k, v, m);
  EXPECT_EQ(kv_offload_stats().written_bytes, after.written_bytes);
}

TEST(Attention, FpdtRefusesBadOptions) {
  try {
    make_attention("fpdt", fpdt_options(8, 0, "nvme"));
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("kv_offload = \"nvme\": use none, host or disk"), std::string::npos) << e.what();
  }
  AttentionMask m;
  m.dropout.p = 0.1, m.dropout.row_head = torch::zeros({1, 1}, torch::kLong);
  auto q = torch::randn({1, 1, 4, 8}, torch::requires_grad());
  EXPECT_THROW(make_attention("fpdt", fpdt_options(2, 0, "none"))->forward(q, q, q, m), std::exception);
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

// A GPT-2 training step (loss and every gradient) with FPDT's key/value chunks in a file
// equals the same step with them in memory bit for bit, with and without activation
// checkpointing (recomputation stores the chunks again) and with residual dropout on.
TEST(Gpt2Fpdt, OffloadedStepEqualsInMemory) {
  for (const auto mode : {CheckpointMode::None, CheckpointMode::Full}) {
    std::vector<torch::Tensor> losses;
    std::vector<std::vector<torch::Tensor>> grads;
    for (const char* kv : {"none", "disk"}) {
      auto cfg = preset_config("gpt2-tiny");
      cfg.attention = "fpdt", cfg.attention_chunk = 4, cfg.kv_offload = kv;
      cfg.kv_offload_dir = ::testing::TempDir();
      Gpt2 m(cfg);
      m.set_dropout({0.1, 0, 7});
      m.set_activation_checkpoint({mode, 1});
      PersistentParams p(init_params(m.units(), 3));
      torch::manual_seed(2);
      Batch b;
      b.input_ids = torch::randint(0, 256, {2, 18}, torch::kLong);
      b.targets = torch::randint(0, 256, {2, 18}, torch::kLong);
      b.dropout_step = 0;
      const auto before = kv_offload_stats().written_bytes;
      auto loss = m.loss(p, b);
      loss.backward();
      if (std::string(kv) == "disk") EXPECT_GT(kv_offload_stats().written_bytes, before);
      losses.push_back(loss.detach());
      grads.emplace_back();
      for (auto& u : p.tensors())
        for (auto& t : u) grads.back().push_back(t.grad());
    }
    EXPECT_TRUE(torch::equal(losses[0], losses[1]));
    for (std::size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << "gradient " << i;
  }
}
