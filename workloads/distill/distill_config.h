// The distillation keys of the train task, typed (harness/spec/config.h): declared once in
// distill_keys.cpp with their cross-key rules; the train task reads them as config<DistillKeys>.
#pragma once
#include <string>

namespace sb {
template <class S> class Fields;
}

namespace sb::distill {

struct DistillKeys {
  std::string teacher;       // a preset or model folder; "" = no distillation
  std::string teacher_init;  // the teacher's weights; "" = the folder's, or seeded
  double temperature = 0;    // T of the soft targets
  double soft_weight = 0, hard_weight = 0, hidden_weight = 0;
  std::string student_init;  // "none" or "every_other"
  static void declare(Fields<DistillKeys>& f);  // distill_keys.cpp
};

}  // namespace sb::distill
