// Expert-parallel inference in ExFlow's two forms (Yao et al. 2024; docs/FSDP.md "Expert-
// parallel inference"), over the ep group of ExpertParallel (moe.h). Each rank starts with
// its own sequences (its routing group, as in training) and every rank holds the whole
// non-expert model and its E / ep experts.
//   dispatch_combine: the usual form, top-1 or top-2. Per MoE layer each of a token's top_k
//     assignments goes to its expert's rank ("ep_dispatch") and the kept ones' outputs come
//     back to the token's rank ("ep_combine"), where they are weighted and added to the
//     residual: two all-to-alls, and attention runs where the sequence lives.
//   coherent: ExFlow's context-coherent form, top-1 only (top-2's two outputs live on two
//     ranks, so they must meet somewhere: the two-all-to-all form). A token stays on the rank of the expert that
//     processed it, so each MoE layer is one all-to-all ("ep_route") straight to the next
//     layer's expert, and an affinity-aware placement (moe-place) keeps most tokens where
//     they are. Attention still needs each sequence's context: every rank holds every
//     sequence's keys and values (the context is replicated, "coherent"), so after a layer's
//     QKV each rank all-gathers the keys and values of the tokens it holds ("ep_context"),
//     and computes attention for its own tokens' queries against them. After the last block
//     one more all-to-all ("ep_home") takes each token's hidden state home for the LM head.
// Both forms compute each token's rows with the same kernels on blocks of the same shape
// (row_blocks below), so their logits are bitwise equal; tokens over an expert's capacity are
// chosen where the expert runs, from its arrivals of each routing group, by the training
// form's rule (moe.h), so both also equal the ordinary forward's routing.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/models/model.h"
#include "workloads/models/moe.h"

namespace sb {
class Point;
}

namespace sb::models {

enum class EpForm { DispatchCombine, Coherent };
const char* ep_form_name(EpForm f);
// The infer task's keys moe.ep_form and moe.expert_placement ("" = contiguous; moe_keys.cpp).
std::string moe_ep_form(const Point& p);
std::string moe_expert_placement(const Point& p);
// "dispatch_combine" or "coherent"; anything else is refused naming both.
EpForm parse_ep_form(const std::string& s);

// One MoE layer's traffic and routing on this rank.
struct EpLayerStats {
  std::int64_t layer = 0;
  std::int64_t tokens = 0;       // assignments this rank routed: top_k per token it held
  std::int64_t cross_rank = 0;   // of those, sent to another rank's expert
  std::int64_t received = 0;     // tokens that arrived for this rank's experts
  std::int64_t dropped = 0;      // of those, over their expert's capacity (passed through)
  std::int64_t returned = 0;     // dispatch_combine: kept outputs sent back to another rank
  torch::Tensor routed;          // (tokens, 2) int64: each assignment's token id and expert
  std::int64_t a2a_bytes = 0;    // bytes that left this rank in the all-to-alls, padding included
  double a2a_s = 0;              // wall time in the layer's all-to-alls (and their max count)
  // Sums the counts and seconds of another forward of the same layer (routed is not summed).
  EpLayerStats& operator+=(const EpLayerStats& o) {
    layer = o.layer, tokens += o.tokens, cross_rank += o.cross_rank, received += o.received;
    dropped += o.dropped, returned += o.returned, a2a_bytes += o.a2a_bytes, a2a_s += o.a2a_s;
    return *this;
  }
};

struct EpInference {
  torch::Tensor logits;  // (B, T, V): this rank's sequences
  std::vector<EpLayerStats> layers;
};

// A model that infers under expert parallelism (gpt2-moe's Gpt2): callers ask for this
// interface, not for a family.
class EpInferer {
 public:
  virtual ~EpInferer() = default;
  // This rank's sequences ids (B, T), every rank of the ep group the same B and T; runs
  // without gradients.
  virtual EpInference ep_inference(ParamProvider& p, const torch::Tensor& ids, EpForm form) = 0;
  // Serving under ep (serve's KV-cached prefill and decode, KvDecoder::forward_rows): every
  // rank of the ep group is called with the whole step (serve's leader broadcasts it) and
  // computes its share of the step's rows, [r S, (r+1) S) with S = ceil(B / ep), their MoE
  // layers in `form`. The KV cache is replicated: every rank holds every row, because the
  // server compacts rows between steps (a row's share moves) and, in the coherent form, a
  // token's attention runs on its expert's rank. So each block's new keys and values are
  // all-gathered ("ep_context": in decoding one token a row) and written to every rank's
  // cache, and the rows' logits are all-gathered ("ep_logits") so that every rank returns
  // the step's (B, V). Each token's rows pass the same row-blocked kernels as ep_inference,
  // so the two forms return bitwise equal logits; against one process they differ only
  // where a routing group's capacity drops tokens (a group is a rank's share of the step).
  virtual void serve_expert_parallel(EpForm form) = 0;
  // The MoE layers' traffic and routing of the steps since the last call (summed per layer),
  // and how many steps: serve's per-layer series.
  virtual std::vector<EpLayerStats> take_ep_serve_stats(std::int64_t* steps) = 0;
};

// Whole-model weights (units as before set_expert_parallel) cut to this rank's `units` (after
// it): each experts unit reordered by its MoE layer's placement (place_experts; none: as is)
// and sliced (ep_slice); the other units as they are.
std::vector<std::vector<torch::Tensor>> ep_rank_weights(const std::vector<UnitSpec>& units,
                                                        std::vector<std::vector<torch::Tensor>> whole,
                                                        const std::vector<std::vector<std::int64_t>>& placement,
                                                        int ep);

// Token rows moving between ep ranks: hidden states x (n, w) of any dtype, each token's
// global id (home rank x B T + b T + t), its expert at the layer being routed and that
// expert's gate (fp64: exact for any router dtype). Sorted by id wherever a function below returns them.
struct TokenRows {
  torch::Tensor x, id, expert, gate;
  std::int64_t size() const { return id.size(0); }
  TokenRows select(const torch::Tensor& index) const;
};

// Rows i to rank dest[i] of the group: one all-to-all of (ep, M, row bytes) uint8 blocks,
// M the most rows any rank sends another rank (one max all-reduce; padding rows carry id -1);
// the rows a rank keeps never enter it. Returns the rows this rank received and kept, sorted
// by id; stats (if given) add the bytes that left this rank ((ep - 1) M row bytes) and time.
TokenRows exchange_rows(const ExpertParallel& ep, const TokenRows& rows, const torch::Tensor& dest,
                        const char* kind, EpLayerStats* stats = nullptr);
// Every rank's rows, sorted by id: one all-gather padded the same way.
TokenRows gather_rows(const ExpertParallel& ep, const TokenRows& rows, const char* kind);

// f over x's rows in blocks of `block` rows (the last padded with zeros): each row's result
// comes from a call of one shape whichever rows share its block, so a token's value does not
// depend on which rank computes it or with whom (GEMM libraries pick kernels, and split the
// reduction, by the number of rows).
constexpr std::int64_t kRowBlock = 64;
torch::Tensor row_blocks(const std::function<torch::Tensor(const torch::Tensor&)>& f, const torch::Tensor& x,
                         std::int64_t block = kRowBlock);

// Placement (ExpertParallel::placement): expert e's rank at MoE layer m (the m-th MoE layer),
// as an (E) int64 tensor; the experts rank r holds there, increasing.
torch::Tensor expert_ranks(const ExpertParallel& ep, std::size_t m, std::int64_t experts);
std::vector<std::int64_t> local_experts(const ExpertParallel& ep, std::size_t m, std::int64_t experts, int r);
// "" when `placement` has `layers` entries of `experts` ranks in [0, ep), experts / ep on each
// rank; else what is wrong, naming the layer.
std::string placement_problem(const std::vector<std::vector<std::int64_t>>& placement, std::int64_t layers,
                              std::int64_t experts, int ep);
// The placement file `shardbench moe-place` writes (analysis/exflow.py place: "model",
// "experts", "ep", and "placement": {block: [rank of each expert]}): per MoE block of the
// model, in order, each expert's rank. Throws naming the file and the field when it cannot be
// read, or was made for another model, number of experts or ep.
std::vector<std::vector<std::int64_t>> read_placement(const std::string& file, const std::string& model,
                                                      const MoeConfig& moe, std::int64_t n_layer, int ep);
// A stacked experts tensor (E, ...) reordered so that each rank's contiguous block of E / ep
// (what ep_slice takes) holds the experts `ranks` places on it, in increasing order.
torch::Tensor place_experts(const torch::Tensor& full, const std::vector<std::int64_t>& ranks, int ep);

// Capacity at the expert: of `arrived` (assignments sorted by id, one expert each; with top_k
// = k a token's j-th assignment has id token id x k + j), which are kept. Per (routing group
// = id / (group_tokens k), expert) at most c.capacity(group_tokens, false), the highest gates
// (router probabilities) first, ties to the lower id (moe_route's rule).
torch::Tensor keep_at_expert(const MoeConfig& c, const TokenRows& arrived, std::int64_t group_tokens,
                             std::int64_t k = 1);

}  // namespace sb::models
