// The FSDP engine: the model's ParamProvider on every rank. It keeps each unit's parameters
// as one flat fp32 buffer (sharded or replicated per the strategy), gathers them when the
// model acquires a unit, hooks autograd to re-gather before a unit's backward and to reduce
// its gradient as soon as it exists, and runs AdamW on this rank's shard.
//
//   fsdp::Engine e(*model, comm, cfg, models::init_params(model->units(), seed));
//   auto s = e.step(my_micro_batches, global_loss_terms);   // one optimizer step
//   auto logits = e.forward_logits(batch);                  // sharded inference (no grad)
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/trace/records.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/policy.h"
#include "workloads/fsdp/offload_store.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/fsdp/update_thread.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/optim/adamw.h"

namespace sb::fsdp {
namespace ckpt {
struct FlatSources;
struct Header;
struct Marker;
struct RankFile;
}  // namespace ckpt

// Slices of whole units: element ranges of each unit's flattened initial values (the slice
// source of an Engine) cut from a source of whole units.
std::function<torch::Tensor(int, std::int64_t, std::int64_t)> unit_slices(
    const models::Model& model, std::function<std::vector<torch::Tensor>(int)> initial_unit);

struct EngineConfig {
  std::string strategy = "no_shard";  // the `strategy` key's default (harness/workload.cpp)
  torch::ScalarType param_dtype = torch::kFloat32;   // gathered params and compute
  torch::ScalarType reduce_dtype = torch::kFloat32;  // gradient collectives
  optim::AdamWConfig adamw;
  bool prefetch = true;  // all-gather the next unit while the current one computes
  comm::Policy compression = comm::policy_preset("none");
  // Where every buffer lives and the model computes (the `device` key): the flat fp32
  // masters, gradients, Adam moments and gathered parameters. On a GPU the collectives run
  // on device tensors (comm_backend nccl; mpi stages them through host memory) and the step's
  // phases are timed after a device synchronisation.
  torch::Device device = torch::kCPU;
  // Dynamic loss scaling (fp16: its 5-bit exponent underflows small gradients): the loss is
  // multiplied by the scale before backward and the reduced fp32 gradients divided by it; a
  // step whose gradients are not finite on some rank is skipped on every rank (no update,
  // Adam's step count unchanged) and the scale halved; after `growth_interval` good steps in
  // a row it doubles (torch.cuda.amp.GradScaler's rule and defaults).
  bool loss_scaling = false;
  // Forward only (a distillation teacher, sharded serving): no gradients or Adam moments are
  // allocated, and step() refuses.
  bool forward_only = false;
  double loss_scale_init = 65536.0;
  std::int64_t loss_scale_growth_interval = 2000;
  // A model cut into pipeline stages (Model::set_pipeline) steps by this schedule
  // (workloads/parallel/pp_schedule.h; the `pp_schedule` key).
  std::string pp_schedule = "1f1b";
  // Optimizer state on disk (ZeRO-Infinity; offload_store.h): "none" keeps the Adam moments
  // in memory, "disk" in a file under offload_dir that the update streams through
  // offload_block-element staging blocks.
  std::string offload_optimizer = "none";
  std::string offload_dir;
  std::int64_t offload_block = std::int64_t{1} << 20;
  // With the moments on disk and parameters sharded: the update runs unit by unit on a thread
  // after the step returns, and the next forward waits for each unit's before gathering it
  // (update_thread.h); the same results, bit for bit.
  bool offload_overlap = true;
  // With the moments on disk and parameters sharded: the fp32 master weights in the same file
  // (offload_store.h), streamed by the update; each gather reads its unit's shard from disk.
  // In fp32 training the master is the compute copy: parameter offload.
  bool offload_master = false;
};

struct StepStats {
  double loss = 0;       // global mean loss over the whole step's batch (all ranks, micro-steps)
  double grad_norm = 0;  // global L2 norm of the gradient before clipping
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double comm_exposed_s = 0;  // time the compute thread waited on communication
  double comm_exposed_forward_s = 0;  // ... of which in the first micro-step's forward
  double comm_exposed_optimizer_s = 0;  // ... of which after backward (loss, norm, step)
  double gather_wait_s = 0;  // ... of which waiting for parameter all-gathers
  double loss_scale = 1;     // the scale this step's backward ran with (1 without scaling)
  bool skipped = false;      // loss scaling: non-finite gradients, no update
};

struct MemoryStats {  // this rank, bytes; exact sizes of the buffers the engine owns
  std::uint64_t param = 0, grad = 0, optim = 0, gathered = 0;
  std::uint64_t compression = 0;       // error-feedback residuals, PowerSGD state
  std::uint64_t offload = 0;           // staging buffers of offloaded optimizer state
  std::uint64_t model_state = 0;       // param + grad + optim + compression + gathered + offload, now
  std::uint64_t peak_model_state = 0;  // highest model_state seen within steps so far
  std::uint64_t peak_gathered = 0;     // most gathered bytes held at once within steps so far
  // Most bytes of gradient-reduction buffers held at once within steps so far: each reducing
  // unit's full gradient in the reduce dtype (the collective's input, freed when its requests
  // finish) and its reduction output while in flight.
  std::uint64_t peak_comm_buffer = 0;
};

// The engine's part of a rank's memory record (sb::rank_memory_now() gives the rest).
inline void add_engine_memory(const MemoryStats& e, sb::RankMemory& m) {
  m.param_bytes = e.param;
  m.grad_bytes = e.grad;
  m.optim_bytes = e.optim;
  m.gathered_bytes = e.peak_gathered;  // between steps nothing is gathered: the peak says more
  m.compression_bytes = e.compression;
  m.offload_bytes = e.offload;
  m.model_state_bytes = e.model_state;
  m.peak_model_state_bytes = e.peak_model_state;
  m.comm_buffer_bytes = e.peak_comm_buffer;
}

// Loss terms of a batch: targets != -100 (LM, MLM), or rows when there are only labels.
std::int64_t loss_terms(const models::Batch& b);

// A sharded checkpoint (Engine::save) assembled offline, in one process, without MPI: the
// fp32 master parameters [unit][param] of `model`, from dir's newest committed set; every
// file is checked (magic, version, checksum, listed by the set's commit marker) and its unit
// layout must match the model. checkpoint.cpp.
models::UnitTensors read_checkpoint_params(const std::string& dir, const models::Model& model);
// ... written as one safetensors file with Hugging Face names, which the one-process trainer
// and `infer` load (data::load_checkpoint).
void export_checkpoint(const std::string& dir, const models::Model& model,
                       const std::string& safetensors_path);
// The step of dir's newest committed checkpoint set, -1 when it has none (e.g. to decide
// whether a restarted point can resume). No MPI.
std::int64_t committed_checkpoint_step(const std::string& dir);

class Engine final : public models::ParamProvider {
 public:
  // initial[u][i]: full fp32 values, identical on every rank (models::init_params).
  Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
         const std::vector<std::vector<torch::Tensor>>& initial);
  // initial_unit(u): unit u's full fp32 values, identical on every rank, asked once per unit in
  // order and dropped once the unit's shard is taken, so a lazy source (data::CheckpointReader,
  // models::init_unit) never puts the whole model in a rank's memory at once.
  Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
         const std::function<std::vector<torch::Tensor>(int)>& initial_unit);
  // initial_slice(u, offset, size): elements [offset, offset + size) of unit u's parameters
  // flattened in spec order (fp32, 1-D, zeros past the unit's end: the shard padding), asked
  // once per unit: the rank's own shard where parameters are sharded, the whole unit where
  // not. A checkpoint (data::CheckpointReader::slice) then reads only the rank's bytes.
  Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
         const std::function<torch::Tensor(int, std::int64_t, std::int64_t)>& initial_slice);
  ~Engine() override;

  // One optimizer step. micro: this rank's micro-batches (gradient accumulation: no
  // communication until the last one); global_terms: loss_terms summed over the whole
  // step's global batch (every rank, every micro-batch), so that the summed gradient is the
  // gradient of the global mean loss whatever each rank's share of the terms.
  // A model cut into pipeline stages runs the micro-batches through cfg.pp_schedule instead
  // (pipeline_step.cpp): its stages' parameters gathered once for the step, every backward
  // accumulating into a whole fp32 gradient per unit (torchtitan's choice: one gather and one
  // reduction per step, for the memory of one unsharded gradient per unit), the tied
  // embedding's gradient summed between the first and last stages, then reduced over the
  // data-parallel ranks and stepped as any other.
  StepStats step(const std::vector<models::Batch>& micro, std::int64_t global_terms);
  // The loss a step trains on, per micro-batch (default: the model's loss). It must come from
  // one model.loss_with call on the engine (the units are released against its result), and
  // be a mean over the micro-batch's loss terms like the model's (the step weights it by
  // them). Distillation's (workloads/distill/distill.h) is one.
  using LossFn = std::function<torch::Tensor(models::ParamProvider&, const models::Batch&)>;
  void set_loss(LossFn f) { loss_fn_ = std::move(f); }
  // Pruning during training (the train task's pruning schedule): masks[u][i] (spec shapes,
  // 1 keep / 0 pruned, identical on every rank) multiply the fp32 master parameters now and
  // after every later optimizer step, so pruned weights stay zero while the rest fine-tune.
  // Adam's moments are kept. Empty: no masks. Collective in nothing: each rank masks its part.
  void set_masks(const models::UnitTensors& masks);
  // Forward without gradients on this rank's batch (sharded inference and evaluation).
  torch::Tensor forward_logits(const models::Batch& b);  // (B, T, vocab)
  // Any other forward of the model (serving's KV-cached steps), under the same protocol:
  // no gradients, units gathered as f acquires them and freed after.
  torch::Tensor forward_with(const std::function<torch::Tensor(models::ParamProvider&)>& f);
  // () mean over b's terms; a pipelined model runs b through its stages (every pp rank gets it).
  torch::Tensor forward_loss(const models::Batch& b);
  torch::Tensor forward_classify(const models::Batch& b);  // (B, num_labels)

  // Full fp32 parameters [unit][param] with spec shapes, host copies, on every rank
  // (collective).
  std::vector<std::vector<torch::Tensor>> full_params();
  MemoryStats memory() const;
  // The optimizer state's file (offload_optimizer = "disk"), or nullptr; an overlapped update
  // still in flight is finished first.
  const OffloadStore* offload_store() const {
    updates_.drain();
    return store_.get();
  }
  // Finishes an overlapped update of the last step (offload_overlap) now; what the caller
  // times as the step's end. Seconds the caller's thread has waited for overlapped updates
  // (in the next forward's gathers and here), this engine's life.
  void finish_updates() { updates_.drain(); }
  double update_wait_s() const { return updates_.wait_s(); }
  // Whether this engine's updates run overlapped (step.cpp says when they can).
  bool overlaps_update() const;
  std::int64_t steps_done() const { return step_; }
  std::int64_t steps_skipped() const { return skipped_; }  // loss scaling: steps not applied
  double loss_scale() const { return scale_; }             // for the next step
  void reset_peak() { peak_ = peak_gathered_ = 0; note_memory(); }
  const EngineConfig& config() const { return cfg_; }
  const StrategyInfo& strategy_record() const { return info_; }
  comm::Communicator& communicator() { return comm_; }

  // Sharded checkpoint (collective, between steps): the set dir/step-<N>/ of one file per
  // rank (parameters, Adam moments, compression state) and a commit marker rank 0 writes once
  // every file is durable; older sets are then removed (checkpoint.cpp, checkpoint_set.h).
  // load reads dir's newest committed set; a set that is incomplete, mixes saves or has
  // another param dtype or compression policy is refused on every rank before any tensor is
  // read, with one message. A set written on another mesh, strategy or world is resharded:
  // every rank assembles the whole parameters and moments it needs from all the files and
  // takes its part (docs/FSDP.md "Checkpoints across meshes").
  struct Loaded {
    std::string resharded_from;  // "" when the set was this mesh's, else what wrote it
    std::string reset;           // what could not be resharded and was reset ("" none)
    // Resharded by reading this rank's byte ranges of the files (the tp layout unchanged),
    // not by assembling whole parameters.
    bool streamed = false;
  };
  void save(const std::string& dir) const;
  Loaded load(const std::string& dir);

  // ParamProvider
  std::vector<torch::Tensor> acquire(int unit) override;
  void release(int unit, const torch::Tensor& out) override;
  void begin_recompute() override { ++recomputing_; }
  void end_recompute() override { --recomputing_; }
  void begin_partial_grads() override { ++partial_grads_; }
  void end_partial_grads() override { --partial_grads_; }
  // The engine's weights are plain tensors: the chunked LM-head loss (models/loss.h).
  torch::Tensor linear_cross_entropy(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& targets) override;

  struct Unit;  // unit.h

 private:
  void begin_forward();
  void end_forward();
  void gather(int u, bool wait);  // start (and optionally finish) unit u's all-gather
  void ensure_gathered(int u);
  void free_unit(int u);
  void prefetch(int u);
  void on_backward(int u, int k);
  std::vector<torch::Tensor> views(Unit& U);  // U's parameters as views of W, spec shapes
  torch::Tensor master_of(int u) const;       // the fp32 master this rank holds, from disk or not
  void on_grad(int u);
  void finish_grads();
  void drop_grads();  // the last step's gradients, before this step's backward (step.cpp)
  void reduce_unit(Unit& U, const torch::Tensor& full);  // start the reduction of U's gradient
  // Drops the full-size gradient of each unit whose reduction has completed, oldest first.
  void release_reduced();
  // After the gradients are reduced: the global loss from this rank's share, the optimizer,
  // the step's timings (step.cpp).
  StepStats finish_step(StepStats& s, double local_loss);
  StepStats pipeline_step(const std::vector<models::Batch>& micro, std::int64_t global_terms);
  void sum_tied_grads();  // pipeline: the first stage's tied units and the last stage's copies
  double pipeline_loss(const models::Batch& b);
  void optimizer_step(StepStats& s);
  bool loss_scaler_skips(double sumsq, StepStats& s);  // step.cpp
  void note_memory();
  void refresh_replicas();
  void make_offload_store();
  void load_same_layout(const ckpt::RankFile& agreed, comm::StateDict& state);  // checkpoint.cpp
  Loaded load_resharded(const std::string& set, const ckpt::Marker& m, const ckpt::Header& run);
  void load_streamed(const std::string& set, const std::vector<ckpt::FlatSources>& src);
  void load_assembled(const std::string& set, const ckpt::Marker& m, comm::StateDict& state);
  void restore_loss_scale(comm::StateDict& state, const std::string& path);

  models::Model& model_;
  LossFn loss_fn_;  // set_loss; empty: model_.loss
  comm::Communicator& comm_;
  EngineConfig cfg_;
  const StrategyInfo& info_;  // the strategy's record
  std::unique_ptr<Strategy> strategy_;
  Layout layout_;             // info_.layout
  comm::Group shard_group_;   // the group of dp_shard: what units are sharded over
  std::unique_ptr<Collectives> coll_;
  std::unique_ptr<OffloadStore> store_;  // offload_optimizer = "disk": the moments' file
  std::vector<std::unique_ptr<Unit>> units_;
  // offload_overlap: the update of units_ through store_ in flight (declared after them, so
  // destroyed, i.e. joined, first). Mutable: a const reader of the state finishes it.
  mutable UpdateThread updates_;
  std::int64_t step_ = 0;
  // Loss scaling (EngineConfig::loss_scaling; step.cpp): the scale, good steps in a row,
  // steps skipped in all and in a row.
  double scale_ = 1;
  std::int64_t good_steps_ = 0, skipped_ = 0, skipped_in_row_ = 0;
  // 2^64 of headroom halved away: beyond it no scale makes the gradients finite.
  static constexpr std::int64_t kMaxSkipsInARow = 64;
  double gather_wait_s_ = 0;
  bool final_micro_ = true, accumulating_ = false;
  bool hold_gathered_ = false;  // pipeline step: units stay gathered until it ends
  // Pipeline traffic's codecs (cfg.compression's pp_act / pp_grad; null: plain), made with the
  // engine of a pipelined model.
  std::shared_ptr<comm::Compressor> pp_act_codec_, pp_grad_codec_;
  std::vector<int> acquire_order_, last_acquire_order_, release_seq_;
  // Inside a checkpointed block's recomputation in backward (models/checkpoint.h): acquires
  // gather and hand out views but count no use and learn no order; releases do nothing.
  int recomputing_ = 0;
  // Inside a chunked block's backward of one chunk (models/checkpoint.h, chunked_block): a
  // unit's gradient is a part, summed in Unit::part until the last chunk's completes it.
  int partial_grads_ = 0;
  std::vector<comm::Request> pending_grads_;
  // The units whose reductions are in pending_grads_, in issue order, each with the end of its
  // requests there; [0, released_) have dropped their full-size input (release_reduced).
  std::vector<std::pair<Unit*, std::size_t>> reducing_;
  std::size_t released_ = 0;
  std::uint64_t inflight_bytes_ = 0, peak_ = 0, peak_gathered_ = 0, peak_inflight_ = 0;
};

}  // namespace sb::fsdp
