// Pruning (the Modelcomp issue): magnitude pruning hits its sparsity exactly (globally and
// per matrix) and touches only linear weights; the CSR kernel equals the masked dense matmul
// within 1e-5 (one matrix and a whole model), with its exact byte count; removing FFN
// channels whose weights are zero gives the unpruned model's outputs (a construction test,
// GPT-2 and BERT); bad names and sparsities are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/core/check.h"
#include "workloads/models/params.h"
#include "workloads/prune/pruner.h"
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
    const auto p = sb::prune::prune("ffn", *model, w, {0.5, "global"});
    EXPECT_EQ(p.model->config().d_ff, f / 2) << preset;
    EXPECT_EQ(p.removed, model->config().n_layer * f / 2);
    EXPECT_EQ(models::count_params(p.model->units()),
              models::count_params(model->units()) - model->config().n_layer * (f / 2) * (2 * model->config().d_model + 1));
    models::PersistentParams full(w, false), small(p.weights, false);
    torch::NoGradGuard ng;
    const auto bt = batch(model->config());
    EXPECT_LE(rel_diff(p.model->logits(small, bt), model->logits(full, bt)), 1e-5) << preset;
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
  EXPECT_EQ(error("lottery", {0.5, "global"}), "pruning 'lottery' is unknown (`shardbench keys` lists them)");
  EXPECT_EQ(error("magnitude", {1.0, "global"}), "pruning.sparsity must lie in [0, 1), got 1");
  EXPECT_EQ(error("magnitude", {0.5, "row"}), "pruning.scope 'row': use global or layer");
}
