// Pruning (the Modelcomp issue): magnitude pruning hits its sparsity exactly (globally and
// per matrix) and touches only linear weights; the CSR kernel equals the masked dense matmul
// within 1e-5 (one matrix and a whole model), with its exact byte count; removing FFN
// channels whose weights are zero gives the unpruned model's outputs (a construction test,
// GPT-2 and BERT); bad names and sparsities are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/core/check.h"
#include "workloads/models/family.h"
#include "workloads/models/params.h"
#include "workloads/prune/pruner.h"
#include "workloads/prune/schedule.h"
#include "workloads/prune/sparse_weights.h"

using namespace sb;
using namespace sb::prune;
using I = std::int64_t;

namespace {

models::Batch batch(const models::ModelConfig& c) {
  models::Batch b;
  b.input_ids = torch::randint(c.vocab, {2, 16}, at::detail::createCPUGenerator(3));
  return b;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

// The LM / MLM loss's gradient on two batches (Taylor importance's input).
models::UnitTensors gradients(models::Model& m, const models::UnitTensors& w) {
  models::UnitTensors copy;
  for (const auto& u : w) {
    auto& d = copy.emplace_back();
    for (const auto& t : u) d.push_back(t.clone());
  }
  models::PersistentParams p(std::move(copy), true);
  for (int s = 0; s < 2; ++s) {
    auto b = batch(m.config());
    b.targets = b.input_ids.roll(-1, 1);
    if (m.config().family == "bert") b.targets.narrow(1, 0, 8).fill_(-100);
    m.loss(p, b).backward();
  }
  models::UnitTensors g;
  for (const auto& u : p.tensors()) {
    auto& d = g.emplace_back();
    for (const auto& t : u) d.push_back(t.grad().defined() ? t.grad().clone() : torch::zeros_like(t));
  }
  return g;
}

}  // namespace

TEST(Prune, MagnitudeHitsItsSparsityExactlyOnLinearWeightsOnly) {
  auto model = models::make_model("gpt2-tiny");
  const auto w = models::init_params(model->units(), 1);
  for (const std::string scope : {"global", "layer"}) {
    const auto p = sb::prune::prune("magnitude", *model, w, {0.7, scope});
    I eligible = 0, zeros = 0;
    const auto& units = model->units();
    for (std::size_t u = 0; u < units.size(); ++u)
      for (std::size_t i = 0; i < units[u].params.size(); ++i) {
        const auto& spec = units[u].params[i];
        const auto& t = p.weights[u][i];
        if (!is_prunable(spec.name, spec.shape)) {
          EXPECT_TRUE(torch::equal(t, w[u][i])) << spec.name;  // embeddings, biases, LayerNorm
          continue;
        }
        const I z = t.numel() - t.count_nonzero().item<I>();
        if (scope == "layer") EXPECT_EQ(z, std::llround(0.7 * static_cast<double>(t.numel()))) << spec.name;
        eligible += t.numel(), zeros += z;
      }
    EXPECT_EQ(p.eligible, eligible);
    EXPECT_EQ(zeros, p.removed);
    // Global: one count over all eligible weights (per matrix, each rounds its own).
    if (scope == "global") EXPECT_EQ(p.removed, std::llround(0.7 * static_cast<double>(eligible)));
  }
  // Global: one threshold: the largest pruned |w| is at most the smallest kept |w|.
  const auto p = sb::prune::prune("magnitude", *model, w, {0.5, "global"});
  double pruned_max = 0, kept_min = 1e9;
  const auto& units = model->units();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i)
      if (is_prunable(units[u].params[i].name, units[u].params[i].shape)) {
        auto gone = p.weights[u][i] == 0, orig = w[u][i].abs();
        if (gone.any().item<bool>()) pruned_max = std::max(pruned_max, orig.masked_select(gone).max().item<double>());
        if ((~gone).any().item<bool>()) kept_min = std::min(kept_min, orig.masked_select(~gone).min().item<double>());
      }
  EXPECT_LE(pruned_max, kept_min);
}

TEST(Prune, CsrKernelEqualsTheMaskedDenseMatmul) {
  auto gen = at::detail::createCPUGenerator(7);
  auto w = torch::randn({96, 64}, gen) * (torch::rand({96, 64}, gen) > 0.9).to(torch::kFloat);
  auto b = torch::randn({96}, gen);
  auto x = torch::randn({3, 5, 64}, gen);
  auto csr = to_csr(w);
  const I nnz = w.count_nonzero().item<I>();
  EXPECT_EQ(csr_bytes(csr), nnz * 4 + nnz * 4 + (96 + 1) * 4);  // values, int32 columns, rows
  auto y = csr_linear(x, csr, b);
  ASSERT_EQ(y.sizes(), (std::vector<I>{3, 5, 96}));
  EXPECT_LE((y - at::linear(x, w, b)).abs().max().item<double>(), 1e-5);

  // A whole pruned model: CSR kernels against its dense masked weights.
  auto model = models::make_model("gpt2-tiny");
  const auto p = sb::prune::prune("magnitude", *model, models::init_params(model->units(), 2), {0.9, "global"});
  SparseChoice choice;
  auto sparse = sparse_weights(*p.model, p.weights, "csr", 32, &choice);
  EXPECT_EQ(choice.csr_matrices, 2 * 4);  // 4 linear weights per block, 2 blocks
  models::PersistentParams dense(p.weights, false);
  torch::NoGradGuard ng;
  const auto bt = batch(model->config());
  EXPECT_LE(rel_diff(p.model->logits(*sparse, bt), p.model->logits(dense, bt)), 1e-5);
  EXPECT_LT(sparse->model_bytes(), 4 * models::count_params(model->units()));
}

TEST(Prune, RemovingZeroFfnChannelsKeepsTheOutputs) {
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(preset);
    auto w = models::init_params(model->units(), 4);
    for (auto& u : w)
      for (auto& t : u) t.add_(0.01 * torch::randn(t.sizes(), at::detail::createCPUGenerator(9)));  // non-zero biases
    const I f = model->config().d_ff;
    // Zero every odd channel: its input row, its bias and its output column.
    auto odd = torch::arange(1, f, 2);
    for (std::size_t u = 0; u < model->units().size(); ++u)
      for (std::size_t i = 0; i < model->units()[u].params.size(); ++i) {
        const auto& n = model->units()[u].params[i].name;
        const bool in = n.find("c_fc.") != std::string::npos || n.find("intermediate.dense.") != std::string::npos;
        const bool out = n.find("mlp.c_proj.weight") != std::string::npos ||
                         (n.find(".output.dense.weight") != std::string::npos && n.find("attention.") == std::string::npos);
        if (in) w[u][i].index_fill_(0, odd, 0.0);
        if (out) w[u][i].index_fill_(1, odd, 0.0);
      }
    const auto g = gradients(*model, w);
    for (const std::string importance : {"magnitude", "taylor"}) {
      PruneConfig pc{0.5, "global", importance, &g};
      const auto p = sb::prune::prune("ffn", *model, w, pc);
      EXPECT_EQ(p.model->config().d_ff, f / 2) << preset;
      EXPECT_EQ(p.removed, model->config().n_layer * f / 2);
      EXPECT_EQ(models::count_params(p.model->units()),
                models::count_params(model->units()) - model->config().n_layer * (f / 2) * (2 * model->config().d_model + 1));
      models::PersistentParams full(w, false), small(p.weights, false);
      torch::NoGradGuard ng;
      const auto bt = batch(model->config());
      EXPECT_LE(rel_diff(p.model->logits(small, bt), model->logits(full, bt)), 1e-5) << preset << " " << importance;
    }
  }
}

TEST(Prune, BadNamesAndSparsitiesAreErrors) {
  auto model = models::make_model("gpt2-tiny");
  const auto w = models::init_params(model->units(), 1);
  auto error = [&](const std::string& name, PruneConfig c) {
    try {
      sb::prune::prune(name, *model, w, c);
    } catch (const sb::Error& e) {
      return e.message();
    }
    return std::string();
  };
  // An unknown name lists the known ones (the registry's record, harness/core/registry.h).
  EXPECT_EQ(error("lottery", {0.5, "global"}),
            "unknown pruning method 'lottery'; known: 2:4, ffn, heads, magnitude, none");
  EXPECT_EQ(error("magnitude", {1.0, "global"}), "pruning.sparsity must lie in [0, 1), got 1");
  EXPECT_EQ(error("magnitude", {0.5, "row"}), "pruning.scope 'row': use global or layer");
}

// 2:4: every group of 4 consecutive inputs of every prunable matrix keeps exactly its 2
// largest |w| (so each matrix is 50% sparse); everything else is untouched.
TEST(Prune, TwoOfFourKeepsTheTwoLargestOfEveryGroup) {
  auto model = models::make_model("bert-tiny");
  const auto w = models::init_params(model->units(), 2);
  const auto p = sb::prune::prune("2:4", *model, w, {0.5, "global"});
  I eligible = 0;
  const auto& units = model->units();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      const auto& spec = units[u].params[i];
      const auto& t = p.weights[u][i];
      if (!is_prunable(spec.name, spec.shape)) {
        EXPECT_TRUE(torch::equal(t, w[u][i])) << spec.name;
        continue;
      }
      eligible += t.numel();
      auto g = t.reshape({-1, 4}), o = w[u][i].reshape({-1, 4});
      EXPECT_TRUE(((g != 0).sum(1) == 2).all().item<bool>()) << spec.name;
      // The kept pair is the top 2 of |w| in the group: the smallest kept >= the largest dropped.
      auto kept = o.abs().masked_fill(g == 0, INFINITY).amin(1);
      auto dropped = o.abs().masked_fill(g != 0, -INFINITY).amax(1);
      EXPECT_TRUE((kept >= dropped).all().item<bool>()) << spec.name;
      EXPECT_TRUE(torch::equal(g.masked_select(g != 0), o.masked_select(g != 0))) << spec.name;
    }
  EXPECT_EQ(p.eligible, eligible);
  EXPECT_EQ(p.removed, eligible / 2);
  try {
    sb::prune::prune("2:4", *model, w, {0.7, "global"});
    ADD_FAILURE() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_EQ(e.message(), "pruning = \"2:4\" is 50% sparse by construction; pruning.sparsity is 0.7 (set it to 0.5)");
  }
}

// Heads whose output-projection columns are zero contribute nothing: pruning half the heads
// removes exactly those and keeps the logits (GPT-2's fused q/k/v and BERT's separate ones),
// ranked by magnitude or by Taylor importance (a head without output has no gradient either).
TEST(Prune, RemovingZeroHeadsKeepsTheOutputs) {
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(preset);
    auto w = models::init_params(model->units(), 5);
    for (auto& u : w)
      for (auto& t : u) t.add_(0.01 * torch::randn(t.sizes(), at::detail::createCPUGenerator(10)));
    const auto& c = model->config();
    const I H = c.n_head, Dh = c.dh(), d = c.d_model;
    for (std::size_t u = 0; u < model->units().size(); ++u)
      for (std::size_t i = 0; i < model->units()[u].params.size(); ++i) {
        const auto& n = model->units()[u].params[i].name;
        if (models::ends_with(n, "attn.c_proj.weight") || models::ends_with(n, "attention.output.dense.weight"))
          for (I h = 1; h < H; h += 2) w[u][i].narrow(1, h * Dh, Dh).zero_();  // heads 1, 3
      }
    const auto g = gradients(*model, w);
    for (const std::string importance : {"magnitude", "taylor"}) {
      PruneConfig pc{0.5, "global", importance, &g};
      const auto p = sb::prune::prune("heads", *model, w, pc);
      EXPECT_EQ(p.model->config().n_head, H / 2) << preset;
      EXPECT_EQ(p.model->config().dh(), Dh) << preset;
      EXPECT_EQ(p.removed, c.n_layer * H / 2);
      // Per layer and removed head: q, k, v rows and biases (3 Dh (d + 1)) and Dh output columns.
      EXPECT_EQ(models::count_params(p.model->units()),
                models::count_params(model->units()) - c.n_layer * (H / 2) * (3 * Dh * (d + 1) + Dh * d));
      models::PersistentParams full(w, false), small(p.weights, false);
      torch::NoGradGuard ng;
      const auto bt = batch(c);
      EXPECT_LE(rel_diff(p.model->logits(small, bt), model->logits(full, bt)), 1e-5) << preset << " " << importance;
    }
  }
}

// Gradual pruning's schedule (Zhu & Gupta): cubic from 0 at the first step to the final
// sparsity at the last, every `every` steps and at the end, never decreasing; oneshot once.
TEST(Prune, ScheduleIsCubicBetweenItsStepsOrOneShot) {
  sb::prune::Schedule s;
  s.kind = "cubic", s.sparsity = 0.8, s.begin = 10, s.end = 45, s.every = 10;
  std::vector<std::pair<I, double>> events;
  for (I t = 0; t < 60; ++t)
    if (const double x = sb::prune::scheduled_sparsity(s, t); x >= 0) events.emplace_back(t, x);
  ASSERT_EQ(events.size(), 5u);  // 10, 20, 30, 40 and the end, 45
  EXPECT_EQ(events.front(), (std::pair<I, double>{10, 0.0}));
  EXPECT_EQ(events.back().first, 45);
  EXPECT_DOUBLE_EQ(events.back().second, 0.8);
  const double x = 1.0 - 20.0 / 35.0;
  EXPECT_DOUBLE_EQ(events[2].second, 0.8 * (1 - x * x * x));  // t = 30
  for (std::size_t k = 1; k < events.size(); ++k) EXPECT_GT(events[k].second, events[k - 1].second);
  s.kind = "oneshot";
  EXPECT_DOUBLE_EQ(sb::prune::scheduled_sparsity(s, 10), 0.8);
  EXPECT_LT(sb::prune::scheduled_sparsity(s, 20), 0);
}
