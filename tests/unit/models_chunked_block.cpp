// FPDT's pipeline over whole blocks (activation_checkpoint = "chunked"; models/checkpoint.h,
// chunked_block): a GPT-2 training step run on seq_chunks chunks equals the plain step (loss
// within 1e-5 relative, every gradient within 2e-5 of the largest) for the naive, sdpa and fpdt
// variants, 1 to 5 chunks (uneven ones too), residual dropout on (its masks replay per chunk);
// the chunks' keys, values and inputs in a file equal them in memory bit for bit and move
// exactly each chunk's padded bytes out once and back once; evaluation stores nothing; the provider sees
// each block's forward acquire once outside a recompute scope and one gradient part per chunk
// but the last; each block's two stores are freed by its backward, not with the graph; a
// sequence shorter than seq_chunks runs; and BERT, attention dropout and a missing seq_chunks
// are refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "workloads/models/attention.h"
#include "workloads/models/checkpoint.h"
#include "workloads/models/direct_file.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "tests/unit/counting_params.h"

using namespace sb;
using namespace sb::models;

namespace {

constexpr std::int64_t kB = 2, kT = 18;

using sbtest::CountingParams;

struct Step {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
  int plain_acquires = 0, scoped_acquires = 0, partial_parts = 0;
  // KvStores alive (beyond those before the step) after forward, and after backward with the
  // loss and its graph still held.
  std::int64_t stores_forward = 0, stores_backward = 0;
};

ModelConfig config(const std::string& attention, std::int64_t chunks, const std::string& kv) {
  auto cfg = preset_config("gpt2-tiny");
  cfg.attention = attention, cfg.attention_chunk = 4, cfg.seq_chunks = chunks, cfg.kv_offload = kv;
  cfg.kv_offload_dir = ::testing::TempDir();
  return cfg;
}

Batch batch() {
  torch::manual_seed(2);
  Batch b;
  b.input_ids = torch::randint(0, 256, {kB, kT}, torch::kLong);
  b.targets = torch::randint(0, 256, {kB, kT}, torch::kLong);
  b.dropout_step = 0;
  return b;
}

Step step(const ModelConfig& cfg, CheckpointMode mode) {
  Gpt2 m(cfg);
  m.set_dropout({0.1, 0, 7});
  m.set_activation_checkpoint({mode, 1});
  CountingParams p(init_params(m.units(), 3));
  const std::int64_t live = kv_offload_stats().live_stores;
  auto loss = m.loss(p, batch());
  const std::int64_t after_forward = kv_offload_stats().live_stores - live;
  loss.backward();
  Step s{loss.detach(), {}, p.plain_acquires, p.scoped_acquires, p.partial_parts, after_forward,
         kv_offload_stats().live_stores - live};
  for (auto& u : p.inner().tensors())
    for (auto& t : u) s.grads.push_back(t.grad());
  return s;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

}  // namespace

TEST(ChunkedBlock, EqualsThePlainStep) {
  for (const std::string attention : {"naive", "sdpa", "fpdt"}) {
    const Step plain = step(config(attention, 0, "none"), CheckpointMode::None);
    const std::int64_t L = preset_config("gpt2-tiny").n_layer;
    for (const std::int64_t chunks : {1, 2, 4, 5}) {  // 18 tokens: 18; 9 + 9; 5 x 3 + 3; 4 x 4 + 2
      const std::string what = attention + ", " + std::to_string(chunks) + " chunks";
      const Step got = step(config(attention, chunks, "none"), CheckpointMode::Chunked);
      EXPECT_NEAR(got.loss.item<double>(), plain.loss.item<double>(), 1e-5 * std::abs(plain.loss.item<double>())) << what;
      ASSERT_EQ(got.grads.size(), plain.grads.size());
      for (std::size_t i = 0; i < got.grads.size(); ++i) {
        ASSERT_TRUE(got.grads[i].defined()) << what << " parameter " << i;
        EXPECT_LE(max_abs(got.grads[i] - plain.grads[i]), 2e-5 * std::max(1.0, max_abs(plain.grads[i])))
            << what << " parameter " << i;
      }
      const std::int64_t n0 = (kT + chunks - 1) / chunks, C = (kT + n0 - 1) / n0;
      // Each block: its forward's first chunk acquires as a forward does, the later chunks and
      // backward's C recomputations inside a recompute scope; C - 1 chunks' gradients are parts.
      EXPECT_EQ(got.scoped_acquires, plain.scoped_acquires + L * (2 * C - 1)) << what;
      EXPECT_EQ(got.plain_acquires, plain.plain_acquires) << what;
      EXPECT_EQ(got.partial_parts, L * (C - 1)) << what;
    }
  }
}

TEST(ChunkedBlock, OffloadedChunksEqualInMemoryBitForBit) {
  for (const std::string attention : {"sdpa", "fpdt"}) {
    const Step mem = step(config(attention, 4, "none"), CheckpointMode::Chunked);
    const auto before = kv_offload_stats();
    const Step disk = step(config(attention, 4, "disk"), CheckpointMode::Chunked);
    const auto after = kv_offload_stats();
    EXPECT_TRUE(torch::equal(mem.loss, disk.loss)) << attention;
    for (std::size_t i = 0; i < mem.grads.size(); ++i)
      EXPECT_TRUE(torch::equal(mem.grads[i], disk.grads[i])) << attention << " gradient " << i;
    // Every block's 4 chunks (5, 5, 5, 3 tokens): k and v, (B, H, n, Dh) fp32 each, side by
    // side, and the block input's rows (B n, d), each padded to the file's alignment, out once
    // and back once.
    const auto cfg = preset_config("gpt2-tiny");
    std::uint64_t bytes = 0;
    for (const std::int64_t n : {5, 5, 5, 3})
      bytes += DirectFile::round_up(static_cast<std::uint64_t>(2 * kB * cfg.n_head * n * cfg.dh() * 4)) +
               DirectFile::round_up(static_cast<std::uint64_t>(kB * n * cfg.d_model * 4));
    EXPECT_EQ(after.written_bytes - before.written_bytes, bytes * cfg.n_layer) << attention;
    EXPECT_EQ(after.read_bytes - before.read_bytes, bytes * cfg.n_layer) << attention;
  }
}

TEST(ChunkedBlock, EachBlocksBackwardFreesItsStores) {
  const std::int64_t L = preset_config("gpt2-tiny").n_layer;
  for (const char* kv : {"none", "disk"}) {
    const Step s = step(config("sdpa", 4, kv), CheckpointMode::Chunked);
    EXPECT_EQ(s.stores_forward, 2 * L) << kv << ": a block's keys and values, and its inputs";
    EXPECT_EQ(s.stores_backward, 0) << kv << ": the graph still exists; the stores must not";
  }
}

TEST(ChunkedBlock, EvaluationStoresNothingAndEqualsThePlainForward) {
  Gpt2 plain(config("sdpa", 0, "none"));
  Gpt2 chunked(config("sdpa", 3, "disk"));
  chunked.set_activation_checkpoint({CheckpointMode::Chunked, 1});
  PersistentParams p(init_params(plain.units(), 3));
  torch::NoGradGuard off;
  const auto before = kv_offload_stats().written_bytes;
  const auto want = plain.logits(p, batch()), got = chunked.logits(p, batch());
  EXPECT_EQ(kv_offload_stats().written_bytes, before);
  EXPECT_LE(max_abs(got - want), 1e-5 * std::max(1.0, max_abs(want)));
}

// A sequence shorter than seq_chunks (a short prompt) runs in chunks of one token.
TEST(ChunkedBlock, ShortSequencesRunInChunksOfOneToken) {
  Gpt2 plain(config("sdpa", 0, "none"));
  Gpt2 chunked(config("sdpa", 8, "none"));
  chunked.set_activation_checkpoint({CheckpointMode::Chunked, 1});
  PersistentParams p(init_params(plain.units(), 3));
  Batch b = batch();
  b.input_ids = b.input_ids.narrow(1, 0, 3).contiguous(), b.targets = b.targets.narrow(1, 0, 3).contiguous();
  torch::NoGradGuard off;
  const auto want = plain.logits(p, b), got = chunked.logits(p, b);
  EXPECT_LE(max_abs(got - want), 1e-5 * std::max(1.0, max_abs(want)));
}

TEST(ChunkedBlock, RefusedWithoutChunksAndForBert) {
  Gpt2 m(config("sdpa", 0, "none"));
  try {
    m.set_activation_checkpoint({CheckpointMode::Chunked, 1});
    FAIL() << "accepted seq_chunks = 0";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("runs each block on seq_chunks chunks of the sequence; set seq_chunks"),
              std::string::npos) << e.what();
  }
  // Attention dropout: its masks would be keyed by a probability's place in its chunk.
  Gpt2 dropping(config("naive", 2, "none"));
  dropping.set_dropout({0, 0.1, 7});
  dropping.set_activation_checkpoint({CheckpointMode::Chunked, 1});
  PersistentParams p(init_params(dropping.units(), 3));
  try {
    dropping.loss(p, batch());
    FAIL() << "accepted attention dropout";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("attention_dropout with activation_checkpoint = \"chunked\""),
              std::string::npos) << e.what();
  }
  auto bert = make_model("bert-tiny");
  try {
    bert->set_activation_checkpoint({CheckpointMode::Chunked, 1});
    FAIL() << "accepted BERT";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("pipelines a causal model's chunks; BERT attends both ways"),
              std::string::npos) << e.what();
  }
}
