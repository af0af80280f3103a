// The train task's own keys, typed (harness/spec/config.h), declared once in train_keys.cpp
// with the rules plan checks: the optimizer and its schedule, how the sharded step
// communicates, and what a run reads and writes besides its results. The keys several tasks
// share are their areas' (ModelKeys, TrainChoice, DataKeys, MeshConfig, DistillKeys, ...).
#pragma once
#include <cstdint>
#include <string>

namespace sb {
template <class S> class Fields;
}

namespace sb::train {

// AdamW, its learning-rate schedule, accumulation and fp16's loss scaling.
struct OptimKeys {
  double lr = 0, min_lr = 0, weight_decay = 0, grad_clip = 0;
  std::int64_t lr_warmup = 0;   // optimizer steps
  // Micro-batches per optimizer step (Megatron's microbatches: a pipeline's with mesh.pp > 1,
  // gradient accumulation otherwise); grad_accum is its old name (train_mesh.cpp folds it in).
  std::int64_t microbatches = 1;
  std::int64_t grad_accum = 1;
  double loss_scale_init = 0;
  std::int64_t loss_scale_growth_interval = 0;
  double dropout = 0;            // residual-stream dropout probability (models/dropout.h)
  double attention_dropout = 0;  // attention probabilities' (naive and chunked variants)
  static void declare(Fields<OptimKeys>& f);
};

// How the sharded step communicates (the strategy and compression are TrainChoice/ModelKeys).
// The folder offload_dir names ("" = $TMPDIR or /tmp).
std::string offload_folder(const std::string& offload_dir);

struct StepKeys {
  std::int64_t shard_group = 0;  // the old name of mesh.dp_shard (train_mesh.cpp)
  std::string reduce_dtype;      // dtype of gradient collectives
  bool prefetch = true;
  std::string comm_progress;     // auto, thread, poll or inline
  double peak_gflops = 0;        // one rank's peak for MFU; 0 = measured
  bool tp_sequence_parallel = false;  // Megatron's sequence parallelism over mesh.tp
  std::string pp_schedule;            // pipeline schedule over mesh.pp (parallel/pp_schedule.h)
  std::int64_t pp_virtual_stages = 1;  // stages per pp rank (interleaved schedules)
  std::string pp_layers;              // layers per stage, "9,3"; "" = balanced by FLOPs
  std::string activation_checkpoint;  // none, full, selective or chunked (models/checkpoint.h)
  std::int64_t activation_checkpoint_every = 1;  // full: every k-th block
  std::string offload_optimizer;  // none or disk (fsdp/offload_store.h)
  std::string offload_dir;        // the offloaded state's folder; "" = $TMPDIR or /tmp
  bool offload_overlap = true;    // the disk update overlapped with the next forward
  std::string offload_param;      // none or disk: the fp32 master in the optimizer's file
  std::int64_t seq_chunks = 0;    // FPDT: chunks of each sequence (0: attention_chunk tokens)
  std::string kv_offload;         // FPDT: where the key/value chunks wait (none, host, disk)
  static void declare(Fields<StepKeys>& f);
};

// What a run evaluates, starts from and writes besides its results.
struct RunKeys {
  std::int64_t eval_every = 0, eval_batches = 0;
  std::string checkpoint_dir;      // "" = none
  bool resume = false;
  std::string init;                // "" = the model folder or seeded; "seed" = seeded
  std::string export_folder;       // "" = none
  std::string export_safetensors;  // "" = none
  static void declare(Fields<RunKeys>& f);
};

}  // namespace sb::train
