// The "train" workload: an FSDP training run of one point on every rank (train_workload.cpp),
// registered with its keys and validators in train_task.cpp.
#pragma once
#include <memory>
#include <string>

#include "harness/workload.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/checkpoint.h"
#include "workloads/optim/adamw.h"

namespace sb::train {

std::unique_ptr<sb::Workload> make_train_workload();

// What the memory model needs of a train point whose engine trains `model` (train_task.cpp):
// plan asks it with the planned dtype and shard group 0 (the world), the run with its own.
fsdp::MemoryInputs memory_inputs(const Point& p, const models::Model& model,
                                 torch::ScalarType param_dtype, int shard_group);
// The checkpoint (file or folder) a train point starts from: the `init` key, else the model
// folder when `model` is one; "" = seeded weights (also init = "seed").
std::string init_weights_path(const Point& p);
// A train point's AdamW and learning-rate schedule (lr, min_lr, weight_decay, grad_clip,
// lr_warmup, over `steps`): the engine's, and the reference trainer's in tests.
optim::AdamWConfig adamw_config(const Point& p);
// A train point's activation checkpointing (activation_checkpoint, activation_checkpoint_every).
models::CheckpointConfig checkpoint_config(const Point& p);
// What is wrong when `need` bytes of offload files (optim + kv + ckpt a rank, x ranks; ckpt:
// checkpoint sets on the same file system, 0 when not) do not fit the `free` bytes of dir,
// with the fix; "" when they fit.
std::string offload_space_problem(const std::string& dir, std::uint64_t need, std::uint64_t free,
                                  std::uint64_t optim, std::uint64_t kv, std::uint64_t ckpt,
                                  std::uint64_t ranks);
// The memory model of a point as `plan` sees it (its planned dtype; a pipeline's fullest rank).
fsdp::MemoryPrediction point_memory(const Point& p);
torch::ScalarType point_dtype(const Point& p);  // the compute dtype `plan` assumes ("auto" resolved)
// The point's model with its attention options (attention, seq_chunks, kv_offload).
std::unique_ptr<models::Model> make_train_model(const Point& p);

}  // namespace sb::train
