// The compression policy: which compressor (with its settings) each kind of collective uses.
// Chosen per run point by the key "compression" (set "compression"): the presets none,
// naive-int8, naive-topk, hybrid, hybrid-topk, uniform3d, hybrid3d, or custom (spelled out by
// the compress.{param,grad,allreduce,tp_act,tp_grad,pp_act,pp_grad}.* keys). See docs/COMPRESSION.md for the presets and why they are what they are.
#pragma once
#include <string>
#include <vector>

#include "harness/spec/point.h"
#include "workloads/comm/compressor.h"

namespace sb::comm {

struct Policy {
  std::string preset = "none";          // the "compression" value it came from
  CompressorConfig param_all_gather;    // FSDP parameter all-gather (sharded strategies)
  CompressorConfig grad_reduce_scatter; // FSDP gradient reduce-scatter (sharded strategies)
  CompressorConfig grad_all_reduce;     // no_shard all-reduce; hybrid_shard's cross-replica one
  CompressorConfig tp_act;              // tensor parallelism's forward all-reduces (mesh.tp)
  CompressorConfig tp_grad;             // and those of their gradients in backward
  CompressorConfig pp_act;              // pipeline stages' activations, point to point (mesh.pp)
  CompressorConfig pp_grad;             // and their gradients in backward

  const CompressorConfig& operator[](CollectiveKind k) const;
  CompressorConfig& operator[](CollectiveKind k);
  // Whether kind k's compressor changes what is sent (its record is not the identity).
  bool compresses(CollectiveKind k) const;
  bool any() const;
  // One line for logs and texts: "param=bf16 grad=topk(ratio=0.01,ef) allreduce=none".
  std::string describe() const;
};

// A preset by name (everything but "custom"); unknown names list the known ones.
Policy policy_preset(const std::string& name);
std::vector<std::string> policy_names();  // presets and "custom"
// Reads "compression" (and for custom the compress.* keys) and the key "seed" when present.
Policy policy_from_point(const sb::Point& p);
// The reasons `p` cannot run with its policy (empty: fine). The registered validator
// reports these; exposed for tests and for callers that build policies by hand.
// world: ranks of the point.
std::vector<std::string> policy_problems(const Policy& policy, int world);

}  // namespace sb::comm
