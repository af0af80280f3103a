// Knowledge distillation (Hinton et al. 2015; DistilBERT, Sanh et al. 2019; TinyBERT, Jiao et
// al. 2020): a student trains on a teacher's soft targets beside its own hard loss. The
// teacher runs forward only on the same batch (sharded like the student: train_workload.cpp),
// and its outputs travel in the batch (Batch::teacher_logits, teacher_hidden) to the
// student's loss, which the model forms through a LossCombiner (models/model.h).
//
//   loss = hard_weight x hard
//        + soft_weight x T^2 x mean over loss terms of KL(softmax(t / T) || softmax(s / T))
//        + hidden_weight x (sum over real tokens of mean over features of (h_s - h_t)^2) / terms
//
// hard is the model's own loss; s, t the student's and teacher's logits of each loss term;
// T^2 keeps the soft gradients' scale as T changes (Hinton). The hidden term is divided by
// the loss terms, not the tokens, so that it shards like the hard loss: the engine weights
// each micro-batch's loss by its share of the global terms, and then the sum over ranks is
// the one-process value (tests/mpi/distill.cpp). Formulas also in docs/DISTILLATION.md.
#pragma once
#include <string>

#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace sb::distill {

struct DistillConfig {
  double temperature = 2.0;
  double soft_weight = 0.5, hard_weight = 0.5, hidden_weight = 0.0;
};

// T^2 x mean over rows of KL(softmax(teacher / T) || softmax(student / T)), computed in fp32.
torch::Tensor soft_loss(const torch::Tensor& student, const torch::Tensor& teacher, double temperature);
// sum over real tokens (keep: (B*T) bool, undefined = all) of the mean squared difference
// over features, divided by `terms`.
torch::Tensor hidden_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                          const torch::Tensor& keep, std::int64_t terms);

// The student's loss on b (which carries the teacher's outputs), as the formula above.
models::LossCombiner combiner(const models::Batch& b, const DistillConfig& c);

// Runs the teacher's forward on b (run: a forward on its weights, e.g. Engine::forward_with)
// and stores its loss-term logits (and hidden states when `hidden`) in b, detached.
using RunTeacher = std::function<torch::Tensor(const std::function<torch::Tensor(models::ParamProvider&)>&)>;
void attach_teacher(models::Model& teacher, const RunTeacher& run, models::Batch& b, bool hidden);

// DistilBERT's initialisation: the student's embeddings and head from the teacher's, and
// student layer i from teacher layer floor(i x L_teacher / L_student) (every other layer when
// the student has half the layers). Same family and widths; errors name the first mismatch.
models::UnitTensors student_from_teacher(const models::Model& student, const models::Model& teacher,
                                         const models::UnitTensors& teacher_weights);

}  // namespace sb::distill
