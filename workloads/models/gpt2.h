// GPT-2 as published (Radford et al. 2019; Hugging Face GPT2LMHeadModel): learned position
// embeddings, pre-LayerNorm blocks, tanh-GELU MLP of width 4d, LM head tied to wte, LayerNorm
// eps 1e-5. Dropout (set_dropout, default off) on the embeddings' sum and each block's
// attention and MLP outputs, with masks independent of the mesh (dropout.h); no dropout on
// the attention probabilities yet.
// Units: 0 "embed" (wte, wpe), 1..L "block.i", L+1 "head" (ln_f; re-acquires unit 0 for wte).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "workloads/models/attention.h"
#include "workloads/models/dropout.h"
#include "workloads/models/ep_inference.h"
#include "workloads/models/kv_decoder.h"
#include "workloads/models/model.h"
#include "workloads/models/stage_provider.h"

namespace sb::models {

class Gpt2 final : public Model, public KvDecoder, public EpInferer {
 public:
  explicit Gpt2(ModelConfig cfg);
  const ModelConfig& config() const override { return cfg_; }
  const std::vector<UnitSpec>& units() const override { return units_; }
  torch::Tensor loss_with(ParamProvider& p, const Batch& b, const LossCombiner& c) override;
  torch::Tensor logits(ParamProvider& p, const Batch& b) override;  // (B, T, V)
  TrainFlops train_flops(const Batch& b) const override;
  // Megatron's layout (tensor_parallel.h): heads of QKV and of attn.c_proj's input, columns of
  // mlp.c_fc and rows of mlp.c_proj, a vocabulary range of wte (embedding and tied LM head,
  // whose loss is tp.cross_entropy). Training's loss only: logits, decoding and the
  // distillation combiner refuse a sharded model.
  std::string tensor_parallel_problem(int size) const override;
  void set_tensor_parallel(TensorParallel tp) override;
  // Pipeline stages (pipeline.h) balanced by the weights' FLOPs per row, the tied LM head
  // (V x d) counted on the last stage, which holds a copy of the embedding unit for it.
  std::string pipeline_problem(int stages) const override;
  // Ulysses (sequence_parallel.h): q, k and v traded for whole-sequence heads around attention;
  // training's loss only, as tensor parallelism (and not with Megatron's tp_sequence_parallel).
  std::string sequence_parallel_problem(int size, std::int64_t seq, int tp_size = 1) const override;
  void set_sequence_parallel(SequenceParallel sp) override;
  std::int64_t sequence_stripe(std::int64_t seq) const override;
  // Expert parallelism (moe.h): the gpt2-moe family alone, without tp, sp or pp.
  std::string expert_parallel_problem(int size) const override;
  void set_expert_parallel(ExpertParallel ep) override;
  // Expert-parallel inference of this rank's sequences ids (B, T), top-1 routing, in one of
  // ExFlow's two forms (ep_inference.h); every rank of the ep group calls with the same B
  // and T. Runs without gradients.
  EpInference ep_inference(ParamProvider& p, const torch::Tensor& ids, EpForm form) override;
  void serve_expert_parallel(EpForm form) override;
  std::vector<EpLayerStats> take_ep_serve_stats(std::int64_t* steps) override;
  void set_dropout(const DropoutConfig& d) override;
  void set_activation_checkpoint(const CheckpointConfig& c) override;
  // The gpt2-moe family: each MoE layer's routing in the last forward (empty for a dense
  // layer or model).
  const std::vector<MoeRouting>& routing() const { return routing_; }
  const std::vector<MoeRouting>* moe_routing() const override { return cfg_.moe.on() ? &routing_ : nullptr; }
  void set_pipeline(int pp, int v, int rank, const std::vector<std::int64_t>& stage_layers = {}) override;
  const PipelineCut& pipeline() const override { return pp_.cut; }
  torch::Tensor stage_forward(ParamProvider& p, int chunk, const Batch& b,
                              const torch::Tensor& input) override;
  std::vector<std::int64_t> stage_activation_shape(const Batch& b) const override;

  // Empty cache for batch B and up to max_len tokens (<= max_pos), dtype/device of the weights.
  KVCache make_cache(std::int64_t batch, std::int64_t max_len,
                     torch::TensorOptions opts = torch::kFloat32) const override;
  KvDecoder* kv_decoder() override { return this; }
  // ids: (B, t) new tokens after cache.length cached ones -> logits (B, t, V); appends the
  // new keys/values to the cache. Run under torch::NoGradGuard.
  torch::Tensor forward_cached(ParamProvider& p, const torch::Tensor& ids, KVCache& cache);

 // Serving (workloads/serve): rows [first_row, first_row + B) of a cache of many rows, each
  // with its own length. ids (B, T): row b's new tokens, at positions past[b] .. past[b]+T-1
  // (right padding past a row's real tokens is allowed: causal attention keeps real tokens
  // from seeing it, and later tokens overwrite its keys). Either a prefill (every past[b] is
  // 0) or a decode step (T == 1). Returns the logits (B, V) at each row's position last[b]
  // of the T new ones: the LM head runs on those rows only. Run under torch::NoGradGuard.
  torch::Tensor forward_rows(ParamProvider& p, const torch::Tensor& ids, KVCache& cache,
                             std::int64_t first_row, const std::vector<std::int64_t>& past,
                             const std::vector<std::int64_t>& last) override;

 private:
  // ids (B, T) -> logits (B*T, V); cache may be null (full causal forward).
  // hidden (optional) receives the last block's output (B*T, d).
  torch::Tensor forward(ParamProvider& p, const torch::Tensor& ids, KVCache* cache,
                        bool release_head_with_logits, torch::Tensor* hidden = nullptr);
  // The pieces forward and forward_rows share. kv (may be empty) turns a layer's new keys and
  // values (B, H, T, Dh) into the ones its queries attend to (a cache's).
  using KeysValues = std::function<std::pair<torch::Tensor, torch::Tensor>(
      std::int64_t layer, const torch::Tensor& k, const torch::Tensor& v)>;
  torch::Tensor embed(ParamProvider& p, const torch::Tensor& ids, const torch::Tensor& pos);
  // Layers [first, last) (-1: to the end).
  torch::Tensor blocks(ParamProvider& p, torch::Tensor x, std::int64_t B, std::int64_t T,
                       const KeysValues& kv, const AttentionMask& mask, std::int64_t first = 0,
                       std::int64_t last = -1);
  // Block l as FPDT's pipeline runs it (activation_checkpoint = "chunked", checkpoint.h): on
  // seq_chunks chunks of the B sequences of T, masks and dropout per chunk.
  ChunkedBlock in_chunks(ParamProvider& p, std::int64_t l, std::int64_t B, std::int64_t T, const AttentionMask& m,
                         const DropoutRows& rows);
  // Block l on x (no release): its attention masked by m, its residual dropout by rows.
  torch::Tensor block(ParamProvider& p, std::int64_t l, const torch::Tensor& x, std::int64_t B,
                      std::int64_t T, const KeysValues& kv, const AttentionMask& m,
                      const DropoutRows& rows);
  // The training loss from the last block's output (rows, d): ln_f, the tied LM head and the
  // cross-entropy (vocabulary-parallel under tp); releases the head and embedding units.
  torch::Tensor lm_loss(ParamProvider& p, const torch::Tensor& x, const torch::Tensor& targets);
  torch::Tensor head(ParamProvider& p, torch::Tensor x, bool release_head_with_logits);
  // Embeddings and blocks (the KV cache's when given): (B*T, d) before the final LayerNorm.
  // positions: ids' columns' positions without a cache (a sequence slice's, Batch::positions);
  // undefined: 0..T-1.
  torch::Tensor trunk(ParamProvider& p, const torch::Tensor& ids, KVCache* cache,
                      const torch::Tensor& positions = {});
  torch::Tensor final_norm(ParamProvider& p, const torch::Tensor& x);  // ln_f
  std::vector<UnitSpec> make_units(int tp_rank, int tp_size) const;
  void check_whole(const char* what) const;  // refuses a tensor- or sequence-parallel model
  // x (rows, d) through a linear whose weight is split over tp as a row-parallel one: the
  // partial products summed over tp, then the (replicated) bias; plain linear at tp = 1.
  torch::Tensor row_linear(ParamProvider& p, int u, int w_index, const torch::Tensor& x,
                           const torch::Tensor& w, const torch::Tensor& b);
  // An MoE block's MLP (moe.h): the experts' output; the aux and z losses of a forward with
  // gradients summed into moe_loss_, each layer's routing kept in routing_.
  // h: (B T, d) of rows of T tokens (this sp rank's slice of each row under Ulysses).
  torch::Tensor moe(ParamProvider& p, std::int64_t l, const torch::Tensor& h, const std::vector<torch::Tensor>& w,
                    std::int64_t T);
  int experts_unit(std::int64_t l) const;  // MoE layer l's experts (after the head)
  // ep_inference's pieces (gpt2_ep_inference.cpp): attention for the held tokens' rows
  // (n, 3 d) of QKV, at home (B whole sequences in order) or scattered (coherent form);
  // one MoE layer's routing, experts and return.
  torch::Tensor ep_attention_home(const torch::Tensor& qkv, std::int64_t B, std::int64_t T, ParamProvider& p);
  torch::Tensor ep_attention_scattered(const TokenRows& held, const torch::Tensor& qkv, std::int64_t T,
                                       ParamProvider& p);
  TokenRows ep_moe_layer(ParamProvider& p, std::int64_t l, TokenRows held, const std::vector<torch::Tensor>& w,
                         std::int64_t BT, EpForm form, EpLayerStats& stats);
  // The refusals of ep inference and serving (`what`): a whole model split over mesh.ep, top-1
  // for the coherent form.
  void check_ep_form(const char* what, EpForm form) const;
  // One block of ep inference and serving on the held tokens, on row blocks of ep_block_: its
  // attention from `attention` (block l's held rows and their QKV -> (n, A)), then the MoE layer
  // (its stats appended to `layers`) or the dense MLP.
  using EpAttention = std::function<torch::Tensor(std::int64_t l, const TokenRows& held, const torch::Tensor& qkv)>;
  TokenRows ep_block(ParamProvider& p, std::int64_t l, TokenRows held, std::int64_t BT, EpForm form,
                     const EpAttention& attention, std::vector<EpLayerStats>& layers);
  // forward_rows under serve_expert_parallel (gpt2_ep_serve.cpp): this rank's share of the
  // step's rows, the replicated cache written from the all-gathered keys and values.
  torch::Tensor ep_forward_rows(ParamProvider& p, const torch::Tensor& ids, KVCache& cache, std::int64_t first_row,
                                const std::vector<std::int64_t>& past, const std::vector<std::int64_t>& last);
  // Attention of the held tokens (ids b T + t of the step's rows) against rows first_row + b
  // of the cache's layer l: prefill causal, decode each row's keys up to past[b].
  torch::Tensor ep_cached_attention(ParamProvider& p, const TokenRows& held, const torch::Tensor& q, KVCache& cache,
                                    std::int64_t l, std::int64_t first_row, std::int64_t T, const torch::Tensor& past,
                                    bool prefill);
  std::optional<EpForm> ep_serve_;        // set: forward_rows is ep_forward_rows
  std::int64_t ep_block_ = kRowBlock;     // the row blocks of the ep forward running
  std::vector<EpLayerStats> ep_serve_sum_;
  std::int64_t ep_serve_steps_ = 0;
  ModelConfig cfg_;
  torch::Tensor moe_loss_;
  std::vector<MoeRouting> routing_;
  std::vector<UnitSpec> units_;
  std::vector<UnitSpec> whole_units_;  // the unsharded model's (FLOPs count these)
  TensorParallel tp_;
  SequenceParallel sp_;
  ExpertParallel ep_;  // moe.h; the experts' units hold this rank's
  Pipelined pp_;
  std::unique_ptr<Attention> attn_;
  ModelDropout dropout_;  // dropout.h: the configuration and the current forward's masks
  CheckpointConfig ac_;   // checkpoint.h: activation checkpointing
  StageProviders stages_;  // stage_forward's providers (stage_provider.h)
};

// Decoding: greedy when temperature == 0, else sampling from softmax(logits / temperature)
// restricted to the top_k largest (0 = all), from a generator seeded with `seed`.
struct GenerateConfig {
  std::int64_t max_new_tokens = 32;
  double temperature = 0.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
};
struct GenerateResult {
  torch::Tensor tokens;               // (B, prompt + new) int64
  double time_to_first_token_s = 0;   // prompt forward + first token choice
  std::vector<double> per_token_s;    // each later token's latency
};
GenerateResult generate(Gpt2& model, ParamProvider& p, const torch::Tensor& prompt,
                        const GenerateConfig& cfg);

}  // namespace sb::models
