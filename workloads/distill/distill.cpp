// Distillation losses, the teacher's forward and the student's initialisation (distill.h).
#include "workloads/distill/distill.h"

#include "harness/core/check.h"
#include "workloads/models/loss.h"

namespace sb::distill {
namespace {
// bf16 / fp16 logits are compared in fp32 (softmax of 16-bit values loses the soft targets'
// small probabilities), as the hard loss is (models/loss.h); fp32 and fp64 as they are.
using models::widened;
}  // namespace

torch::Tensor soft_loss(const torch::Tensor& student, const torch::Tensor& teacher, double temperature) {
  SB_CHECK(student.sizes() == teacher.sizes(),
           "distillation: the student's logits {} and the teacher's {} differ in shape (same "
           "vocabulary or labels, same batch)", fmt::join(student.sizes(), "x"), fmt::join(teacher.sizes(), "x"));
  auto ls = torch::log_softmax(widened(student) / temperature, -1);
  auto lt = torch::log_softmax(widened(teacher).to(ls.scalar_type()) / temperature, -1);
  // KL(p_t || p_s) per row = sum p_t (log p_t - log p_s)
  auto kl = (lt.exp() * (lt - ls)).sum(-1);
  return kl.mean() * (temperature * temperature);
}

torch::Tensor hidden_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                          const torch::Tensor& keep, std::int64_t terms) {
  SB_CHECK(student.sizes() == teacher.sizes(),
           "distillation: hidden states of the student {} and the teacher {} differ (the hidden "
           "loss needs equal widths)", fmt::join(student.sizes(), "x"), fmt::join(teacher.sizes(), "x"));
  auto se = (widened(student) - widened(teacher).to(widened(student).scalar_type())).pow(2).mean(-1);  // (B*T)
  if (keep.defined()) se = se * keep.reshape({-1}).to(se.dtype());
  return se.sum() / static_cast<double>(terms);
}

models::LossCombiner combiner(const models::Batch& b, const DistillConfig& c) {
  SB_CHECK(b.teacher_logits.defined(), "distillation: the batch carries no teacher outputs");
  models::LossCombiner lc;
  lc.hidden = c.hidden_weight > 0;
  lc.combine = [&b, c](const models::LossParts& s) {
    auto loss = s.loss * c.hard_weight + soft_loss(s.logits, b.teacher_logits, c.temperature) * c.soft_weight;
    if (c.hidden_weight > 0)
      loss = loss + hidden_loss(s.hidden, b.teacher_hidden, b.attention_mask.defined() ? b.attention_mask != 0 : torch::Tensor(),
                                s.logits.size(0)) * c.hidden_weight;
    return loss;
  };
  return lc;
}

void attach_teacher(models::Model& teacher, const RunTeacher& run, models::Batch& b, bool hidden) {
  torch::NoGradGuard no_grad;
  models::LossCombiner keep;
  keep.hidden = hidden;
  keep.combine = [&](const models::LossParts& t) {
    b.teacher_logits = t.logits.detach();
    if (hidden) b.teacher_hidden = t.hidden.detach();
    return t.loss;
  };
  run([&](models::ParamProvider& p) { return teacher.loss_with(p, b, keep); });
}

models::UnitTensors student_from_teacher(const models::Model& student, const models::Model& teacher,
                                         const models::UnitTensors& tw) {
  const auto& s = student.config();
  const auto& t = teacher.config();
  SB_CHECK(s.family == t.family, "distill.student_init: student {} is a {} model, teacher {} a {}",
           s.preset, s.family, t.preset, t.family);
  SB_CHECK(s.n_layer <= t.n_layer, "distill.student_init: the student {} has {} layers, more than the "
           "teacher {}'s {}", s.preset, s.n_layer, t.preset, t.n_layer);
  const auto& su = student.units();
  const auto& tu = teacher.units();
  const auto L = static_cast<int>(s.n_layer);
  models::UnitTensors out;
  for (int u = 0; u < static_cast<int>(su.size()); ++u) {
    // 0 embeddings, 1..L blocks, L+1 head (both families' unit layout).
    const int from = u == 0 ? 0 : u == L + 1 ? static_cast<int>(t.n_layer) + 1
                                             : 1 + static_cast<int>((u - 1) * t.n_layer / s.n_layer);
    SB_CHECK(su[u].params.size() == tu[from].params.size(), "distill.student_init: student unit {} "
             "and teacher unit {} have different parameters", su[u].name, tu[from].name);
    out.emplace_back();
    for (std::size_t i = 0; i < su[u].params.size(); ++i) {
      SB_CHECK(su[u].params[i].shape == tu[from].params[i].shape,
               "distill.student_init: {} is {} in the student {} but {} in the teacher {} (the "
               "student must have the teacher's widths)", su[u].params[i].name,
               fmt::join(su[u].params[i].shape, "x"), s.preset, fmt::join(tu[from].params[i].shape, "x"),
               t.preset);
      out.back().push_back(tw.at(from).at(i).clone());
    }
  }
  return out;
}

}  // namespace sb::distill
