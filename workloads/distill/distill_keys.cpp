// The distillation keys (the train task reads them; train/train_workload.cpp) and their
// cross-key rules, checked at plan time against both models' configurations.
#include <filesystem>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/distill/distill_config.h"
#include "workloads/models/family.h"
#include "workloads/models/folder_check.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/model.h"

namespace sb::distill {
namespace {

// Run by plan on train points (the section's task).
void validate(const DistillKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const std::string& teacher = c.teacher;
  const std::string& init = c.student_init;
  if (teacher.empty()) {
    if (init != "none")
      out.push_back({"distill.student_init", fmt::format("distill.student_init = \"{}\" copies a teacher's "
                                                         "layers; set teacher", init)});
    if (!c.teacher_init.empty())
      out.push_back({"teacher_init", "teacher_init gives the teacher's weights; set teacher"});
    return;
  }
  if (c.soft_weight == 0 && c.hard_weight == 0 && c.hidden_weight == 0)
    out.push_back({"distill.soft_weight", "every distillation weight is 0: the loss would be 0"});
  const std::string& ti = c.teacher_init;
  if (!ti.empty() && !std::filesystem::exists(ti))
    out.push_back({"teacher_init", fmt::format("teacher_init '{}' does not exist (yet): the point will fail "
                                               "unless an earlier point or suite writes it", ti), true});
  models::ModelConfig s, t;
  try {
    s = models::preset_config(config<ModelKeys>(p).model);
  } catch (const sb::Error&) {
    return;  // the model's own check reports it
  }
  try {
    t = models::preset_config(teacher);
  } catch (const sb::Error& e) {
    // A folder not written yet is check_teacher_folder's to report.
    if (!models::is_model_path(teacher) || std::filesystem::exists(teacher + "/config.json"))
      out.push_back({"teacher", e.message()});
    return;
  }
  auto differ = [&](const char* what, std::int64_t a, std::int64_t b) {
    if (a != b)
      out.push_back({"teacher", fmt::format("the student {} has {} {}, the teacher {} {}: distillation "
                                            "matches their logits, which need the same", s.preset, a, what,
                                            t.preset, b)});
  };
  if (s.family != t.family)
    out.push_back({"teacher", fmt::format("the student {} is a {} model, the teacher {} a {} model: "
                                          "distillation needs one family", s.preset, s.family, t.preset, t.family)});
  differ("vocabulary entries", s.vocab, t.vocab);
  if (models::family(s.family).classifies) differ("labels", s.num_labels, t.num_labels);
  if (init == "every_other" && (s.d_model != t.d_model || s.d_ff != t.d_ff || s.n_layer > t.n_layer))
    out.push_back({"distill.student_init", fmt::format("every_other copies teacher layers into the student: "
                                                       "it needs the teacher's widths (d {} vs {}, d_ff {} vs "
                                                       "{}) and at most its {} layers (student: {})", s.d_model,
                                                       t.d_model, s.d_ff, t.d_ff, t.n_layer, s.n_layer)});
}

// A teacher folder that is not there yet: fine when an earlier point exports it.
void check_teacher_folder(const std::vector<Point>& points, std::size_t i,
                          std::vector<Diagnostic>& out) {
  if (base_config(points[i]).task != "train" || config<DistillKeys>(points[i]).teacher.empty())
    return;
  if (auto d = models::missing_model_folder(points, i, "teacher", "teacher folder"))
    out.push_back(*d);
}

const sb::Registrar kRegister([] {
  register_name("student_init", "none", "the student starts from its own init (seed, init or model folder)");
  register_name("student_init", "every_other",
                "DistilBERT: embeddings and head from the teacher, student layer i from teacher layer i x L_t / L_s");
  register_suite_validator(check_teacher_folder);
});

}  // namespace

void DistillKeys::declare(Fields<DistillKeys>& f) {
  f.tasks({"train"});
  f.add("teacher", &DistillKeys::teacher, std::string(""),
        "train: distil from this teacher (a preset or a model folder; \"\" = no distillation; docs/DISTILLATION.md)");
  f.add("teacher_init", &DistillKeys::teacher_init, std::string(""),
        "train: the teacher's weights (checkpoint file or folder); \"\" = the teacher folder's, or seeded");
  f.add("distill.temperature", &DistillKeys::temperature, 2.0,
        "train: softmax temperature T of the soft targets").range(1e-3, 1e6);
  f.add("distill.soft_weight", &DistillKeys::soft_weight, 0.5,
        "train: weight of T^2 x KL(teacher || student) on the logits").range(0.0, 1e6);
  f.add("distill.hard_weight", &DistillKeys::hard_weight, 0.5,
        "train: weight of the student's own loss").range(0.0, 1e6);
  f.add("distill.hidden_weight", &DistillKeys::hidden_weight, 0.0,
        "train: weight of the last hidden states' squared error (equal widths)").range(0.0, 1e6);
  f.name("distill.student_init", &DistillKeys::student_init, "student_init", "none",
         "train: the student's first weights from the teacher's (every_other) or not (none)");
  f.validate(validate);
}
SB_CONFIG_SECTION(DistillKeys);

}  // namespace sb::distill
