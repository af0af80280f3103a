// Plain result records. Workloads fill them; sinks (console, HDF5) consume them.
// Each record's Table, right below it, is the one description of its fields: name, type (from
// the member), unit and meaning. MPI packing, the HDF5 columns and their attributes,
// `shardbench schema` and docs/HDF5_SCHEMA.md are generated from it (harness/trace/fields.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/core/mesh.h"
#include "harness/trace/fields.h"

namespace sb {

struct StepRecord {  // one optimizer step (train) or one batch (infer)
  std::int64_t step = 0;
  bool warmup = false;
  double wall_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, comm_exposed_s = 0;
  double loss = 0, grad_norm = 0;
  double tokens_per_s = 0, samples_per_s = 0, mfu = 0;
  double mfu_isa = 0;  // last: aggregate initializers keep their meaning
};

template <>
struct Table<StepRecord> {
  using R = StepRecord;
  static constexpr const char* group = "steps";
  // train, infer and micro all take the MAX over ranks before recording.
  static constexpr const char* doc =
      "one row per optimizer step (train) or batch (infer); times are the slowest rank's";
  static constexpr bool from_every_rank = false;
  static constexpr auto fields = std::make_tuple(
      field("step", &R::step, "", "index of the step in the run, warm-up steps included"),
      field("warmup", &R::warmup, "", "1 for a warm-up step (excluded from statistics), else 0"),
      field("wall_s", &R::wall_s, "s", "wall time of the whole step"),
      field("forward_s", &R::forward_s, "s", "time in forward passes"),
      field("backward_s", &R::backward_s, "s", "time in backward passes"),
      field("optimizer_s", &R::optimizer_s, "s", "time in the optimizer update"),
      field("comm_exposed_s", &R::comm_exposed_s, "s",
            "time the compute thread waited on communication"),
      field("loss", &R::loss, "", "mean loss over the step's global batch (train; else 0)"),
      field("grad_norm", &R::grad_norm, "",
            "global L2 norm of the gradient before clipping (train; else 0)"),
      field("tokens_per_s", &R::tokens_per_s, "tokens/s", "tokens of the global batch / wall_s"),
      field("samples_per_s", &R::samples_per_s, "samples/s",
            "samples of the global batch / wall_s"),
      field("mfu", &R::mfu, "",
            "model FLOPs utilisation, a fraction of the measured peak (docs/METRICS.md)"),
      field("mfu_isa", &R::mfu_isa, "",
            "model FLOPs utilisation against the ISA's theoretical peak (train; NaN: unknown)"));
};

struct RankMemory {  // per rank
  std::int32_t rank = 0;
  std::string host;
  std::uint64_t param_bytes = 0, grad_bytes = 0, optim_bytes = 0, gathered_bytes = 0;
  std::uint64_t model_state_bytes = 0;
  std::uint64_t peak_model_state_bytes = 0;
  std::uint64_t peak_rss_bytes = 0;
  std::uint64_t compression_bytes = 0;
  // The memory model's prediction (workloads/fsdp/memory_model.h), beside what was measured;
  // 0 where the task predicts nothing. Appended: aggregate initializers keep their meaning.
  std::uint64_t predicted_param_bytes = 0, predicted_grad_bytes = 0, predicted_optim_bytes = 0,
                predicted_compression_bytes = 0, predicted_gathered_bytes = 0,
                predicted_activation_layers_bytes = 0, predicted_activation_attention_bytes = 0,
                predicted_activation_head_bytes = 0, predicted_offload_bytes = 0,
                predicted_model_state_bytes = 0;
  // The rank's coordinates in the point's process mesh (harness/core/mesh.h), one per
  // dimension; the mesh's sizes are the config's mesh.* keys. Appended, as above.
  std::int32_t mesh_pp = 0, mesh_dp_replicate = 0, mesh_dp_shard = 0, mesh_sp = 0, mesh_tp = 0;
  // Measured beside the memory model's activation terms (appended, as above).
  std::uint64_t peak_step_tensor_bytes = 0;
  // Optimizer state on disk (offload_optimizer = "disk"; appended, as above): the staging
  // buffers in memory, the bytes moved over the run and the I/O threads' and the updating
  // thread's time.
  std::uint64_t offload_bytes = 0, offload_read_bytes = 0, offload_written_bytes = 0;
  double offload_read_s = 0, offload_write_s = 0, offload_wait_s = 0;
  // FPDT's key/value chunks in a store (kv_offload = "host" or "disk"; appended, as above).
  std::uint64_t kv_offload_read_bytes = 0, kv_offload_written_bytes = 0;
  double kv_offload_read_s = 0, kv_offload_write_s = 0, kv_offload_wait_s = 0;
  // Gradient-reduction buffers (appended, as above).
  std::uint64_t comm_buffer_bytes = 0;
  // offload_overlap (appended, as above): the compute thread's waits for the update.
  double offload_update_wait_s = 0;
  // The memory model's gradients not alive at its peak's moment (appended, as above).
  std::uint64_t predicted_grad_unformed_bytes = 0;
  // offload_param = "disk" (appended, as above): the gathers' reads of the master shards from disk.
  std::uint64_t offload_param_read_bytes = 0;
  double offload_param_read_s = 0;
  // Where the step with peak_step_tensor_bytes was at its peak, and the memory model's moment
  // (appended, as above).
  std::string peak_step_tensor_phase, predicted_peak_moment;
  // The memory model's third moment's term (appended, as above).
  std::uint64_t predicted_first_unit_grad_bytes = 0;
};

template <>
struct Table<RankMemory> {
  using R = RankMemory;
  static constexpr const char* group = "ranks";
  static constexpr const char* doc = "one row per rank, its memory at the end of the run";
  static constexpr bool from_every_rank = true;
  static constexpr auto fields = std::make_tuple(
      field("rank", &R::rank, "", "MPI rank in the point's world"),
      field("host", &R::host, "", "host name of the rank"),
      field("param_bytes", &R::param_bytes, "bytes", "parameters this rank holds"),
      field("grad_bytes", &R::grad_bytes, "bytes", "gradients this rank holds"),
      field("optim_bytes", &R::optim_bytes, "bytes", "optimizer state this rank holds"),
      field("gathered_bytes", &R::gathered_bytes, "bytes",
            "most gathered (unsharded) parameter buffers held at once within a step"),
      field("compression_bytes", &R::compression_bytes, "bytes",
            "compression state: error-feedback residuals, PowerSGD matrices"),
      field("model_state_bytes", &R::model_state_bytes, "bytes",
            "params + grads + optimizer + compression state + gathered, between steps"),
      field("peak_model_state_bytes", &R::peak_model_state_bytes, "bytes",
            "highest model state within a step"),
      field("peak_rss_bytes", &R::peak_rss_bytes, "bytes",
            "peak resident memory of the process (getrusage)"),
      // The memory model's terms (docs/METRICS.md "Memory model"); 0: not predicted (infer).
      field("predicted_param_bytes", &R::predicted_param_bytes, "bytes",
            "memory model: parameters (exact: equals param_bytes)"),
      field("predicted_grad_bytes", &R::predicted_grad_bytes, "bytes",
            "memory model: gradients (exact: equals grad_bytes)"),
      field("predicted_optim_bytes", &R::predicted_optim_bytes, "bytes",
            "memory model: optimizer state (exact: equals optim_bytes)"),
      field("predicted_compression_bytes", &R::predicted_compression_bytes, "bytes",
            "memory model: compression state (exact: equals compression_bytes)"),
      field("predicted_gathered_bytes", &R::predicted_gathered_bytes, "bytes",
            "memory model: most gathered parameters at once (an estimate of gathered_bytes "
            "where parameters are sharded)"),
      field("predicted_activation_layers_bytes", &R::predicted_activation_layers_bytes, "bytes",
            "memory model: activations the blocks keep for backward, one micro-batch (estimate)"),
      field("predicted_activation_attention_bytes", &R::predicted_activation_attention_bytes,
            "bytes", "memory model: attention probabilities kept for backward (estimate)"),
      field("predicted_activation_head_bytes", &R::predicted_activation_head_bytes, "bytes",
            "memory model: the loss's fp32 log-probabilities (estimate)"),
      field("predicted_offload_bytes", &R::predicted_offload_bytes, "bytes",
            "memory model: staging buffers of the optimizer state on disk (exact: equals offload_bytes)"),
      field("predicted_model_state_bytes", &R::predicted_model_state_bytes, "bytes",
            "memory model: model state between steps (exact: equals model_state_bytes)"),
      field("mesh_pp", &R::mesh_pp, "", "the rank's pipeline-stage coordinate in the process mesh"),
      field("mesh_dp_replicate", &R::mesh_dp_replicate, "",
            "the rank's replica coordinate (hybrid sharding's replica group) in the process mesh"),
      field("mesh_dp_shard", &R::mesh_dp_shard, "",
            "the rank's coordinate within its shard group in the process mesh"),
      field("mesh_sp", &R::mesh_sp, "", "the rank's sequence-parallel coordinate in the process mesh"),
      field("mesh_tp", &R::mesh_tp, "", "the rank's tensor-parallel coordinate in the process mesh"),
      field("peak_step_tensor_bytes", &R::peak_step_tensor_bytes, "bytes",
            "most tensor bytes a training step held at once above the larger of those live "
            "when it began and when it ended, its model state (activations, the loss's chunks, "
            "communication buffers, transient gradients; not the first step's new gradients, "
            "which stay as state): the "
            "CPU caching allocator's blocks of 1 MiB and more (smaller ones, e.g. chunked "
            "attention's score tiles, are not counted); 0: not measured (a GPU run, another "
            "allocator, or no training)"),
      field("offload_bytes", &R::offload_bytes, "bytes",
            "staging buffers of the optimizer state on disk (offload_optimizer = \"disk\"; 0 "
            "without)"),
      field("offload_read_bytes", &R::offload_read_bytes, "bytes",
            "bytes the optimizer read from its offload file over the run"),
      field("offload_written_bytes", &R::offload_written_bytes, "bytes",
            "bytes the optimizer wrote to its offload file over the run"),
      field("offload_read_s", &R::offload_read_s, "s",
            "seconds the I/O threads spent in reads of the offload file (read bandwidth = "
            "offload_read_bytes / offload_read_s)"),
      field("offload_write_s", &R::offload_write_s, "s",
            "seconds the I/O threads spent in writes of the offload file"),
      field("offload_wait_s", &R::offload_wait_s, "s",
            "seconds the optimizer waited on offload I/O (not hidden behind its update)"),
      field("kv_offload_read_bytes", &R::kv_offload_read_bytes, "bytes",
            "bytes of FPDT's key/value chunks read back for backward over the run (kv_offload; "
            "0 without)"),
      field("kv_offload_written_bytes", &R::kv_offload_written_bytes, "bytes",
            "bytes of FPDT's key/value chunks written to their store over the run"),
      field("kv_offload_read_s", &R::kv_offload_read_s, "s",
            "seconds the I/O threads spent reading key/value chunks (bandwidth = bytes / s)"),
      field("kv_offload_write_s", &R::kv_offload_write_s, "s",
            "seconds the I/O threads spent writing key/value chunks"),
      field("kv_offload_wait_s", &R::kv_offload_wait_s, "s",
            "seconds the compute thread waited on key/value chunk I/O (not hidden behind compute)"),
      field("comm_buffer_bytes", &R::comm_buffer_bytes, "bytes",
            "most gradient-reduction buffers held at once within a step: each reducing unit's full "
            "gradient in the reduce dtype (the collective's input) and its reduction output while "
            "in flight (the all-gather's outputs are gathered_bytes; 0: no reduction, e.g. infer)"),
      field("offload_update_wait_s", &R::offload_update_wait_s, "s",
            "seconds the compute thread waited for the optimizer update overlapped with the next "
            "forward (offload_overlap), over the run: what the forward did not hide"),
      field("predicted_grad_unformed_bytes", &R::predicted_grad_unformed_bytes, "bytes",
            "memory model: of predicted_grad_bytes, what is not alive at the predicted peak's "
            "moment: at the top block's backward every gradient (the last step's dropped, this "
            "step's not yet formed), at the first unit's backward that unit's; 0 at forward's "
            "end: the predicted peak is the other terms' sum less it"),
      field("offload_param_read_bytes", &R::offload_param_read_bytes, "bytes",
            "bytes the gathers read of the master shards from the offload file over the run "
            "(offload_param = \"disk\"; 0 without): each gather reads its unit's shard"),
      field("offload_param_read_s", &R::offload_param_read_s, "s",
            "seconds the gathers' I/O threads spent reading master shards (bandwidth = "
            "offload_param_read_bytes / offload_param_read_s; a prefetched unit's read overlaps "
            "the compute before it, and what was not hidden is in the gathers' waits)"),
      field("peak_step_tensor_phase", &R::peak_step_tensor_phase, "",
            "where the step that set peak_step_tensor_bytes was when its tensors peaked: the "
            "engine's last event before it, e.g. \"loss\" (forward's end), \"backward of a "
            "later use of unit 0\" (the tied LM head's, first in backward), \"backward of unit "
            "12\", \"gradient of unit 12\" (its reduction starting), \"finish gradients\", "
            "\"optimizer\" (unit numbers as in the model's units). Under full checkpointing the "
            "top block's backward reads \"recomputation of unit L\" (its recomputation's "
            "acquire comes after its backward hook), and the loss's own backward is named for "
            "the unit whose hook fires first (the final LayerNorm's); \"\": not measured"),
      field("predicted_peak_moment", &R::predicted_peak_moment, "",
            "the moment the memory model takes its activation terms at: \"forward's end\" "
            "(the engine's phase there: \"loss\") or \"top block's backward\" (\"backward of "
            "unit\" of the last block) or \"first unit's backward\" (\"backward of unit 0\", "
            "after every block's); \"\": not predicted"),
      field("predicted_first_unit_grad_bytes", &R::predicted_first_unit_grad_bytes, "bytes",
            "memory model: at the first unit's backward (the embeddings'), when that moment is "
            "the peak: its gradient parts and their join and the tied head weight's gradient "
            "(estimate; 0 at the other moments)"));
};

// This rank's identity (rank, host, its coordinates in the point's resolved mesh) and its
// process's peak resident memory now (getrusage); the caller adds what it owns (parameters,
// gradients, ...). The one place that reads them.
RankMemory rank_memory_now(int rank, const Mesh& mesh);

struct CommEvent {  // one collective as seen by one rank
  std::int64_t step = 0;
  std::int32_t rank = 0;
  std::string op, group, kind;
  std::string backend = "mpi";
  std::uint64_t logical_bytes = 0, wire_bytes = 0;
  double start_s = 0, duration_s = 0;
  // Point-to-point (op send/recv): the other rank's world rank; -1 for a collective.
  // Appended: aggregate initializers keep their meaning.
  std::int32_t peer = -1;
  // The process-mesh dimension(s) the group spans (harness/core/mesh.h): "world" for all of
  // them, else the dimension's name (dp_shard, dp_replicate, ...). Appended, as above.
  std::string dim = "world";
};

template <>
struct Table<CommEvent> {
  using R = CommEvent;
  static constexpr const char* group = "comm";
  static constexpr const char* doc = "one row per collective per rank";
  static constexpr bool from_every_rank = true;
  static constexpr auto fields = std::make_tuple(
      field("step", &R::step, "", "step (train) or size index (micro) the collective belongs to"),
      field("rank", &R::rank, "", "MPI rank that saw it"),
      field("op", &R::op, "",
            "all_gather, reduce_scatter, all_reduce, broadcast, all_to_all, or the point-to-point "
            "send and recv"),
      field("group", &R::group, "", "process group: world, shard or replica"),
      field("kind", &R::kind, "",
            "purpose: param_all_gather, grad_reduce_scatter, grad_all_reduce or other"),
      field("backend", &R::backend, "",
            "library that ran it: mpi, gloo or nccl (comm_backend; host tensors under nccl: mpi; "
            "a compressed one split by an auto table: both, joined by +)"),
      field("logical_bytes", &R::logical_bytes, "bytes",
            "bytes the uncompressed fp32 collective sends to other ranks (docs/METRICS.md)"),
      field("wire_bytes", &R::wire_bytes, "bytes",
            "bytes this collective sends to other ranks; send and recv: the message's bytes "
            "(count a message once, by its send row)"),
      field("start_s", &R::start_s, "s", "start, relative to the point's start"),
      field("duration_s", &R::duration_s, "s", "from start to completion"),
      field("peer", &R::peer, "", "send and recv: the other rank (world rank); -1 for collectives"),
      field("dim", &R::dim, "",
            "process-mesh dimension the transfer runs along: world (all ranks), dp_shard, "
            "dp_replicate, tp, pp or sp"));
};

struct QueryRecord {  // inference: one query (MLPerf LoadGen vocabulary)
  std::string scenario;
  std::int64_t query = 0;
  double issue_s = 0, latency_s = 0;
  std::int64_t samples = 0, tokens = 0;
};

template <>
struct Table<QueryRecord> {
  using R = QueryRecord;
  static constexpr const char* group = "queries";
  static constexpr const char* doc = "inference: one row per query";
  static constexpr bool from_every_rank = false;
  static constexpr auto fields = std::make_tuple(
      field("scenario", &R::scenario, "", "single-stream, multi-stream, server or offline"),
      field("query", &R::query, "", "index of the query in its scenario"),
      field("issue_s", &R::issue_s, "s", "issue time, relative to the scenario's start"),
      field("latency_s", &R::latency_s, "s", "from issue to completion, queueing included"),
      field("samples", &R::samples, "", "samples in the query"),
      field("tokens", &R::tokens, "", "tokens in the query"));
};

struct RequestRecord {  // serving: one request (workloads/serve)
  std::int64_t request = 0;
  double arrival_s = 0;
  std::int64_t prompt_tokens = 0, output_tokens = 0;
  bool refused = false, slo_met = false;
  double queue_s = 0, ttft_s = 0, tpot_s = 0, e2e_s = 0;
};

template <>
struct Table<RequestRecord> {
  using R = RequestRecord;
  static constexpr const char* group = "requests";
  static constexpr const char* doc =
      "serve: one row per request; times on the server's clock (docs/METRICS.md, Serving)";
  static constexpr bool from_every_rank = false;
  static constexpr auto fields = std::make_tuple(
      field("request", &R::request, "", "index of the request in arrival order"),
      field("arrival_s", &R::arrival_s, "s", "arrival time, relative to the run's start"),
      field("prompt_tokens", &R::prompt_tokens, "", "prompt length in tokens"),
      field("output_tokens", &R::output_tokens, "", "tokens generated (0 if refused)"),
      field("refused", &R::refused, "",
            "1 if refused: prompt + output longer than the model's context"),
      field("slo_met", &R::slo_met, "", "1 if ttft_s <= slo_ttft and tpot_s <= slo_tpot"),
      field("queue_s", &R::queue_s, "s", "from arrival to the start of its prefill"),
      field("ttft_s", &R::ttft_s, "s", "time to first token: from arrival to the first token"),
      field("tpot_s", &R::tpot_s, "s",
            "time per output token after the first: (e2e_s - ttft_s) / (output_tokens - 1); "
            "0 for one token"),
      field("e2e_s", &R::e2e_s, "s", "from arrival to the last token"));
};

struct ServeStepRecord {  // serving: one scheduler step
  std::int64_t step = 0;
  double start_s = 0, duration_s = 0, schedule_s = 0, prefill_s = 0, decode_s = 0;
  std::int64_t prefill_requests = 0, prompt_tokens = 0, prefill_tokens = 0, decode_rows = 0,
               running = 0, waiting = 0;
  std::uint64_t kv_in_use_bytes = 0;
};

template <>
struct Table<ServeStepRecord> {
  using R = ServeStepRecord;
  static constexpr const char* group = "serve_steps";
  static constexpr const char* doc = "serve: one row per scheduler step (prefill and/or decode)";
  static constexpr bool from_every_rank = false;
  static constexpr auto fields = std::make_tuple(
      field("step", &R::step, "", "index of the step"),
      field("start_s", &R::start_s, "s", "start on the server's clock"),
      field("duration_s", &R::duration_s, "s", "schedule_s + prefill_s + decode_s"),
      field("schedule_s", &R::schedule_s, "s",
            "scheduling and bookkeeping: the policy's decision, admitting, finished rows leaving"),
      field("prefill_s", &R::prefill_s, "s", "prefill of the requests admitted this step"),
      field("decode_s", &R::decode_s, "s", "one decode step of the rows running before it"),
      field("prefill_requests", &R::prefill_requests, "", "requests admitted (prefilled)"),
      field("prompt_tokens", &R::prompt_tokens, "", "the admitted requests' prompt tokens"),
      field("prefill_tokens", &R::prefill_tokens, "",
            "token positions the prefill computed, padding included (padded: requests x longest "
            "prompt; packed BERT rows: rows x longest prompt)"),
      field("decode_rows", &R::decode_rows, "",
            "rows decoded: the batch size of the decode step (static: padding rows included)"),
      field("running", &R::running, "", "requests holding a KV row after the step"),
      field("waiting", &R::waiting, "", "requests arrived and waiting after the step"),
      field("kv_in_use_bytes", &R::kv_in_use_bytes, "bytes",
            "KV-cache bytes of the tokens the rows hold at the end of the step, before "
            "finished requests leave"));
};

struct RoutingRecord {  // a mixture of experts: one token's routing at one MoE layer
  std::int64_t step = 0;
  std::int32_t rank = 0, layer = 0;
  std::int64_t token = 0;
  std::int32_t expert = 0, second = -1;
  bool kept = false;
};

template <>
struct Table<RoutingRecord> {
  using R = RoutingRecord;
  static constexpr const char* group = "routing";
  static constexpr const char* doc =
      "train, gpt2-moe with moe.trace_every > 0: one row per token per MoE layer of the traced "
      "steps' last forward (the routing traces ExFlow's affinity is computed from)";
  static constexpr bool from_every_rank = true;
  static constexpr auto fields = std::make_tuple(
      field("step", &R::step, "", "the step whose last forward routed it"),
      field("rank", &R::rank, "", "the rank whose routing group (micro-batch) held the token"),
      field("layer", &R::layer, "", "the block (0-based; MoE blocks only)"),
      field("token", &R::token, "", "the token's index in its rank's group: row x T + position"),
      field("expert", &R::expert, "", "its first-choice expert"),
      field("second", &R::second, "", "its second choice with moe.top_k = 2; -1 with top-1"),
      field("kept", &R::kept, "", "whether the first choice processed it (capacity); false: dropped"));
};

// Every record type, in the order of the result file's groups.
using RecordTypes = RecordList<StepRecord, RankMemory, CommEvent, QueryRecord, RequestRecord,
                               ServeStepRecord, RoutingRecord>;

}  // namespace sb
