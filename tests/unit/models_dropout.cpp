// Dropout with masks independent of the mesh (models/dropout.h): the kept fraction is 1 - p;
// a mask is a function of (seed, step, site, global token, feature) alone, so rows sliced off a
// batch (a data-parallel rank's, a micro-batch's, a sequence-parallel block's) get the rows of
// the whole batch's mask; evaluation (dropout_step < 0) and p = 0 change nothing; and GPT-2's
// and BERT's loss over a batch equals, gradients included, the loss over its two halves
// weighted by their terms (what data parallelism and micro-batches compute), with the residual
// stream and the attention probabilities dropped; the chunked attention drops the naive one's
// elements; variants that never form probabilities refuse attention_dropout.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "workloads/data/batches.h"
#include "workloads/models/attention.h"
#include "workloads/models/dropout.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using namespace sb;

namespace {

models::Batch batch(const models::ModelConfig& c, std::int64_t B, std::int64_t T) {
  torch::manual_seed(7);
  models::Batch b;
  auto tok = torch::randint(c.vocab - 1, {B, T + 1}, torch::kInt64);
  b.input_ids = tok.narrow(1, 0, T).contiguous();
  b.targets = tok.narrow(1, 1, T).contiguous();
  if (c.family == "bert") b.targets.masked_fill_(torch::rand({B, T}) > 0.3, -100);
  b.dropout_step = 3;
  return b;
}

TEST(Dropout, KeepsOneMinusPAndDependsOnlyOnItsIntegers) {
  const auto token = torch::arange(4000, torch::kLong);
  const auto key = models::dropout_key(42, 5);
  const auto keep = models::dropout_keep(key, 1, token, 64, 0.1);
  EXPECT_NEAR(keep.to(torch::kDouble).mean().item<double>(), 0.9, 0.005);
  EXPECT_TRUE(torch::equal(keep, models::dropout_keep(key, 1, token, 64, 0.1)));
  // Another site, step or seed: an unrelated mask (agreement p^2 + (1-p)^2 = 0.82, not 1).
  for (const auto& other : {models::dropout_keep(key, 2, token, 64, 0.1),
                            models::dropout_keep(models::dropout_key(42, 6), 1, token, 64, 0.1),
                            models::dropout_keep(models::dropout_key(43, 5), 1, token, 64, 0.1)})
    EXPECT_NEAR((other == keep).to(torch::kDouble).mean().item<double>(), 0.82, 0.01);
  // Rows of a slice are the slice of the rows.
  EXPECT_TRUE(torch::equal(models::dropout_keep(key, 1, token.narrow(0, 1000, 7), 64, 0.1),
                           keep.narrow(0, 1000, 7)));
}

TEST(Dropout, SlicedRowsKeepTheirMasks) {
  auto model = models::make_model("gpt2-tiny");
  const auto b = batch(model->config(), 4, 8);
  const auto whole = models::dropout_rows(0.2, 9, b);
  const auto half = models::dropout_rows(0.2, 9, data::slice_rows(b, 2, 4));
  EXPECT_TRUE(torch::equal(half.token, whole.token.narrow(0, 16, 16)));
  const auto x = torch::randn({32, 16});
  EXPECT_TRUE(torch::equal(half.apply(x.narrow(0, 16, 16), 3), whole.apply(x, 3).narrow(0, 16, 16)));
  // A sequence-parallel block of the rows.
  const auto block = models::dropout_rows(0.2, 9, b, 8, 8);
  EXPECT_TRUE(torch::equal(block.token, whole.token.narrow(0, 8, 8)));
  // Off: evaluation batches and p = 0.
  auto eval = b;
  eval.dropout_step = -1;
  EXPECT_FALSE(models::dropout_rows(0.2, 9, eval).on());
  EXPECT_FALSE(models::dropout_rows(0.0, 9, b).on());
  EXPECT_TRUE(torch::equal(models::DropoutRows{}.apply(x, 1), x));
}

TEST(Dropout, ABatchIsTheWeightedSumOfItsHalves) {
  for (const std::string name : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(name);
    model->set_dropout({0.1, 0.1, 11});
    models::PersistentParams params(models::init_params(model->units(), 1), true);
    const auto b = batch(model->config(), 4, 8);
    auto terms = [](const models::Batch& x) { return (x.targets != -100).sum().item<double>(); };
    std::vector<torch::Tensor> leaves;
    for (auto& u : params.tensors())
      for (auto& t : u) leaves.push_back(t);
    auto grads = [&](const torch::Tensor& loss) {
      std::vector<torch::Tensor> flat;
      for (auto& g : torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/true, false, /*allow_unused=*/true))
        if (g.defined()) flat.push_back(g.reshape({-1}));
      return torch::cat(flat);
    };
    const auto whole = model->loss(params, b);
    const auto a = data::slice_rows(b, 0, 2), c = data::slice_rows(b, 2, 4);
    const double n = terms(b);
    const auto halves = model->loss(params, a) * (terms(a) / n) + model->loss(params, c) * (terms(c) / n);
    EXPECT_NEAR(halves.item<double>(), whole.item<double>(), 1e-5 * std::abs(whole.item<double>())) << name;
    EXPECT_LE((grads(halves) - grads(whole)).abs().max().item<double>(), 1e-6) << name;
    // Dropout is on (the loss moved) and replays (the same loss again).
    EXPECT_EQ(model->loss(params, b).item<double>(), whole.item<double>()) << name;
    auto model0 = models::make_model(name);
    EXPECT_GT(std::abs(model0->loss(params, b).item<double>() - whole.item<double>()), 1e-4) << name;
    auto eval = b;
    eval.dropout_step = -1;
    EXPECT_EQ(model->loss(params, eval).item<double>(), model0->loss(params, eval).item<double>()) << name;
  }
}

// Attention probabilities: the chunked variant (queries in chunks of 3, causal key prefixes)
// drops exactly the naive variant's elements.
TEST(Dropout, ChunkedAttentionDropsTheNaiveElements) {
  torch::manual_seed(3);
  const auto q = torch::randn({2, 3, 8, 4}), k = torch::randn({2, 3, 8, 4}), v = torch::randn({2, 3, 8, 4});
  models::Batch b;
  b.input_ids = torch::zeros({2, 8}, torch::kLong);
  b.row0 = 5, b.dropout_step = 2;
  for (bool causal : {false, true}) {
    models::AttentionMask m;
    m.causal = causal;
    m.dropout = models::attention_dropout(0.3, 7, b, 6, 3, 3);  // heads 3..5 of 6 (a tp rank's)
    m.dropout.site = models::probs_site(1);
    const auto naive = models::make_attention("naive", 0)->forward(q, k, v, m);
    const auto chunked = models::make_attention("chunked", 3)->forward(q, k, v, m);
    EXPECT_LE((naive - chunked).abs().max().item<double>(), 1e-6) << causal;
    models::AttentionMask plain = m;
    plain.dropout = {};
    EXPECT_GT((naive - models::make_attention("naive", 0)->forward(q, k, v, plain)).abs().max().item<double>(), 1e-3);
  }
}

// BERT's classifier input (the pooled [CLS] output) is dropped too, keyed by the sequence:
// a classification batch's loss is the mean of its halves'.
TEST(Dropout, BertClassifierInputIsTheSequencesOwn) {
  auto model = models::make_model("bert-tiny");
  model->set_dropout({0.3, 0, 11});
  models::PersistentParams params(models::init_params(model->units(), 1), false);
  torch::manual_seed(5);
  models::Batch b;
  b.input_ids = torch::randint(model->config().vocab, {4, 8}, torch::kLong);
  b.labels = torch::randint(model->config().num_labels, {4}, torch::kLong);
  b.dropout_step = 1;
  const double whole = model->loss(params, b).item<double>();
  const double halves = 0.5 * (model->loss(params, data::slice_rows(b, 0, 2)).item<double>() +
                               model->loss(params, data::slice_rows(b, 2, 4)).item<double>());
  EXPECT_NEAR(halves, whole, 1e-5 * std::abs(whole));
  auto plain = models::make_model("bert-tiny");
  EXPECT_GT(std::abs(plain->loss(params, b).item<double>() - whole), 1e-4);
}

TEST(Dropout, RefusedWhereAModelHasNone) {
  auto model = models::make_model("gpt2-tiny");
  EXPECT_THROW(model->set_dropout({1.0, 0, 1}), std::exception);
  // Attention probabilities: only variants that form them.
  auto online = models::make_model("gpt2-tiny", "online");
  EXPECT_THROW(online->set_dropout({0, 0.1, 1}), std::exception);
  online->set_dropout({0.1, 0, 1});  // the residual stream: any variant
}

}  // namespace
