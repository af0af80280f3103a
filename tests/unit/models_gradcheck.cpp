// Finite-difference gradient check of GPT-2 and BERT (MLM + classification) in double on
// tiny configurations: autograd through the whole model (embeddings, attention, LayerNorm,
// GELU, tied heads) must match central differences of the loss.
#include <gtest/gtest.h>

#include "workloads/models/bert.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/params.h"

using namespace sb::models;

namespace {

ModelConfig tiny(const std::string& preset, const std::string& attention) {
  auto c = preset_config(preset);
  c.vocab = 24, c.max_pos = 12, c.d_model = 8, c.n_layer = 2, c.n_head = 2, c.d_ff = 32;
  c.attention = attention, c.attention_chunk = 3;
  return c;
}

void gradcheck(Model& m, const Batch& b) {
  auto init = init_params(m.units(), 3);
  for (auto& u : init)
    for (auto& t : u) t = (t.dim() == 2 ? t * 20 : t + 0.1 * torch::randn_like(t)).to(torch::kFloat64);
  PersistentParams p(init);
  auto loss = m.loss(p, b);
  loss.backward();
  // The differences are taken of the same function: the training forward, gradients on (a
  // mixture of experts routes with its training capacity and adds its losses only then);
  // only the perturbation of a leaf runs without them.
  const auto set = [](torch::Tensor& flat, std::int64_t j, double v) {
    torch::NoGradGuard ng;
    flat[j] = v;
  };
  int checked = 0;
  for (std::size_t u = 0; u < p.tensors().size(); ++u)
    for (std::size_t i = 0; i < p.tensors()[u].size(); ++i) {
      auto& t = p.tensors()[u][i];
      ASSERT_TRUE(t.grad().defined()) << m.units()[u].params[i].name;
      auto flat = t.view({-1});
      auto g = t.grad().view({-1});
      for (std::int64_t j = 0; j < flat.numel(); j += std::max<std::int64_t>(1, flat.numel() / 4)) {
        const double h = 1e-6, orig = flat[j].item<double>();
        set(flat, j, orig + h);
        const double up = m.loss(p, b).item<double>();
        set(flat, j, orig - h);
        const double down = m.loss(p, b).item<double>();
        set(flat, j, orig);
        const double fd = (up - down) / (2 * h), ag = g[j].item<double>();
        EXPECT_NEAR(ag, fd, 1e-7 + 1e-5 * std::abs(fd)) << m.units()[u].params[i].name << "[" << j << "]";
        ++checked;
      }
    }
  EXPECT_GT(checked, 50);
}

}  // namespace

TEST(GradCheck, Gpt2Double) {
  for (const char* attn : {"naive", "online", "sdpa", "fpdt"}) {
    Gpt2 m(tiny("gpt2-tiny", attn));
    torch::manual_seed(0);
    Batch b;
    b.input_ids = torch::randint(0, 24, {2, 7}, torch::kLong);
    b.targets = torch::randint(0, 24, {2, 7}, torch::kLong);
    b.targets[0][2] = -100;  // ignored targets are excluded
    gradcheck(m, b);
  }
}

// The MoE family (moe.h): block 1 of the two has 4 experts; top-1 and top-2, the aux and z
// losses included, capacity dropping some assignments (routing is piecewise constant, so the
// differences see the same choices).
TEST(GradCheck, Gpt2MoeDouble) {
  for (const std::int64_t k : {1, 2}) {
    auto c = tiny("gpt2-moe-tiny", "naive");
    c.moe.top_k = k, c.moe.capacity_factor = 0.8;
    Gpt2 m(c);
    torch::manual_seed(2);
    Batch b;
    b.input_ids = torch::randint(0, 24, {2, 7}, torch::kLong);
    b.targets = torch::randint(0, 24, {2, 7}, torch::kLong);
    gradcheck(m, b);
    EXPECT_GT(m.routing()[1].dropped_assignments, 0) << "top-" << k << ": capacity dropped nothing";
  }
}

TEST(GradCheck, BertDoubleMlmAndClassification) {
  Bert m(tiny("bert-tiny", "chunked"));
  torch::manual_seed(1);
  Batch b;
  b.input_ids = torch::randint(0, 24, {2, 7}, torch::kLong);
  b.targets = torch::full({2, 7}, -100, torch::kLong);
  b.targets[0][1] = 5, b.targets[0][3] = 7, b.targets[1][2] = 11;
  b.attention_mask = torch::ones({2, 7}, torch::kLong);
  b.attention_mask[1][5] = 0, b.attention_mask[1][6] = 0;
  b.token_type_ids = torch::zeros({2, 7}, torch::kLong);
  b.token_type_ids[0][4] = 1;
  b.labels = torch::tensor({1, 0}, torch::kLong);
  gradcheck(m, b);
}
