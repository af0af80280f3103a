// The "train" workload: an FSDP training run of one point on every rank (train_workload.cpp),
// registered with its keys and validators in train_task.cpp.
#pragma once
#include <memory>

#include "harness/workload.h"

namespace sb::train {

std::unique_ptr<sb::Workload> make_train_workload();

}  // namespace sb::train
