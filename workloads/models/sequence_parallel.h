// DeepSpeed-Ulysses sequence parallelism as a model sees it (Jacobs et al. 2023; docs/FSDP.md
// "Sequence parallelism (Ulysses)"). Over mesh.sp ranks each sequence is split into sp equal
// contiguous slices: rank s holds tokens [s T/sp, (s+1) T/sp) of every row of its micro-batch
// (data::sequence_slice) everywhere outside attention; FPDT's chunked blocks take it in stripes
// (Model::sequence_stripe), each chunk's attention then seeing the chunks so far. Inside
// attention two all-to-alls trade the sequence split for a head split: after the first, rank s
// holds heads [s H/sp, (s+1) H/sp) of the whole sequence, so attention (causal or not, any
// variant) runs unchanged on the full T; the second trades back. Parameters are the same on every sp rank: their gradients are
// summed over dp_shard x sp (the Communicator's shard group; DeepSpeed's sequence-data-parallel
// group, torchtitan's dp_shard_cp). As with TensorParallel, the model keeps no communicator:
// the training workload hands it the all-to-all (workloads/parallel/sp_layers.h).
#pragma once
#include <functional>

#include <torch/types.h>

namespace sb::models {

struct SequenceParallel {
  int rank = 0, size = 1;
  // t: (size, ...) contiguous; block j goes to rank j and block j of the result came from rank
  // j. Its backward is the same all-to-all of the gradient.
  std::function<torch::Tensor(const torch::Tensor&)> all_to_all;
  bool on() const { return size > 1; }

  // qkv (B, T_l, 3, H, Dh) of this rank's T_l tokens -> (B, T_l size, 3, H / size, Dh): the
  // whole sequence's q, k and v for this rank's heads (one all-to-all for the three).
  torch::Tensor to_heads(const torch::Tensor& qkv) const;
  // a (B, T, Hs, Dh), this rank's heads over the whole sequence -> (B, T / size, Hs size, Dh):
  // every head for this rank's tokens.
  torch::Tensor to_sequence(const torch::Tensor& a) const;
};

// "" when `heads` (per tensor-parallel rank) and `seq` split over sp ranks, else why and the
// fix (plan and Model::set_sequence_parallel).
std::string sequence_parallel_problem(std::int64_t heads, std::int64_t seq, int sp);

}  // namespace sb::models
