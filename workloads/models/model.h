// The model interface shared by the reference trainer, the FSDP engine and inference.
// A model is a list of units (the FSDP wrapping granularity: embeddings, each block, the
// head); each unit owns an ordered list of parameters. The model never owns storage for
// its parameters: it asks a ParamProvider for them, so the same forward code runs on
// plain persistent tensors (reference) and on FSDP-gathered flat buffers (sharded).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/models/attention.h"
#include "workloads/models/checkpoint.h"
#include "workloads/models/dropout.h"
#include "workloads/models/moe.h"
#include "workloads/models/pipeline.h"
#include "workloads/models/sequence_parallel.h"
#include "workloads/models/tensor_parallel.h"

namespace sb {
class Point;
}

namespace sb::models {

class KvDecoder;  // kv_decoder.h

struct ParamSpec {
  std::string name;            // Hugging Face name, e.g. "h.3.attn.c_attn.weight"
  std::vector<std::int64_t> shape;
  bool decay = true;           // AdamW weight decay (false: biases, LayerNorm, embeddings' LN)
  enum class Init { Normal, Zeros, Ones } init = Init::Normal;
  double std = 0.02;           // for Init::Normal
  // Tensor parallelism (tensor_parallel.h): how this parameter is split over mesh.tp, this
  // rank's block of it, and the whole parameter's shape (empty: not split, shape is whole).
  TpSplit tp = TpSplit::None;
  int tp_rank = 0, tp_size = 1;
  std::vector<std::int64_t> full_shape;
  // Expert parallelism (moe.h): experts stacked on dimension 0 and split into ep_size equal
  // blocks, this rank's the ep_rank-th (shape[0] = the whole's / ep_size).
  int ep_rank = 0, ep_size = 1;
  std::int64_t numel() const;
};

// Expert parallelism: s split on dimension 0 into `size` blocks, this rank's the rank-th; and
// that block of a whole tensor (whole itself when s is not split).
ParamSpec ep_split(ParamSpec s, int rank, int size);
torch::Tensor ep_slice(const ParamSpec& s, const torch::Tensor& whole);

struct UnitSpec {
  std::string name;             // "embed", "block.3", "head"
  std::vector<ParamSpec> params;
  // Pipeline parallelism (pipeline.h): the unit's index in the whole model (what seeds its
  // initial values; -1: its position in the list); whether the first stage's unit has a copy
  // on the last stage (pp_tied: a tied embedding), or is that copy (pp_copy): the two sum
  // their gradients, and the copy is counted once in the gradient norm.
  int whole_index = -1;
  bool pp_tied = false, pp_copy = false;
  // A mixture of experts' experts (moe.h): different on each rank of an expert-parallel group,
  // so sharded and reduced over the expert-data-parallel group (comm Group::Edp) instead.
  bool expert = false;
  // The unit's index in the whole model, this one at `position` in its model's list.
  int whole(int position) const { return whole_index >= 0 ? whole_index : position; }
  std::int64_t numel() const;
};

// Supplies a unit's parameters during forward. Units may be acquired more than once in one
// forward (GPT-2's tied word embedding is used by the first and the last unit).
class ParamProvider {
 public:
  virtual ~ParamProvider() = default;
  // The unit's parameters in UnitSpec order, each with its spec shape.
  virtual std::vector<torch::Tensor> acquire(int unit) = 0;
  // The unit's forward is done; `out` is what flows on to the next unit (the FSDP engine
  // hooks it to re-gather the unit before its backward).
  virtual void release(int unit, const torch::Tensor& out) = 0;
  // y = x w^T + b for the unit's linear weight at index w_index (shape (out, in); GPT-2's
  // Conv1D weights are transposed to this layout on load). Every linear layer of a model
  // goes through here so that quantized providers can run their own kernels.
  // Default: at::linear(x, w, b). b may be undefined.
  virtual torch::Tensor linear(int unit, int w_index, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& b);
  // GELU(linear(...)) (`approximate`: "none" for erf, "tanh"), the MLP's first layer, so a
  // provider whose kernel applies GELU on its output (int8-static's oneDNN post-op) can
  // fuse it. Default: at::gelu of this->linear, the same ops as calling both.
  virtual torch::Tensor linear_gelu(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                                    const torch::Tensor& b, c10::string_view approximate);
  // The mean cross-entropy of the logits linear(x, w) (no bias) against targets (-100 =
  // ignored), the training loss of an LM head. Default: cross_entropy of this->linear (loss.h),
  // so a provider with its own linear kernel keeps it; providers of plain weights (training's)
  // return loss.h's linear_cross_entropy, which never forms the (N, V) logits whole.
  virtual torch::Tensor linear_cross_entropy(int unit, int w_index, const torch::Tensor& x,
                                             const torch::Tensor& w, const torch::Tensor& targets);
  // Activation checkpointing (checkpoint.h): the acquires and releases between these two calls
  // are a block's recomputation in backward. The FSDP engine keeps them out of what it learns
  // from a forward (its gather order; a unit acquired twice in one forward is pinned) and
  // frees nothing on their release. Nested calls count. Default: nothing to do.
  virtual void begin_recompute() {}
  virtual void end_recompute() {}
  // A chunked block's backward (checkpoint.h, chunked_block) back-propagates one chunk at a
  // time, so a unit's gradient arrives in parts: those arriving between these two calls are
  // parts, the first one after them completes the sum. A provider that acts on a gradient as
  // it arrives (the FSDP engine reduces it) sums the parts first. Default: nothing to do (a
  // leaf's .grad accumulates the parts).
  virtual void begin_partial_grads() {}
  virtual void end_partial_grads() {}
};

struct Batch {
  torch::Tensor input_ids;       // (B, T) int64
  torch::Tensor targets;         // (B, T) int64; -100 = ignored (LM / MLM targets)
  torch::Tensor attention_mask;  // (B, T) int64 1 = real token, 0 = padding; undefined = all real
  torch::Tensor token_type_ids;  // (B, T) int64 (BERT); undefined = zeros
  torch::Tensor labels;          // (B) int64 sequence-classification labels; undefined = none
  // Distillation (workloads/distill/): the teacher's LossParts on this batch.
  torch::Tensor teacher_logits;  // (terms, classes)
  torch::Tensor teacher_hidden;  // (B*T, d_teacher); undefined = not asked for
  // Packed rows (BERT serving, workloads/serve/bert_executor.h): several sequences share a row.
  torch::Tensor position_ids;    // (B, T) int64 position of each token in its sequence; undefined = 0..T-1
  torch::Tensor segment_ids;     // (B, T) int64 sequence of each token (attention stays inside it)
  torch::Tensor cls_index;       // (N) int64 flat index (into B*T) of each sequence's first token;
                                 // undefined = token 0 of each row. classify returns (N, labels).
  // Dropout (dropout.h): the global index of this batch's first row in its step's global
  // batch (slices keep it), and the step whose masks training draws (-1: no dropout).
  std::int64_t row0 = 0, dropout_step = -1;
  // Sequence parallelism (sequence_parallel.h): these T columns are tokens [seq_begin,
  // seq_begin + T) of rows of seq_full tokens (0: the whole rows). With seq_stripe > 0 (FPDT's
  // chunks inside Ulysses, data::sequence_slice) they are T / seq_stripe stripes of seq_stripe
  // tokens, stripe i from seq_begin + i x seq_stripe x seq_full / T: every sp rank's i-th
  // stripe together make one contiguous chunk of the row.
  std::int64_t seq_begin = 0, seq_full = 0, seq_stripe = 0;
  std::int64_t row_tokens() const { return seq_full > 0 ? seq_full : input_ids.size(1); }
  // (T) int64 on input_ids' device: each column's position in its row (the formula above).
  torch::Tensor positions() const;
  std::int64_t tokens() const { return input_ids.numel(); }
};

struct ModelConfig {
  std::string family;  // a registered family (family.h): "gpt2", "bert"
  std::string preset;  // "gpt2-tiny", ...
  std::int64_t vocab = 0, max_pos = 0, d_model = 0, n_layer = 0, n_head = 0, d_ff = 0;
  // 0: d_model / n_head. Heads pruning (prune/prune_heads.cpp) removes heads and keeps their
  // width, so the attention width n_head x head_dim may fall below d_model.
  std::int64_t head_dim = 0;
  std::int64_t dh() const { return head_dim > 0 ? head_dim : d_model / n_head; }
  std::int64_t attn_width() const { return n_head * dh(); }
  std::int64_t type_vocab = 2;   // BERT token types
  std::int64_t num_labels = 2;   // BERT classification head
  double ln_eps = 1e-5;
  std::string attention = "naive";  // attention variant by name
  std::int64_t attention_chunk = 128;
  // FPDT (attention = "fpdt", attention_fpdt.cpp): the sequence's chunks and where the keys
  // and values of the chunks wait for backward (AttentionOptions).
  std::int64_t seq_chunks = 0;
  std::string kv_offload = "none", kv_offload_dir;
  MoeConfig moe;  // mixture of experts (moe.h; the gpt2-moe family): experts = 0 is dense
  AttentionOptions attention_options() const {
    return {attention_chunk, seq_chunks, kv_offload, kv_offload_dir};
  }
};

// The training loss and the tensors it is computed from, for losses built on top of it
// (distillation, workloads/distill/). Rows of `logits` are the loss terms (fsdp::loss_terms):
// GPT-2 the positions with a target, BERT the masked positions (MLM) or, with labels only,
// the rows (classification).
struct LossParts {
  torch::Tensor loss;    // () the training loss, as Model::loss returns it
  torch::Tensor logits;  // (terms, classes)
  torch::Tensor hidden;  // (B*T, d) the last layer's hidden states (when asked for)
};
// Builds the loss backward starts from out of the parts. The model releases its units
// against the tensor it returns (the engine re-gathers them when its gradient arrives), so
// the whole loss has to be formed inside the model's forward.
struct LossCombiner {
  std::function<torch::Tensor(const LossParts&)> combine;
  bool hidden = false;  // LossParts::hidden is needed
};

// Model FLOPs of one training step (forward + backward) on a batch, counted for what the
// forward computes for the batch's objective (docs/METRICS.md "Model FLOPs"):
//   matmul: 2 m n k for every GEMM of the forward (weights and attention scores / values),
//           twice that in the backward (gradients of activations and of weights);
//   vector: 6 per bias or LayerNorm parameter per row it applies to (the 6N convention
//           counts every parameter; they add no matmul).
// tests/unit/models_flops.cpp checks `matmul` against the GEMMs LibTorch runs.
struct TrainFlops {
  double matmul = 0, vector = 0;
  double attention = 0;  // of matmul: the score and value products, counted whole (12 L T A a token)
  // Of `attention`, what the model's attention variant computes (Attention::executed_scores:
  // causal blocks above the diagonal skipped or not): MFU's "as executed" count.
  double attention_executed = 0;
  std::string counted;  // which parts of the model were counted, for the result
  double total() const { return matmul + vector; }
  double executed() const { return total() - attention + attention_executed; }
};
// A forward alone (distillation's teacher): a third of the step's FLOPs (no backward).
TrainFlops forward_flops(const TrainFlops& step);
// 6 x the 2-D parameters (matmul weights) and 6 x the 1-D ones (biases, LayerNorm) of a
// unit: its weights' FLOPs per row it processes, forward + backward.
TrainFlops unit_flops_per_row(const UnitSpec& u);
// Loss terms of a batch as the training loss forms them: positions with a target (!= -100).
std::int64_t target_count(const Batch& b);

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const std::vector<UnitSpec>& units() const = 0;
  // Training objective: mean cross-entropy over non-ignored targets (GPT-2: next token,
  // targets already shifted by the data loader; BERT: MLM, plus classification if labels).
  torch::Tensor loss(ParamProvider& p, const Batch& b) { return loss_with(p, b, {}); }
  // The same loss, turned into another by c.combine (none: the loss itself).
  virtual torch::Tensor loss_with(ParamProvider& p, const Batch& b, const LossCombiner& c) = 0;
  // (B, T, vocab) for GPT-2 / BERT-MLM; (B, num_labels) for BERT classification via classify().
  virtual torch::Tensor logits(ParamProvider& p, const Batch& b) = 0;
  // Model FLOPs of one forward + backward on b, for the objective b asks for (targets: LM or
  // MLM; labels: classification): see TrainFlops.
  virtual TrainFlops train_flops(const Batch& b) const = 0;
  // (B, num_labels) sequence-classification logits (BERT); other families throw.
  virtual torch::Tensor classify(ParamProvider& p, const Batch& b);
  // The model as serving's KV-cache decoder (kv_decoder.h), or nullptr when it does not
  // decode incrementally: serving asks this, never the model's class.
  virtual KvDecoder* kv_decoder() { return nullptr; }
  // Shards the model over tensor-parallel ranks (tensor_parallel.h): units() become this
  // rank's blocks; train_flops still counts the whole model. "" when it can, else why not
  // (and the fix); set_tensor_parallel throws that message. Families that can say so in
  // their record (Family::tensor_parallel). Default: cannot.
  virtual std::string tensor_parallel_problem(int size) const;
  virtual void set_tensor_parallel(TensorParallel tp);
  // Ulysses sequence parallelism (sequence_parallel.h): "" when its attention can run over
  // `size` sp ranks (heads per tp rank divide by size; rows of seq tokens, seq > 0, split
  // evenly), else why and the fix. After set_sequence_parallel (and set_tensor_parallel) the
  // training forwards take sequence slices (data::sequence_slice: Batch::seq_begin, seq_full).
  // Families that can say so in their record (Family::sequence_parallel). Default: cannot.
  // tp_size: the mesh's tp (heads per tensor-parallel rank are what sp splits).
  virtual std::string sequence_parallel_problem(int size, std::int64_t seq, int tp_size = 1) const;
  virtual void set_sequence_parallel(SequenceParallel sp);
  // The stripe (tokens) of the sequence slices its training forwards take of rows of `seq`
  // tokens (data::sequence_slice): 0 for contiguous slices; FPDT's chunks inside Ulysses take
  // stripes so that each chunk the all-to-all gathers is contiguous (Batch::seq_stripe).
  virtual std::int64_t sequence_stripe(std::int64_t seq) const { (void)seq; return 0; }
  // Pipeline parallelism (pipeline.h): "" when the model can be cut into `stages` stages, else
  // why and the fix. set_pipeline cuts it (after set_tensor_parallel): units() become this
  // rank's stages' units, whose model-wide paths (loss_with, logits, classify, decoding) then
  // refuse; train_flops still counts the whole model. Default: cannot.
  virtual std::string pipeline_problem(int stages) const;
  // Expert parallelism (moe.h): "" when a mixture of experts' experts split over `size` ranks,
  // else why and the fix; set_expert_parallel splits them (units() then hold this rank's
  // E / size experts: their units' ParamSpec::ep_*). Default: a dense model, which refuses > 1.
  virtual std::string expert_parallel_problem(int size) const;
  virtual void set_expert_parallel(ExpertParallel ep);
  // Dropout (dropout.h: masks independent of the mesh), in every forward of a batch with
  // dropout_step >= 0: d.hidden after the embeddings and each block's attention and MLP
  // outputs, d.attention on the attention probabilities (refused unless the attention variant
  // drops_probabilities()). Default: refuses either > 0.
  virtual void set_dropout(const DropoutConfig& d);
  // Activation checkpointing (checkpoint.h): recompute whole blocks or their attention core in
  // backward instead of keeping their activations. Default: refuses any mode but none.
  // A mixture of experts' routing in its last forward, per layer (moe.h; a dense layer's
  // entry is empty); nullptr for a dense model.
  virtual const std::vector<MoeRouting>* moe_routing() const { return nullptr; }
  virtual void set_activation_checkpoint(const CheckpointConfig& c);
  // stage_layers: the cut given by hand (the pp_layers key: layers per stage); empty: balanced.
  virtual void set_pipeline(int pp, int v, int rank, const std::vector<std::int64_t>& stage_layers = {});
  virtual const PipelineCut& pipeline() const;  // pp = 1 when not cut
  // This rank's virtual stage `chunk` on micro-batch b (every stage gets the whole micro-batch;
  // the first embeds its ids, the others take `input`, the previous stage's output): the
  // activation for the next stage, of stage_activation_shape(b) and the compute dtype, or on
  // the last stage the micro-batch's training loss (the mean over its loss terms, as loss()).
  virtual torch::Tensor stage_forward(ParamProvider& p, int chunk, const Batch& b,
                                      const torch::Tensor& input);
  virtual std::vector<std::int64_t> stage_activation_shape(const Batch& b) const;
};

// Registry of presets by name ("gpt2-tiny", "gpt2", ..., "bert-large"); a name with a '/' is
// a local Hugging Face folder (hf_config.h), whose config.json gives the configuration.
std::unique_ptr<Model> make_model(const ModelConfig& c);  // its family's model of c
// The point's moe.* keys into a gpt2-moe model's configuration (moe_keys.cpp); a dense one is
// left as it is.
void apply_moe_keys(const Point& p, ModelConfig& c);
std::int64_t moe_trace_every(const Point& p);  // moe.trace_every: trace routing every N steps
std::unique_ptr<Model> make_model(const std::string& preset, const std::string& attention = "naive");
std::vector<std::string> preset_names();
std::int64_t count_params(const std::vector<UnitSpec>& units);
// The parameters one token meets: all of them less (E - top_k) / E of every MoE block's
// experts (moe.h); count_params for a dense model.
std::int64_t active_params(const ModelConfig& c, const std::vector<UnitSpec>& units);
// Task heads (parameters named cls.* or classifier.*, BERT's; distill.*, a distillation
// projection): not in the published counts, and initialised fresh when a checkpoint lacks them.
bool is_task_head(const std::string& param_name);
// Tables the model indexes rather than multiplies (GPT-2 wte/wpe, BERT *_embeddings; GPT-2's
// wte is also its tied LM head): quantizers hand them out as values, pruning leaves them.
bool is_embedding_table(const std::string& param_name);
// Parameters without task heads: the published figure
// (gpt2 124,439,808; bert-base 109,482,240).
std::int64_t count_backbone_params(const std::vector<UnitSpec>& units);
// The preset's (or folder's) configuration without building the model (unknown name: error
// listing all; a folder's unsupported config.json field: error naming it).
ModelConfig preset_config(const std::string& preset);
// "" when rows of `seq` tokens fit the positions of model `preset` (or `preset` is unknown: the
// name check reports that), else the message with the fix (train and infer, for key "seq").
std::string seq_problem(const std::string& preset, std::int64_t seq);

}  // namespace sb::models
