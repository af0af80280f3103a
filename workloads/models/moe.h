// Mixture-of-experts MLP (the MoE issue; docs/MODELS.md "GPT-2 MoE"): the MLP of every
// `every`-th GPT-2 block replaced by `experts` MLPs and a router. Top-1 routing is Switch's
// (Fedus et al. 2021: the output scaled by the chosen expert's router probability), top-2
// GShard's without its random second expert (Lepikhin et al. 2020: the two probabilities
// renormalized to sum to 1). A routing group is the tokens of one forward of one rank (its
// micro-batch, as DeepSpeed's); each expert takes at most
//   capacity = ceil(top_k x capacity_factor x tokens / experts)
// of the group's assignments (eval_capacity_factor without gradients; a factor <= 0: no
// limit), keeping those with the highest router probability for it (ties: the lower token
// index) and dropping the rest: a token none of whose assignments is kept passes through on
// the residual (its MLP output is 0). Losses added to the training loss, per MoE layer:
//   aux = aux_loss_coef x E x sum_e f_e P_e  (Switch's load balancing; f_e the share of the
//         group's tokens whose first choice is e, P_e the mean router probability of e)
//   z   = z_loss_coef x mean_tokens logsumexp(router logits)^2  (ST-MoE's router z-loss)
// The router runs in fp32; the experts in the compute dtype.
//
// Expert parallelism (ExpertParallel below; docs/FSDP.md "Expert parallelism"): over mesh.ep
// ranks each holds experts [r E/ep, (r+1) E/ep) and routes its own tokens (its routing group,
// as above); the kept assignments go to their experts' ranks in one all-to-all of (E, C, d)
// slots (C the most any expert keeps on any rank of the group, the rest zero rows), each rank
// runs its experts on what it received, and a second all-to-all returns the outputs to their
// tokens' ranks, where the gates weight them (DeepSpeed-MoE's and GShard's dispatch/combine).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::models {

struct MoeConfig {
  std::int64_t experts = 0;  // 0: a dense model
  std::int64_t every = 2;    // block l is an MoE block when l % every == every - 1
  std::int64_t top_k = 1;
  double capacity_factor = 1.25, eval_capacity_factor = 2.0;
  double aux_loss_coef = 0.01, z_loss_coef = 0.001;
  // The routing groups of one forward's (B, T) tokens: 1, all of them; g > 1, the g column
  // slices of the rows (slice s: columns [s T/g, (s+1) T/g) of every row), each routed with its
  // own capacity and its aux and z losses averaged over the slices. Ulysses' routing groups
  // (each sp rank routes its slice of every row) in one process: the reference the sp run is
  // checked against (tests/mpi/moe_ep.cpp). The sp run weights each rank's aux and z losses
  // by its share of the loss's counted targets, so the two agree where every slice counts as
  // many targets (no -100 targets, as in that test). Not a key: a run's groups follow its mesh.
  std::int64_t sequence_groups = 1;
  bool on() const { return experts > 0; }
  bool layer(std::int64_t l) const { return on() && l % every == every - 1; }
  std::int64_t layers(std::int64_t n_layer) const { return on() ? n_layer / every : 0; }
  // The assignments one expert takes from a group of `tokens` (no limit: tokens x top_k).
  std::int64_t capacity(std::int64_t tokens, bool training) const;
};

// What one MoE layer did to one group (no gradients).
struct MoeRouting {
  torch::Tensor choice;  // (N, top_k) int64: each token's experts, first choice first
  torch::Tensor kept;    // (N, top_k) bool: whether that assignment was processed
  std::vector<std::int64_t> load;  // per expert: assignments kept
  std::int64_t dropped_assignments = 0;
  std::int64_t dropped_tokens = 0;  // tokens with no kept assignment (passed through)
  // Expert parallelism: this layer's forward dispatch and combine on this rank (the bytes that
  // leave it, and wall seconds including the slot count's max all-reduce); 0 without ep.
  std::int64_t a2a_bytes = 0;
  double a2a_s = 0;
  // ... and the backward's two all-to-alls of this layer's gradients (ep_grad) on this rank,
  // seconds, added as backward runs them (null without ep).
  std::shared_ptr<double> a2a_backward_s;
};

struct MoeOutput {
  torch::Tensor y;    // (N, d) the experts' gated sum (0 for a dropped token)
  torch::Tensor aux;  // () aux_loss_coef x the load-balancing loss (fp32)
  torch::Tensor z;    // () z_loss_coef x the router z-loss (fp32)
  MoeRouting routing;
};

// Expert parallelism as a model sees it; the training workload hands it the group's
// collectives (workloads/parallel/ep_layers.h), the model keeps no communicator.
struct ExpertParallel {
  int rank = 0, size = 1;
  // t: (size, ...) contiguous; block j goes to rank j and block j of the result came from rank
  // j; its backward is the same all-to-all of the gradient, whose seconds it adds to
  // *backward_s (null: not counted). dispatch: tokens to experts (else outputs back), which
  // the trace names.
  std::function<torch::Tensor(const torch::Tensor&, bool dispatch, const std::shared_ptr<double>& backward_s)> all_to_all;
  std::function<std::int64_t(std::int64_t)> max;  // the group's largest of a count
  // Inference's exchanges (ep_inference.h), without autograd: `exchange` the same all-to-all
  // of (size, ...) blocks, `gather` every rank's t (one shape on all) stacked as (size, ...);
  // kind names the trace event.
  std::function<torch::Tensor(const torch::Tensor&, const char* kind)> exchange;
  std::function<torch::Tensor(const torch::Tensor&, const char* kind)> gather;
  // ExFlow's placement at inference (ep_inference.h): per MoE layer in order, each expert's
  // rank, experts / size on each; empty: rank r holds experts [r E/size, (r+1) E/size). The
  // experts units then hold each rank's experts in increasing order (place_experts).
  std::vector<std::vector<std::int64_t>> placement;
  bool on() const { return size > 1; }
};

// x (N, d) through router (E, d) and experts fc (E, f, d), fc_b (E, f), proj (E, d, f),
// proj_b (E, d) with tanh-GELU between, as one routing group. With ep on, the experts' tensors
// are this rank's E / ep of them (moe.h's header) and every rank of ep's group must call.
MoeOutput moe_mlp(const MoeConfig& c, const torch::Tensor& x, const torch::Tensor& router,
                  const torch::Tensor& fc, const torch::Tensor& fc_b, const torch::Tensor& proj,
                  const torch::Tensor& proj_b, bool training, const ExpertParallel* ep = nullptr);

// The choice and keep decision alone: from router probabilities (N, E) fp32.
MoeRouting moe_route(const MoeConfig& c, const torch::Tensor& probs, bool training);

// "" when `experts` split over `ep` ranks, else why and the fix.
std::string expert_parallel_problem(const MoeConfig& c, int ep);

}  // namespace sb::models
