// The memory model of a training rank: bytes per rank by term, from the strategy's record
// (what is sharded, which collectives keep state), the model's unit sizes and shapes and the
// run's settings. It is the one model: `plan` prints it (the train task's estimate), the
// train task records it beside what the engine measures (RankMemory's predicted_* columns),
// and the tests hold the exact terms to the engine's bytes. A new dimension or feature adds
// a term here (docs/METRICS.md "Memory model"), not a second model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/trace/records.h"
#include "workloads/comm/policy.h"
#include "workloads/models/model.h"

namespace sb::fsdp {

// What the model needs to know of a run.
struct MemoryInputs {
  std::vector<models::UnitSpec> units;  // the trained model's units (Engine's: this tp rank's blocks)
  models::ModelConfig model;            // shapes, for the activation terms
  std::string strategy = "no_shard";
  int world = 1;        // the ranks FSDP spans (world / (tp x pp): data-parallel x sp)
  int tp = 1;           // mesh.tp: heads, MLP columns and vocabulary split tp ways
  int ep = 1;           // mesh.ep: experts' units (UnitSpec::expert) shard over the shard group / ep
  int sp = 1;           // mesh.sp (Ulysses): each rank holds seq / sp tokens of every row, and
                        // in attention n_head / (tp sp) heads of the whole sequence
  // mesh.pp (models/pipeline.h): units are this rank's stages'; the step keeps every unit
  // gathered and an unsharded fp32 gradient per unit; the rank holds stage_layers blocks
  // (-1: all), over v virtual stages, the loss only when it runs the last stage, and at its
  // peak the activations of in_flight (virtual stage, micro-batch) pairs (the schedule's
  // simulation, pp_schedule.h).
  int pp = 1, v = 1, in_flight = 1;
  std::int64_t stage_layers = -1;
  bool last_stage = true;
  bool sequence_parallel = false;  // tp_sequence_parallel: the LayerNorm regions' rows too
  int shard_group = 0;  // ranks per shard group (hybrid sharding); 0 = the world
  torch::ScalarType param_dtype = torch::kFloat32;
  torch::ScalarType reduce_dtype = torch::kFloat32;  // the reduced gradient's (kept as it is)
  int grad_accum = 1;
  comm::Policy policy = comm::policy_preset("none");
  bool prefetch = true;
  models::CheckpointConfig checkpoint;  // activation checkpointing (models/checkpoint.h)
  // Optimizer state on disk (offload_store.h): no moments in memory, staging blocks of
  // offload_block elements instead.
  std::string offload_optimizer = "none";
  std::int64_t offload_block = std::int64_t{1} << 20;
  bool offload_master = false;  // the fp32 master in the same file (EngineConfig::offload_master)
  // Activations of one micro-batch on this rank: rows of `seq` tokens; the loss is taken
  // over loss_rows rows of loss_classes logits (causal LM: rows x seq x vocab).
  std::int64_t rows = 0, seq = 0, loss_rows = 0, loss_classes = 0;
  // > 0: the loss is taken over row chunks of this many rows without forming the logits whole
  // (loss.h's linear_cross_entropy: GPT-2's training loss without tp); 0: over whole logits.
  std::int64_t loss_chunk_rows = 0;
};

// Bytes per rank. Exact (equal to Engine::memory() between steps from the first step on,
// tests/mpi/fsdp_state.cpp): param, grad, optim, compression, model_state, and gathered for
// strategies that replicate parameters. Estimates: gathered for sharded parameters and the
// activation terms. docs/METRICS.md "Memory model" has every formula.
struct MemoryPrediction {
  std::uint64_t param = 0;        // fp32 master parameters (0 on disk: offload_master)
  std::uint64_t grad = 0;         // reduced gradients, reduce dtype (+ the fp32 accumulation buffer)
  std::uint64_t optim = 0;        // Adam's two moments
  std::uint64_t compression = 0;  // error-feedback residuals, PowerSGD's matrices
  // Communication buffers: the most gathered (unsharded, compute dtype) parameter bytes held
  // at once within a step, prefetch and units kept from forward to backward included;
  // replicated parameters: their compute-dtype copy (none in fp32), held throughout.
  std::uint64_t gathered = 0;
  // Activations autograd keeps for backward, of one micro-batch (estimates, by kind).
  std::uint64_t activation_layers = 0;     // the blocks' saved inputs (LayerNorm, linear, GELU)
  std::uint64_t activation_attention = 0;  // attention probabilities (B, H, T, T) per block
  std::uint64_t activation_head = 0;       // the loss's fp32 log-probabilities
  // At the first unit's backward, when that moment is the peak (every activation term then
  // 0): the unit's gradient parts and their join, 2 x its compute-dtype bytes, and the tied
  // head weight's gradient.
  std::uint64_t first_unit_grad = 0;
  std::uint64_t offload = 0;  // staging of offloaded optimizer state (2 x 3 blocks, 2 x 4 with the master)
  // Of grad, what is not alive when the activation terms are the top block's backward (the
  // first: the last step's gradients dropped, Engine::drop_grads, this step's not yet formed;
  // the fp32 accumulation buffer stays) or the first unit's (its own); 0 at forward's end.
  std::uint64_t grad_unformed = 0;
  // The moment the activation terms are taken at: "forward's end" (the engine's phase there is
  // "loss"), "top block's backward" ("backward of unit L") or "first unit's backward"
  // ("backward of unit 0", first_unit_grad); "" without activation terms.
  const char* moment = "";
  // Between steps: param + grad + optim + compression + offload (+ gathered for replicated
  // parameters): MemoryStats::model_state.
  std::uint64_t model_state = 0;

  struct Term {
    const char* name;  // "param", ...: the RankMemory column predicted_<name>_bytes
    std::uint64_t bytes;
  };
  std::vector<Term> terms() const;  // every term, in the order above
  // The predicted peak a rank: param + grad + optim + compression + gathered + the activation
  // terms + first_unit_grad + offload - grad_unformed.
  std::uint64_t peak() const;
  // Disk, not memory (not in terms()): the bytes this rank's offload files reach. The
  // optimizer state's file (offload_optimizer = "disk": m, v, the decay mask and with
  // offload_master the master, each unit's 4 n bytes rounded up to 4096, exact: OffloadStore's
  // layout) and FPDT's key/value chunk
  // files at their largest (kv_offload = "disk": every kept block's k and v, each chunk padded
  // to 4096; under full checkpointing one recomputed block's).
  std::uint64_t disk_optim = 0, disk_kv = 0;
  // A checkpoint set's rank file, its tensors (the fp32 master and Adam's m and v as the rank
  // holds them; the header and the small state beside them not counted): what `plan` adds for
  // checkpoint_dir when it shares offload_dir's file system.
  std::uint64_t disk_checkpoint = 0;
};

MemoryPrediction predict_memory(const MemoryInputs& in);

// The prediction's columns of the rank's memory record (beside what the engine measured).
void add_predicted_memory(const MemoryPrediction& p, sb::RankMemory& m);

// Model-state bytes per rank between steps (MemoryPrediction::model_state, without
// activations): what `plan` shows and MemoryStats::model_state holds from the first step on.
std::uint64_t model_state_bytes(const std::vector<models::UnitSpec>& units,
                                const std::string& strategy, int world, int shard_group,
                                torch::ScalarType param_dtype, int grad_accum,
                                const comm::Policy& policy);

// Compression state per rank once every unit's gradients were reduced
// (MemoryPrediction::compression): what MemoryStats::compression holds from the first step on.
std::uint64_t compression_state_bytes(const std::vector<models::UnitSpec>& units,
                                      const std::string& strategy, int world, int shard_group,
                                      const comm::Policy& policy);

}  // namespace sb::fsdp
