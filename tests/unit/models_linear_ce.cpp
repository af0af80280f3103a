// The chunked LM-head loss (models/loss.h linear_cross_entropy) against the unfused
// cross_entropy(x w^T): value and both gradients, with ignored targets and chunk boundaries
// inside the batch, in fp32 and bf16; and GPT-2's training loss through a provider that
// uses it (PersistentParams) against one that keeps the default (unfused) path.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "workloads/models/loss.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using namespace sb;

namespace {

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kFloat) - b.to(torch::kFloat)).norm() / b.to(torch::kFloat).norm()).item<double>();
}

// Plain weights through ParamProvider's defaults (the unfused loss).
class Unfused final : public models::ParamProvider {
 public:
  explicit Unfused(models::PersistentParams& p) : p_(p) {}
  std::vector<torch::Tensor> acquire(int unit) override { return p_.acquire(unit); }
  void release(int, const torch::Tensor&) override {}

 private:
  models::PersistentParams& p_;
};

}  // namespace

TEST(LinearCrossEntropy, EqualsTheUnfusedLossAndGradients) {
  auto gen = at::detail::createCPUGenerator(3);
  for (auto dt : {torch::kFloat, torch::kBFloat16}) {
    for (std::int64_t chunk : {3, 4, 0}) {  // 10 rows: a short last chunk, even chunks, one chunk
      auto x0 = torch::randn({10, 16}, gen).to(dt), w0 = torch::randn({37, 16}, gen).to(dt);
      auto t = torch::randint(37, {10}, gen, torch::kLong);
      t[2] = -100, t[7] = -100;  // ignored
      auto x1 = x0.clone().requires_grad_(), w1 = w0.clone().requires_grad_();
      auto x2 = x0.clone().requires_grad_(), w2 = w0.clone().requires_grad_();
      auto fused = models::linear_cross_entropy(x1, w1, t, chunk);
      auto plain = models::cross_entropy(at::linear(x2, w2), t);
      EXPECT_EQ(fused.scalar_type(), torch::kFloat);
      (fused * 3).backward();  // a non-unit upstream gradient reaches both
      (plain * 3).backward();
      const double tol = dt == torch::kFloat ? 1e-6 : 2e-2;
      EXPECT_NEAR(fused.item<double>(), plain.item<double>(), tol * plain.item<double>()) << chunk;
      EXPECT_LE(rel(x1.grad(), x2.grad()), tol) << chunk << " " << c10::toString(dt);
      EXPECT_LE(rel(w1.grad(), w2.grad()), tol) << chunk << " " << c10::toString(dt);
      EXPECT_EQ(x1.grad().scalar_type(), dt);
      // Ignored rows get no gradient.
      EXPECT_EQ(x1.grad()[2].abs().max().item<double>(), 0.0);
    }
  }
}

TEST(LinearCrossEntropy, Gpt2LossIsTheUnfusedOne) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 4);
  auto gen = at::detail::createCPUGenerator(5);
  models::Batch b;
  b.input_ids = torch::randint(model->config().vocab, {2, 16}, gen, torch::kLong);
  b.targets = torch::randint(model->config().vocab, {2, 16}, gen, torch::kLong);
  b.targets[0][3] = -100;
  auto clone = [&] {
    models::UnitTensors c;
    for (const auto& u : w) {
      auto& d = c.emplace_back();
      for (const auto& t : u) d.push_back(t.clone());
    }
    return c;
  };
  models::PersistentParams fused(clone()), base(clone());
  Unfused plain(base);
  auto lf = model->loss(fused, b), lp = model->loss(plain, b);
  lf.backward();
  lp.backward();
  EXPECT_NEAR(lf.item<double>(), lp.item<double>(), 1e-6 * lp.item<double>());
  for (std::size_t u = 0; u < w.size(); ++u)
    for (std::size_t i = 0; i < w[u].size(); ++i)
      EXPECT_LE(rel(fused.tensors()[u][i].grad(), base.tensors()[u][i].grad()), 1e-5)
          << model->units()[u].params[i].name;
}
