// Per-unit state of the FSDP engine (private to workloads/fsdp: engine.cpp, checkpoint.cpp).
// Shapes: P = the unit's parameter count, padded = P rounded up to a multiple of the
// sharding group size N, S = padded / N; opt_n = the elements this rank's optimizer updates.
#pragma once
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/autograd/function.h>  // Node (acc_node)
#include <torch/types.h>

#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/shard.h"

namespace sb::fsdp {

struct Engine::Unit {
  std::string key;  // "unit<u>": stable name for compression state
  FlatLayout flat;
  std::vector<std::vector<std::int64_t>> shapes;  // spec shapes, UnitSpec order
  std::vector<std::int64_t> split_sizes;          // flat.numels + [padding]
  ShardRange range;                               // this rank's slice of the padded buffer
  // The group the unit is sharded over and its data-parallel collectives run on: the engine's
  // shard group, or for a mixture of experts' experts (UnitSpec::expert) the ranks holding
  // the same experts (Collectives::set_expert_scope maps the strategy's groups to it).
  comm::Group group = comm::Group::Shard;
  bool expert = false;

  // fp32: (S) when params are sharded, else (padded) replica; master_n elements. Undefined
  // when the master is on disk (offload_master): OffloadStore::read_master reads it.
  torch::Tensor master;
  std::int64_t master_n = 0;
  // offload_master: the shard read for a gather (on an I/O thread), then the buffer the
  // all-gather reads, until it completes.
  std::future<torch::Tensor> reading;
  torch::Tensor stage;
  // The reduced gradient of the last step in the reduce dtype, as the reduction left it (no
  // fp32 copy: adamw_update widens as it reads): (S) when grads are sharded, else (padded);
  // undefined before the first step.
  torch::Tensor grad;
  torch::Tensor exp_avg, exp_avg_sq, decay;  // fp32 (opt_n)
  // fp32 (opt_n) 1 = element of a parameter split over tp (ParamSpec::tp); undefined at tp = 1.
  torch::Tensor tp_split;
  torch::Tensor mask;  // like master, 0/1 (Engine::set_masks); undefined = none
  std::int64_t opt_off = 0, opt_n = 0;       // the optimizer's slice of master / grad

  // (padded) in the param dtype: the leaf the model's views come from. Its storage is freed
  // between uses when params are sharded (W keeps its sizes; views stay valid and see the
  // memory again once re-materialized). W_raw: the same storage with its own version counter,
  // for writes that autograd must not see (gathers, refreshes).
  torch::Tensor W, W_raw;
  bool alias = false;     // W shares master's storage (replicated fp32): nothing to gather
  bool gathered = false;  // W's storage is materialized
  bool gather_pending = false;
  comm::Request gather_req;

  torch::Tensor acc;        // (padded) fp32 gradient of the non-final micro-steps
  torch::Tensor part;       // (padded) fp32 sum of this backward's gradient parts so far (a chunked block's)
  torch::Tensor red;        // reduction output in flight (reduce dtype)
  torch::Tensor inflight;   // the full gradient being reduced (reduce dtype)
  bool reduced = false;     // a reduction ran this step
  int uses = 0;             // acquires in the current forward
  bool pinned = false;      // acquired more than once per forward: keep until its backward
  // Pipeline parallelism (models/pipeline.h): the first stage's unit that the last stage holds
  // a copy of (pp_tied), or that copy (pp_copy): their gradients are summed each step.
  bool pp_tied = false, pp_copy = false;
  c10::intrusive_ptr<torch::autograd::Node> acc_node;  // W's AccumulateGrad, holding our hook
};

}  // namespace sb::fsdp
