// The memory model (memory_model.h): each term from the strategy's record and the sizes.
#include "workloads/fsdp/memory_model.h"

#include "workloads/fsdp/offload_store.h"

#include <algorithm>
#include <functional>

#include "workloads/comm/compressed_collectives.h"
#include "workloads/fsdp/shard.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/models/attention.h"
#include "workloads/models/family.h"
#include "workloads/models/loss.h"

namespace sb::fsdp {
namespace {

using U64 = std::uint64_t;

// The ranks a unit is cut into when the layout shards over n: an experts unit's group is the
// shard group's ranks / ep (the expert-data-parallel group, engine.cpp).
int unit_shards(const models::UnitSpec& u, int n, int ep) { return u.expert && n > 1 ? n / ep : n; }

// State the compression policy keeps per rank: for every collective of the record on every
// unit, what CompressedCollectives keeps once it ran (also over one rank, unless the record
// skips it there).
U64 compression_bytes(const StrategyInfo& s, const std::vector<models::UnitSpec>& units,
                      const DpMesh& mesh, const comm::Policy& policy, int ep) {
  const int n = s.shard_factor(mesh);
  U64 total = 0;
  for (const auto& u : units) {
    const int e = u.expert ? ep : 1;
    const ShardRange r = shard_range(u.numel(), unit_shards(u, n, ep), 0);
    for (const CollectiveUse& c : s.collectives) {
      const int ranks = c.over == MeshDim::dp_replicate ? mesh.size(c.over) : std::max(1, mesh.size(c.over) / e);
      if (ranks <= 1 && c.skipped_on_one_rank) continue;
      total += static_cast<U64>(comm::CompressedCollectives::state_bytes_of(
          policy, c.kind, StrategyInfo::elements(c, r), ranks));
    }
  }
  return total;
}

// The most gathered parameter bytes at once. Replicated parameters: the compute-dtype copy
// of every unit (none in fp32, where the model computes on the master itself). Sharded and
// kept gathered until backward (no reshard after forward): every unit at the end of forward.
// Sharded and freed after use: the unit computing, the prefetched one and a unit the model
// acquires twice per forward (a tied embedding, kept from forward to backward), estimated as
// the largest units.
U64 gathered_bytes(const Layout& l, const std::vector<U64>& unit_bytes, bool fp32, bool prefetch,
                   bool pipelined) {
  U64 all = 0;
  for (U64 b : unit_bytes) all += b;
  if (!l.params_sharded) return fp32 ? 0 : all;
  if (!l.reshard_after_forward || pipelined) return all;  // a pipeline step holds every unit
  std::vector<U64> sorted = unit_bytes;
  std::sort(sorted.begin(), sorted.end(), std::greater<U64>());
  const std::size_t held = std::min<std::size_t>(sorted.size(), prefetch ? 3 : 2);
  U64 total = 0;
  for (std::size_t i = 0; i < held; ++i) total += sorted[i];
  return total;
}

// The moments the activation terms are taken at (MemoryPrediction::moment); the third,
// kFirstUnitBackward, is first_unit_moment's.
constexpr const char* kForwardEnd = "forward's end";
constexpr const char* kTopBackward = "top block's backward";
constexpr const char* kFirstUnitBackward = "first unit's backward";

// FPDT's pipeline (activation_checkpoint = "chunked", models/checkpoint.h chunked_block): with
// kv_offload = "none" every block keeps its input (d a token) and its keys and values (2 a);
// offloaded, both wait in the block's stores and no block keeps anything in memory. Forward's
// end adds the loss's (head). The top block's backward, the first to run, adds what
// the pipeline holds at its first chunk (the last one): every chunk's keys and values brought
// back from a store (2 a; in memory they are the kept ones) and joined again for the chunk's
// queries (2 a), the gradients of the earlier chunks' leaves (2 a) and their fp32 sums (2 a x
// 4 bytes), and one chunk's recomputed
// activations: per_token and its attention's scores at the chunk's tokens (`scores`, a whole
// block's at T, and the score gradients its backward forms, `grads`, both scaled by chunk / T)
// and its tile (`tile`); with more than one chunk, the fp32 sum of the block's gradient parts
// (block_part).
void chunked_moments(const MemoryInputs& in, U64 elt, U64 flight, U64 tokens, U64 L, U64 per_token, U64 input,
                     U64 scores, U64 grads, U64 tile, U64 head, U64 grads_formed, U64 block_part,
                     MemoryPrediction& p) {
  const models::ModelConfig& c = in.model;
  // Under Ulysses a rank's seq / sp tokens are its stripes of the C chunks: a chunk's
  // recomputation holds its local stripe's activations (per_token) and, over the sp stripes
  // gathered, its heads' scores: the fraction chunk / seq of the whole sequence's.
  const auto sp = static_cast<U64>(std::max(1, in.sp)), seq = static_cast<U64>(in.seq);
  const auto C = std::max<U64>(1, std::min(static_cast<U64>(std::max<std::int64_t>(1, c.seq_chunks)), seq / sp));
  const U64 stripe = (seq / sp + C - 1) / C, chunk = stripe * sp;
  // tokens: every in-flight micro-batch's (a pipeline's); the backward pipeline runs one.
  const U64 one = tokens / flight, chunk_tokens = static_cast<U64>(in.rows) * stripe;
  // k and v, elements a local token (the buffer's sp x more tokens of 1 / sp of the heads
  // under Ulysses): this tp rank's heads.
  const auto a2 = static_cast<U64>(2 * c.attn_width() / std::max(1, in.tp));
  const bool in_memory = c.kv_offload == "none";
  const U64 kept = in_memory ? L * (input + a2) * tokens * elt : 0;
  if (c.kv_offload == "disk")  // every block's chunk files: k and v, and the input, each padded to 4096
    p.disk_kv = L * ((a2 + input) * tokens * elt + 2 * C * 4096 * flight);
  // ... and the input's gradient, filled chunk by chunk (d).
  const U64 pipe = a2 * one * ((in_memory ? 2 : 3) * elt + std::max<U64>(elt, 4)) + input * one * elt;
  // With more than one chunk, the sum of the block's gradient parts (fp32) while the next forms.
  const U64 back_layers = kept + pipe + chunk_tokens * per_token * elt + (C > 1 ? block_part : 0);
  const U64 back_scores = (scores / flight + grads) * chunk / seq + tile;
  const U64 back_head = in.last_stage && in.loss_classes > 0
                            ? static_cast<U64>((in.loss_classes + std::max(1, in.tp) - 1) / std::max(1, in.tp)) *
                                  static_cast<U64>(c.d_model) * elt
                            : 0;
  if (back_layers + back_scores + back_head > kept + head + grads_formed) {
    p.activation_layers = back_layers, p.activation_attention = back_scores, p.activation_head = back_head;
    p.grad_unformed = grads_formed;
    p.moment = kTopBackward;
  } else {
    p.activation_layers = kept, p.activation_head = head;
    p.moment = kForwardEnd;
  }
}

// Activations autograd keeps for the backward of one micro-batch of `rows` x `seq` tokens
// (elt bytes per element in the compute dtype), per block: the inputs of both LayerNorms and
// of the four linear layers (4 d), what the attention variant keeps of q, k, v and its output
// plus the output projection's input (4 x the attention width a for naive and sdpa: q, k, v
// and that input, which is sdpa's kept output itself), the MLP's hidden state before and after
// GELU (2 f); GPT-2's and BERT's blocks alike.
// grads_formed: the step's gradient bytes that backward forms anew (Engine::drop_grads),
// absent at the top block's backward.
// block_part: the fp32 sum of a block's gradient parts a chunked block's backward keeps
// (Engine's Unit::part).
void activation_bytes(const MemoryInputs& in, std::uint64_t elt, std::uint64_t grads_formed, std::uint64_t block_part,
                      MemoryPrediction& p) {
  if (in.rows <= 0 || in.seq <= 0) return;
  const models::ModelConfig& c = in.model;
  // A pipeline rank: its blocks, a virtual stage's share of them per in-flight micro-batch.
  const auto flight = static_cast<U64>(std::max(1, in.in_flight));
  // Ulysses: this rank's seq / sp tokens of each row outside attention.
  const std::int64_t sp = std::max(1, in.sp);
  const auto tokens = static_cast<U64>(in.rows * (in.seq / sp)) * flight;
  const auto L = in.stage_layers < 0 ? static_cast<U64>(c.n_layer)
                                     : static_cast<U64>(in.stage_layers / std::max(1, in.v));
  // Tensor parallelism splits the attention width, the MLP's and the heads tp ways; the
  // LayerNorm and linear inputs of width d stay whole on every tp rank.
  const std::int64_t tp = std::max(1, in.tp);
  // Sequence parallelism splits those too (the linear layers keep their inputs' row blocks).
  const std::int64_t whole = in.sequence_parallel ? 4 * c.d_model / tp : 4 * c.d_model;
  // Of q, k, v and the attention output, what the variant keeps (Attention::kept_inputs), and
  // the output projection's own input.
  const auto& ac = in.checkpoint;
  const bool chunked = ac.mode == models::CheckpointMode::Chunked;
  models::AttentionOptions ao = c.attention_options();
  if (chunked) ao.seq_chunks = 0, ao.kv_offload = "none";  // what Gpt2 runs inside chunked blocks
  const auto attn = models::make_attention(c.attention, ao);
  const auto qkvo = static_cast<std::int64_t>((1.0 + attn->kept_inputs()) * static_cast<double>(c.attn_width()));
  const auto per_token = static_cast<U64>(whole + (qkvo + 2 * c.d_ff) / tp);
  // The softmax output (B, H, T, T), kept for the softmax's and probs x V's backward: how much
  // of it the attention variant keeps is its record's (Attention::kept_scores).
  const bool causal = models::family(c.family).objective == models::Objective::CausalLm;
  const double whole_scores = static_cast<double>(in.rows * (c.n_head / tp / sp) * in.seq * in.seq) *
                              static_cast<double>(elt * flight);
  const auto scores = static_cast<U64>(attn->kept_scores(causal) * whole_scores);  // one block's
  const auto grads = static_cast<U64>(attn->backward_scores() * whole_scores / static_cast<double>(flight));
  // A tiled variant's largest tile at a block's backward (Attention::tile_bytes: fpdt's).
  const auto tile = static_cast<U64>(attn->tile_bytes(in.seq, static_cast<std::int64_t>(elt)) *
                                     static_cast<double>(in.rows * (c.n_head / tp / sp)));
  // Activation checkpointing: a recomputed block keeps only its input (d a token: the
  // sequence-parallel share under tp_sequence_parallel); selective recomputation keeps no
  // block's scores.
  const U64 recomputed = ac.mode == models::CheckpointMode::Full
                             ? (L + static_cast<U64>(ac.every) - 1) / static_cast<U64>(ac.every)
                             : 0;
  const bool selective = ac.mode == models::CheckpointMode::Selective;
  const auto input = static_cast<U64>(in.sequence_parallel ? c.d_model / tp : c.d_model);
  const U64 kept_layers = ((L - recomputed) * per_token + recomputed * input) * tokens * elt;
  const U64 kept_scores = (selective ? 0 : L - recomputed) * scores;
  // FPDT's chunk files: k and v of each kept block (of one under recomputation, whose first
  // forward stores nothing), this rank's heads over the whole T, each chunk padded to 4096.
  if (c.kv_offload == "disk" && attn->streams_chunks()) {
    const std::int64_t chunk = c.seq_chunks > 0 ? (in.seq + c.seq_chunks - 1) / c.seq_chunks : c.attention_chunk;
    const auto chunks = static_cast<U64>((in.seq + chunk - 1) / chunk);
    const auto kv = static_cast<U64>(2 * in.rows * in.seq * (c.attn_width() / tp / sp)) * elt;
    p.disk_kv = ((L - recomputed) + (recomputed > 0 ? 1 : 0)) * (kv + chunks * 4096) * flight;
  }
  // Cross-entropy keeps the fp32 log-softmax of the logits it is taken over (under tp, this
  // rank's vocabulary columns: the largest range, vocab_range). The chunked loss
  // (models/loss.cpp) forms both input gradients in its forward: x's (rows x d) and, over
  // several chunks, w's as an fp32 V x d sum. Its largest moment is a chunk's weight-gradient
  // GEMM (or the cast of its logits before it, the same bytes): the chunk's logits in fp32
  // and their gradient in the compute dtype, and one block of the GEMM's V x d product
  // (kLossGradBlockRows rows) with its fp32 copy; or, after the last chunk, the sum cast to
  // the compute dtype. One chunk: the GEMM's whole product, in the compute dtype. In fp32 the
  // casts are the tensors themselves. Earlier in-flight micro-batches (a pipeline) keep their
  // two gradients, compute dtype.
  const auto V = static_cast<U64>((in.loss_classes + tp - 1) / tp), d = static_cast<U64>(c.d_model);
  U64 head = 0;
  if (in.last_stage && in.loss_chunk_rows > 0) {
    const auto rows = static_cast<U64>(in.loss_rows), ch = std::min(rows, static_cast<U64>(in.loss_chunk_rows));
    const U64 wide = elt < 4 ? 4 + elt : 4;  // bytes a logit while a chunk runs
    const auto block = static_cast<U64>(models::kLossGradBlockRows);
    const U64 chunk = ch * V * wide;
    const U64 now = rows > ch ? V * d * 4 + std::max(chunk + std::min(V, block) * d * wide, elt < 4 ? V * d * elt : 0)
                              : chunk + V * d * elt;
    head = (rows * d + V * d) * elt * (flight - 1) + rows * d * elt + now;
  } else if (in.last_stage) {
    head = static_cast<U64>(in.loss_rows) * V * 4 * flight;
  }
  if (chunked) {
    chunked_moments(in, elt, flight, tokens, L, per_token, input, scores, grads, tile, head, grads_formed,
                    block_part, p);
    return;
  }
  // Two moments bound the step; the terms are those of the larger. Forward's end: what every
  // block keeps, and the loss's. The last block's backward (the first backward runs): what the
  // blocks keep, the block's activations and scores again when it is recomputed, the
  // gradients its attention's backward forms (Attention::backward_scores, tile_bytes), and of
  // the loss's only the head weight's gradient (V x d), held until its unit's gradient is
  // whole (GPT-2's and BERT's are tied to the embedding, whose backward comes last); none of
  // the step's parameter gradients yet (grad_unformed).
  const bool again = recomputed > 0 || selective;
  const U64 back_layers = kept_layers + (recomputed > 0 ? per_token * tokens * elt : 0);
  const U64 back_scores = kept_scores + (again && L > 0 ? scores : 0) + (L > 0 ? grads + tile : 0);
  const U64 back_head = in.last_stage && in.loss_classes > 0 ? V * d * elt : 0;
  if (back_layers + back_scores + back_head > kept_layers + kept_scores + head + grads_formed) {
    p.activation_layers = back_layers, p.activation_attention = back_scores, p.activation_head = back_head;
    p.grad_unformed = grads_formed;
    p.moment = kTopBackward;
  } else {
    p.activation_layers = kept_layers, p.activation_attention = kept_scores, p.activation_head = head;
    p.moment = kForwardEnd;
  }
}

// A third moment, after every block's backward: the first unit's (GPT-2's and BERT's
// embeddings, whose word embedding the LM head shares), the last backward to run. Autograd
// forms each of its parameters' gradients and the split node joins them into the unit's
// padded gradient (Engine::views): both alive at once, 2 x the unit's compute-dtype bytes
// (first_unit); the head weight's gradient (V x d) is held since the loss's backward. No
// activation is left, and of this step's gradients only the unit's own (first_reduced) is not
// yet formed. The gathered term stays: the unit is gathered. It wins at short sequences
// (measured: gpt2-long bf16, full_shard over sp 2, T 512: the peak's phase "backward of unit
// 0", 11% above the forward's-end prediction). Not for a pipeline: its stages' first units
// differ (not measured). The head's gradient is counted as a tied head's (GPT-2's, BERT's):
// an untied one's is freed earlier, so such a model is over-predicted here.
void first_unit_moment(const MemoryInputs& in, U64 elt, U64 first_unit, U64 first_reduced, MemoryPrediction& p) {
  if (in.pp > 1 || in.rows <= 0 || in.seq <= 0) return;
  const auto tp = static_cast<std::int64_t>(std::max(1, in.tp));
  const U64 head = in.last_stage && in.loss_classes > 0
                       ? static_cast<U64>((in.loss_classes + tp - 1) / tp) * static_cast<U64>(in.model.d_model) * elt
                       : 0;
  const U64 now = p.activation_layers + p.activation_attention + p.activation_head;
  if (2 * first_unit + head + p.grad_unformed <= now + first_reduced) return;  // not the peak
  p.activation_layers = p.activation_attention = p.activation_head = 0;
  p.first_unit_grad = 2 * first_unit + head;
  p.grad_unformed = first_reduced;
  p.moment = kFirstUnitBackward;
}

}  // namespace

MemoryPrediction predict_memory(const MemoryInputs& in) {
  const StrategyInfo& s = strategy_info(in.strategy);
  const Layout& l = s.layout;
  const DpMesh mesh = s.mesh(in.world, in.shard_group == 0 ? in.world : in.shard_group);
  const int n = s.shard_factor(mesh);
  const U64 elt = c10::elementSize(in.param_dtype);
  MemoryPrediction p;
  std::vector<U64> unit_bytes;  // gathered, compute dtype
  U64 formed = 0;               // the reduce-dtype gradients each step forms anew
  U64 first_reduced = 0;        // the first unit's share of them
  std::vector<U64> shards;      // each unit's shard, elements
  U64 block_part = 0;           // a block's (padded) gradient in fp32: a chunked block's parts' sum
  // Where the engine puts the master on disk (Engine::make_offload_store refuses the rest).
  const bool master_on_disk = in.offload_master && in.offload_optimizer == "disk" && l.params_sharded;
  for (const auto& u : in.units) {
    const ShardRange r = shard_range(u.numel(), unit_shards(u, n, std::max(1, in.ep)), 0);
    const U64 padded = static_cast<U64>(r.padded), S = static_cast<U64>(r.size);
    if (!master_on_disk) p.param += 4 * (l.params_sharded ? S : padded);
    shards.push_back(S);
    const U64 reduced = c10::elementSize(in.reduce_dtype) * (l.grads_sharded ? S : padded);
    formed += reduced;
    if (shards.size() == 1) first_reduced = reduced;
    p.grad += reduced + (in.grad_accum > 1 || in.pp > 1 ? 4 * padded : 0);
    if (in.offload_optimizer == "none") p.optim += 8 * (l.optim_sharded ? S : padded);
    p.disk_checkpoint += 4 * ((l.params_sharded ? S : padded) + 2 * (l.optim_sharded ? S : padded));
    if (in.offload_optimizer == "disk")
      p.disk_optim += (master_on_disk ? 4 : 3) * ((4 * (l.optim_sharded ? S : padded) + 4095) / 4096 * 4096);
    unit_bytes.push_back(elt * padded);
    if (u.name.rfind("block.", 0) == 0) block_part = std::max(block_part, 4 * padded);
  }
  p.compression = compression_bytes(s, in.units, mesh, in.policy, std::max(1, in.ep));
  p.gathered = gathered_bytes(l, unit_bytes, in.param_dtype == torch::kFloat32, in.prefetch, in.pp > 1);
  // offload_param = "disk": a gather's shard read from disk lives until the gather completes;
  // while a unit computes, the prefetched one's is in flight. Of the units gathered_bytes
  // holds at once (the largest ones: the unit computing, the prefetched one, the tied
  // embedding held from forward to backward), the prefetched one is taken as the smallest
  // (the embedding is the largest and is not prefetched at the peak, the top block's backward).
  if (master_on_disk && in.prefetch && !shards.empty()) {
    std::sort(shards.begin(), shards.end(), std::greater<U64>());
    const U64 prefetched = shards[std::min<std::size_t>(shards.size(), 3) - 1];
    p.gathered += OffloadStore::master_read_bytes(static_cast<std::int64_t>(prefetched));
  }
  activation_bytes(in, elt, formed, block_part, p);
  if (!unit_bytes.empty()) first_unit_moment(in, elt, unit_bytes.front(), first_reduced, p);
  if (in.offload_optimizer != "none") p.offload = OffloadStore::staging_bytes(in.offload_block, master_on_disk);
  p.model_state = p.param + p.grad + p.optim + p.compression + p.offload + (l.params_sharded ? 0 : p.gathered);
  return p;
}

std::vector<MemoryPrediction::Term> MemoryPrediction::terms() const {
  return {{"param", param},
          {"grad", grad},
          {"optim", optim},
          {"compression", compression},
          {"gathered", gathered},
          {"activation_layers", activation_layers},
          {"activation_attention", activation_attention},
          {"activation_head", activation_head},
          {"first_unit_grad", first_unit_grad},
          {"offload", offload},
          {"model_state", model_state},
          {"grad_unformed", grad_unformed}};
}

std::uint64_t MemoryPrediction::peak() const {
  return param + grad + optim + compression + gathered + activation_layers + activation_attention +
         activation_head + first_unit_grad + offload - grad_unformed;
}

void add_predicted_memory(const MemoryPrediction& p, sb::RankMemory& m) {
  m.predicted_param_bytes = p.param;
  m.predicted_grad_bytes = p.grad;
  m.predicted_optim_bytes = p.optim;
  m.predicted_compression_bytes = p.compression;
  m.predicted_gathered_bytes = p.gathered;
  m.predicted_activation_layers_bytes = p.activation_layers;
  m.predicted_activation_attention_bytes = p.activation_attention;
  m.predicted_activation_head_bytes = p.activation_head;
  m.predicted_first_unit_grad_bytes = p.first_unit_grad;
  m.predicted_offload_bytes = p.offload;
  m.predicted_model_state_bytes = p.model_state;
  m.predicted_grad_unformed_bytes = p.grad_unformed;
  m.predicted_peak_moment = p.moment;
}

namespace {
MemoryInputs state_inputs(const std::vector<models::UnitSpec>& units, const std::string& strategy,
                          int world, int shard_group, const comm::Policy& policy) {
  MemoryInputs in;
  in.units = units;
  in.strategy = strategy;
  in.world = world;
  in.shard_group = shard_group;
  in.policy = policy;
  return in;
}
}  // namespace

std::uint64_t model_state_bytes(const std::vector<models::UnitSpec>& units,
                                const std::string& strategy, int world, int shard_group,
                                torch::ScalarType param_dtype, int grad_accum,
                                const comm::Policy& policy) {
  MemoryInputs in = state_inputs(units, strategy, world, shard_group, policy);
  in.param_dtype = param_dtype;
  in.grad_accum = grad_accum;
  return predict_memory(in).model_state;
}

std::uint64_t compression_state_bytes(const std::vector<models::UnitSpec>& units,
                                      const std::string& strategy, int world, int shard_group,
                                      const comm::Policy& policy) {
  return predict_memory(state_inputs(units, strategy, world, shard_group, policy)).compression;
}

}  // namespace sb::fsdp
