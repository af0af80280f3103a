// The "train" workload: an FSDP training run of one point on every rank (train_workload.cpp),
// registered with its keys and validators in train_task.cpp.
#pragma once
#include <memory>

#include "harness/workload.h"
#include "workloads/fsdp/memory_model.h"

namespace sb::train {

std::unique_ptr<sb::Workload> make_train_workload();

// What the memory model needs of a train point whose engine trains `model` (train_task.cpp):
// plan asks it with the planned dtype and shard group 0 (the world), the run with its own.
fsdp::MemoryInputs memory_inputs(const Point& p, const models::Model& model,
                                 torch::ScalarType param_dtype, int shard_group);

}  // namespace sb::train
