// Model FLOPs per objective (models/model.h TrainFlops, docs/METRICS.md "Model FLOPs") against
// the GEMMs LibTorch actually runs: a RecordFunction hook on this thread counts 2 m n k of every
// outermost aten::mm / addmm / bmm / baddbmm of one forward + backward (one intra-op thread, so
// that no GEMM runs on another thread), and the count must equal TrainFlops::matmul exactly:
// GPT-2's causal LM, BERT's MLM (the head on masked positions only), BERT's sequence
// classification (pooler + classifier, no MLM head: the MFU > 1 of MiniLM), a distillation
// teacher's forward alone, and the projected student. Plus one count by hand.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cstring>

#include "workloads/distill/projected.h"
#include "workloads/models/params.h"

using namespace sb::models;
using I = std::int64_t;

namespace {

thread_local double g_flops = 0;  // GEMM FLOPs seen on this thread
thread_local int g_depth = 0;     // GEMMs open on this thread (a GEMM inside a GEMM is its own)

// The FLOPs of a GEMM op from its inputs, 0 for any other op.
double gemm_flops(const at::RecordFunction& fn) {
  const char* n = fn.name();
  int a = -1;  // index of the first matrix operand
  if (!std::strcmp(n, "aten::mm") || !std::strcmp(n, "aten::bmm")) a = 0;
  if (!std::strcmp(n, "aten::addmm") || !std::strcmp(n, "aten::baddbmm")) a = 1;
  if (a < 0) return 0;
  const auto in = fn.inputs();
  const auto x = in[a].toTensor(), y = in[a + 1].toTensor();  // (.., m, k), (.., k, n)
  const double batch = x.dim() == 3 ? static_cast<double>(x.size(0)) : 1.0;
  return 2.0 * batch * static_cast<double>(x.size(-2) * x.size(-1) * y.size(-1));
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const double f = gemm_flops(fn);
  if (f > 0 && g_depth++ == 0) g_flops += f;
  return nullptr;
}
void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const char* n = fn.name();
  if (!std::strcmp(n, "aten::mm") || !std::strcmp(n, "aten::bmm") || !std::strcmp(n, "aten::addmm") ||
      !std::strcmp(n, "aten::baddbmm"))
    --g_depth;
}

// GEMM FLOPs of f(), counted on this thread with one intra-op thread.
double counted(const std::function<void()>& f) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  g_flops = 0, g_depth = 0;
  auto h = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(h);
  at::set_num_threads(threads);
  EXPECT_EQ(g_depth, 0);
  return g_flops;
}

// Forward + backward of the training loss on fp32 leaves.
double step_gemm_flops(Model& m, const Batch& b, const LossCombiner& c = {}) {
  PersistentParams p(init_params(m.units(), 1));
  return counted([&] { m.loss_with(p, b, c).backward(); });
}

Batch lm_batch(I B, I T, I vocab) {
  Batch b;
  b.input_ids = torch::randint(vocab, {B, T}, torch::kLong);
  b.targets = torch::randint(vocab, {B, T}, torch::kLong);
  b.targets.select(0, 0).narrow(0, 0, 3).fill_(-100);  // positions without a target still run the head
  return b;
}

Batch mlm_batch(I B, I T, I vocab, I masked_every) {
  Batch b;
  b.input_ids = torch::randint(104, vocab, {B, T}, torch::kLong);
  auto mask = (torch::arange(T) % masked_every == 1).expand({B, T});
  b.targets = torch::where(mask, b.input_ids, torch::full_like(b.input_ids, -100));
  b.attention_mask = torch::ones({B, T}, torch::kLong);
  return b;
}

Batch cls_batch(I B, I T, I vocab, I labels) {
  Batch b;
  b.input_ids = torch::randint(104, vocab, {B, T}, torch::kLong);
  b.attention_mask = torch::ones({B, T}, torch::kLong);
  b.labels = torch::randint(labels, {B}, torch::kLong);
  return b;
}

}  // namespace

TEST(ModelFlops, Gpt2CausalLmCountsTheLmHeadOnEveryPosition) {
  auto m = make_model("gpt2-tiny");
  const auto b = lm_batch(2, 16, m->config().vocab);
  const auto f = m->train_flops(b);
  EXPECT_EQ(step_gemm_flops(*m, b), f.matmul);
  EXPECT_NE(f.counted.find("LM head (256 x 64) on every position"), std::string::npos) << f.counted;
}

// MFU's "as executed" count: naive computes the full square, sdpa about half of a causal one
// (its flash kernel skips the blocks above the diagonal), every variant all of BERT's.
TEST(ModelFlops, AttentionAsExecutedFollowsTheVariantsRecord) {
  for (const char* attention : {"naive", "sdpa"}) {
    auto gpt = make_model("gpt2-tiny", attention);
    const auto f = gpt->train_flops(lm_batch(2, 16, gpt->config().vocab));
    const double share = std::string(attention) == "naive" ? 1.0 : 0.5;
    const auto c = gpt->config();
    EXPECT_EQ(f.attention, 2 * 16 * 12.0 * static_cast<double>(c.n_layer) * 16 * static_cast<double>(c.attn_width()));
    EXPECT_EQ(f.executed(), f.total() - (1 - share) * f.attention) << attention;
    auto bert = make_model("bert-tiny", attention);
    const auto g = bert->train_flops(mlm_batch(2, 16, bert->config().vocab, 3));
    EXPECT_GT(g.attention, 0.0);
    EXPECT_EQ(g.executed(), g.total()) << attention;
    EXPECT_DOUBLE_EQ(forward_flops(f).executed(), f.executed() / 3) << attention;
  }
}

TEST(ModelFlops, BertMlmCountsTheHeadOnMaskedPositionsOnly) {
  auto m = make_model("bert-tiny");
  const auto b = mlm_batch(2, 16, m->config().vocab, 4);  // 4 of 16 positions masked per row
  const auto f = m->train_flops(b);
  EXPECT_EQ(step_gemm_flops(*m, b), f.matmul);
  // The same batch with every position masked runs the MLM head on 4x the rows.
  const auto all = mlm_batch(2, 16, m->config().vocab, 1).targets.fill_(5);
  Batch b2 = b;
  b2.targets = all;
  const double head = 6.0 * (64 * 64 + 128 * 64);  // transform d x d, decoder V x d, per row
  EXPECT_EQ(m->train_flops(b2).matmul - f.matmul, head * (32 - 8));
  EXPECT_NE(f.counted.find("MLM head (transform 64 x 64, decoder 128 x 64) on the masked positions only"),
            std::string::npos) << f.counted;
}

TEST(ModelFlops, BertClassificationCountsPoolerAndClassifierNotTheMlmHead) {
  auto m = make_model("bert-tiny");
  const auto b = cls_batch(2, 16, m->config().vocab, m->config().num_labels);
  const auto f = m->train_flops(b);
  EXPECT_EQ(step_gemm_flops(*m, b), f.matmul);
  // By hand, bert-tiny (d 64, 2 layers, d_ff 256, 2 labels) at B 2 x T 16: per token and layer
  // 6 (4 d^2 + 2 d d_ff) = 294,912, attention 12 T d = 12,288 -> 2 x 307,200 x 32 tokens;
  // per sequence 6 (d^2 + 2 d) = 25,344 x 2.
  EXPECT_EQ(f.matmul, 2.0 * 307200 * 32 + 25344.0 * 2);
  // Biases and LayerNorms, 6 per parameter and row: per token 2 x 6 (4 x 64 + 256 + 64 + 4 x 64)
  // + 6 x 128 (embeddings' LayerNorm); per sequence 6 (64 + 2).
  EXPECT_EQ(f.vector, (2.0 * 6 * (4 * 64 + 256 + 64 + 4 * 64) + 6.0 * 128) * 32 + 6.0 * 66 * 2);
  EXPECT_EQ(f.counted.find("MLM"), std::string::npos) << f.counted;
  EXPECT_NE(f.counted.find("pooler (64 x 64) and classifier (2 x 64)"), std::string::npos) << f.counted;
}

TEST(ModelFlops, PackedSequencesCountTheClassifierPerSequence) {
  auto m = make_model("bert-tiny");
  auto b = cls_batch(1, 16, m->config().vocab, m->config().num_labels);
  b.cls_index = torch::tensor({0, 5, 11}, torch::kLong);  // three sequences share the row
  b.labels = torch::tensor({0, 1, 1}, torch::kLong);
  b.segment_ids = torch::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2}, torch::kLong).view({1, 16});
  EXPECT_EQ(step_gemm_flops(*m, b), m->train_flops(b).matmul);
}

TEST(ModelFlops, ATeachersForwardIsAThirdOfItsStep) {
  for (const char* name : {"gpt2-tiny", "bert-tiny"}) {
    auto m = make_model(name);
    const auto b = std::string(name) == "gpt2-tiny" ? lm_batch(2, 16, m->config().vocab)
                                                    : mlm_batch(2, 16, m->config().vocab, 3);
    PersistentParams p(init_params(m->units(), 1), false);
    torch::NoGradGuard no_grad;
    const double fwd = counted([&] { m->loss_with(p, b, {}); });
    EXPECT_EQ(fwd, forward_flops(m->train_flops(b)).matmul) << name;
  }
}

TEST(ModelFlops, TheProjectedStudentAddsItsProjection) {
  auto s = std::make_unique<sb::distill::ProjectedStudent>(make_model("bert-tiny-1l"), 96);
  const auto b = mlm_batch(2, 16, s->config().vocab, 4);
  LossCombiner c;
  c.hidden = true;
  c.combine = [](const LossParts& p) { return p.loss + p.hidden.pow(2).mean(); };
  const auto f = s->train_flops(b);
  EXPECT_EQ(step_gemm_flops(*s, b, c), f.matmul);
  EXPECT_EQ(f.matmul - s->inner().train_flops(b).matmul, 6.0 * 96 * 64 * 32);
}
