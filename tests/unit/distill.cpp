// Distillation (the Modelcomp issue): the soft loss's value; its gradient through a tiny model
// against central finite differences (fp64); temperature 1 with soft weight 0 trains exactly
// as the model's own loss does (bit for bit); DistilBERT's every-other-layer initialisation.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "workloads/distill/distill.h"
#include "workloads/distill/projected.h"
#include "workloads/models/family.h"
#include "workloads/models/params.h"
#include "workloads/train/reference_trainer.h"

using namespace sb;
using I = std::int64_t;

namespace {

models::Batch lm_batch(const models::ModelConfig& c, I B, I T, std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  models::Batch b;
  if (c.family == "gpt2") {
    auto tok = torch::randint(c.vocab, {B, T + 1}, gen, torch::kInt64);
    b.input_ids = tok.narrow(1, 0, T).contiguous();
    b.targets = tok.narrow(1, 1, T).contiguous();
  } else {  // BERT MLM: every third position masked, plus labels
    auto tok = torch::randint(104, c.vocab, {B, T}, gen, torch::kInt64);
    auto mask = (torch::arange(T) % 3 == 1).expand({B, T});
    b.targets = torch::where(mask, tok, torch::full_like(tok, -100));
    b.input_ids = torch::where(mask, torch::full_like(tok, 103), tok);
    b.attention_mask = torch::ones({B, T}, torch::kLong);
    b.attention_mask.narrow(1, T - 2, 2).select(0, 0).fill_(0);  // padding in row 0
    b.labels = torch::randint(c.num_labels, {B}, gen, torch::kInt64);
  }
  return b;
}

models::UnitTensors to(models::UnitTensors w, torch::ScalarType dtype) {
  for (auto& u : w)
    for (auto& t : u) t = t.to(dtype);
  return w;
}

TEST(Distill, SoftLossFollowsItsFormula) {
  auto s = torch::tensor({{1.0, 2.0, 0.5}, {0.0, -1.0, 3.0}});
  auto t = torch::tensor({{0.5, 2.5, 0.0}, {1.0, 1.0, 1.0}});
  EXPECT_NEAR(distill::soft_loss(s, s, 2.0).item<double>(), 0.0, 1e-7);
  // By hand: T^2 x mean_rows sum_k p_t,k (log p_t,k - log p_s,k), p = softmax(x / T).
  const double T = 2.0;
  double want = 0;
  for (int r = 0; r < 2; ++r) {
    auto pt = torch::softmax(t[r] / T, 0), ps = torch::softmax(s[r] / T, 0);
    for (int k = 0; k < 3; ++k)
      want += pt[k].item<double>() * (std::log(pt[k].item<double>()) - std::log(ps[k].item<double>()));
  }
  want = want / 2 * T * T;
  EXPECT_NEAR(distill::soft_loss(s, t, T).item<double>(), want, 1e-6);
  EXPECT_THROW(distill::soft_loss(s, t.narrow(1, 0, 2), T), sb::Error);
}

// d loss / d theta by autograd against (L(theta + h) - L(theta - h)) / 2h, fp64, on entries
// of every unit, for the full loss: hard + soft + hidden.
void gradcheck(std::unique_ptr<models::Model> student, std::unique_ptr<models::Model> teacher) {
  const std::string student_preset = student->config().preset;
  models::PersistentParams sp(to(models::init_params(student->units(), 3), torch::kDouble), true);
  models::PersistentParams tp(to(models::init_params(teacher->units(), 4), torch::kDouble), false);
  for (auto& u : tp.tensors())
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(20);  // a teacher whose soft targets differ from the student's
  auto b = lm_batch(student->config(), 2, 9, 5);
  distill::DistillConfig c;
  c.temperature = 1.7, c.soft_weight = 0.6, c.hard_weight = 0.4, c.hidden_weight = 0.3;
  distill::attach_teacher(*teacher, [&](const auto& f) { return f(tp); }, b, true);
  auto loss = [&] { return student->loss_with(sp, b, distill::combiner(b, c)); };
  auto l = loss();
  ASSERT_EQ(l.scalar_type(), torch::kDouble);
  EXPECT_GT(distill::soft_loss(b.teacher_logits, b.teacher_logits * 0, c.temperature).item<double>(), 1e-3);
  l.backward();
  const double h = 1e-6;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  int checked = 0;
  for (auto& unit : sp.tensors()) {
    for (auto& w : unit) {
      if (w.numel() < 2) continue;
      auto flat = w.detach().view({-1});  // shares storage: perturbs the leaf in place
      auto g = w.grad().view({-1});
      for (int k = 0; k < 2; ++k) {
        const I i = torch::randint(flat.numel(), {1}, gen).item<I>();
        const double x = flat[i].item<double>();
        flat[i] = x + h;
        const double up = loss().item<double>();
        flat[i] = x - h;
        const double down = loss().item<double>();
        flat[i] = x;
        const double fd = (up - down) / (2 * h), ad = g[i].item<double>();
        EXPECT_NEAR(ad, fd, 1e-6 + 1e-5 * std::abs(fd)) << student_preset << " " << w.sizes() << " [" << i << "]";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(Distill, GradientPassesFiniteDifferencesGpt2) {
  gradcheck(models::make_model("gpt2-tiny"), models::make_model("gpt2-tiny"));
}
TEST(Distill, GradientPassesFiniteDifferencesBert) {
  gradcheck(models::make_model("bert-tiny-1l"), models::make_model("bert-tiny"));
}
// A teacher half as wide: the hidden states meet through the student's learned projection,
// whose gradient is checked with the rest.
TEST(Distill, GradientPassesFiniteDifferencesThroughAProjection) {
  auto narrow = models::preset_config("gpt2-tiny");
  narrow.d_model = 32, narrow.d_ff = 128;
  auto student = std::make_unique<distill::ProjectedStudent>(models::make_model("gpt2-tiny"), 32);
  ASSERT_EQ(student->units().back().params.at(0).shape, (std::vector<I>{32, 64}));
  gradcheck(std::move(student), models::family("gpt2").make(narrow));
}

// Temperature 1, soft weight 0, hard weight 1: the same losses and parameters as training on
// the model's loss, over steps of AdamW (one-process trainer). BERT's are bit-equal; GPT-2's
// plain loss is the chunked LM-head cross-entropy (models::linear_cross_entropy, which never
// forms the whole logits) while distillation needs the logits, so the two sum in another
// order: equal within fp32 rounding.
TEST(Distill, SoftWeightZeroEqualsOrdinaryTraining) {
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(preset), teacher = models::make_model(preset);
    models::PersistentParams tp(models::init_params(teacher->units(), 77), false);
    train::TrainConfig plain;
    plain.adamw.lr = 3e-3, plain.adamw.total_steps = 5;
    auto distilled = plain;
    distill::DistillConfig c;
    c.temperature = 1, c.soft_weight = 0, c.hard_weight = 1;
    distilled.loss = [&](models::ParamProvider& p, const models::Batch& b) {
      return model->loss_with(p, b, distill::combiner(b, c));
    };
    train::ReferenceTrainer a(*model, plain), d(*model, distilled);
    for (int s = 0; s < 5; ++s) {
      auto b = lm_batch(model->config(), 4, 12, 100 + s);
      auto bt = b;
      distill::attach_teacher(*teacher, [&](const auto& f) { return f(tp); }, bt, false);
      const auto ra = a.step({b}), rd = d.step({bt});
      const double tol = preset == "bert-tiny" ? 0.0 : 1e-6;
      EXPECT_NEAR(ra.loss, rd.loss, tol * std::abs(ra.loss)) << preset << " step " << s;
      EXPECT_NEAR(ra.grad_norm, rd.grad_norm, 10 * tol * std::abs(ra.grad_norm)) << preset << " step " << s;
    }
    for (std::size_t u = 0; u < a.params().size(); ++u)
      for (std::size_t i = 0; i < a.params()[u].size(); ++i)
        if (preset == "bert-tiny")
          EXPECT_TRUE(torch::equal(a.params()[u][i], d.params()[u][i])) << preset << " unit " << u << " param " << i;
        else  // Adam turns rounding in near-cancelling gradients into up to ~3e-5 (tests/mpi/distill.cpp)
          EXPECT_LT((a.params()[u][i] - d.params()[u][i]).abs().max().item<double>(), 1e-4)
              << preset << " unit " << u << " param " << i;
    // ... and a soft weight > 0 does change training (the test can fail).
    c.soft_weight = 0.5;
    train::ReferenceTrainer e(*model, distilled);
    auto b = lm_batch(model->config(), 4, 12, 100);
    distill::attach_teacher(*teacher, [&](const auto& f) { return f(tp); }, b, false);
    EXPECT_NE(e.step({b}).loss, train::ReferenceTrainer(*model, plain).step({lm_batch(model->config(), 4, 12, 100)}).loss);
  }
}

TEST(Distill, StudentInitCopiesEveryOtherTeacherLayer) {
  auto teacher = models::make_model("bert-tiny"), student = models::make_model("bert-tiny-1l");
  const auto tw = models::init_params(teacher->units(), 8);
  const auto sw = distill::student_from_teacher(*student, *teacher, tw);
  ASSERT_EQ(sw.size(), 3u);  // embed, block.0, head
  for (auto [s, t] : {std::pair{0, 0}, {1, 1}, {2, 3}})
    for (std::size_t i = 0; i < sw[s].size(); ++i) EXPECT_TRUE(torch::equal(sw[s][i], tw[t][i])) << s << " " << i;
  auto gpt = models::make_model("gpt2-tiny");
  try {
    distill::student_from_teacher(*gpt, *teacher, tw);
    ADD_FAILURE() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("student gpt2-tiny is a gpt2 model, teacher bert-tiny a bert"), std::string::npos) << e.what();
  }
}

}  // namespace
