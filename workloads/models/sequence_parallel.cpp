// Ulysses' layout changes around the all-to-all (sequence_parallel.h). Pure tensor
// arithmetic: the all-to-all moves block j of dim 0 to rank j, so each side arranges the
// blocks (permute + contiguous) and reads them back in rank order, which is sequence order.
#include "workloads/models/sequence_parallel.h"

#include <fmt/format.h>

#include "harness/core/check.h"

namespace sb::models {

torch::Tensor SequenceParallel::to_heads(const torch::Tensor& qkv) const {
  const std::int64_t B = qkv.size(0), Tl = qkv.size(1), H = qkv.size(3), Dh = qkv.size(4);
  SB_CHECK(H % size == 0, "sequence parallelism splits {} heads over mesh.sp = {}", H, size);
  const std::int64_t Hs = H / size;
  // Block j: heads [j Hs, (j+1) Hs) of this rank's tokens.
  auto send = qkv.view({B, Tl, 3, size, Hs, Dh}).permute({3, 0, 1, 2, 4, 5}).contiguous();
  auto got = all_to_all(send);  // block j: rank j's tokens, this rank's heads
  return got.permute({1, 0, 2, 3, 4, 5}).reshape({B, size * Tl, 3, Hs, Dh});
}

torch::Tensor SequenceParallel::to_sequence(const torch::Tensor& a) const {
  const std::int64_t B = a.size(0), T = a.size(1), Hs = a.size(2), Dh = a.size(3);
  SB_CHECK(T % size == 0, "sequence parallelism: {} tokens over mesh.sp = {}", T, size);
  const std::int64_t Tl = T / size;
  // Block j: rank j's tokens of this rank's heads.
  auto send = a.view({B, size, Tl, Hs, Dh}).transpose(0, 1).contiguous();
  auto got = all_to_all(send);  // block j: rank j's heads of this rank's tokens
  return got.permute({1, 2, 0, 3, 4}).reshape({B, Tl, size * Hs, Dh});
}

std::string sequence_parallel_problem(std::int64_t heads, std::int64_t seq, int sp) {
  if (sp <= 1) return "";
  if (heads % sp != 0)
    return fmt::format("Ulysses sequence parallelism gives each of mesh.sp = {} ranks a share of "
                       "the {} attention heads (per tensor-parallel rank): they must divide by sp; "
                       "choose an sp that divides them", sp, heads);
  if (seq > 0 && seq % sp != 0)
    return fmt::format("sequence parallelism splits each sequence of seq = {} tokens into mesh.sp "
                       "= {} equal slices: seq must divide by sp; change seq or mesh.sp", seq, sp);
  return "";
}

}  // namespace sb::models
