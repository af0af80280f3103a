// Sharding strategies: one per file (strategy_<name>.cpp), chosen by name (name set
// "strategy"). A strategy says where state lives (its Layout) and how a unit's gradient is
// reduced; the engine (engine.cpp) does the mechanics common to all of them: flat buffers,
// gathering, autograd hooks, the sharded optimizer.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/communicator.h"
#include "workloads/comm/policy.h"
#include "workloads/fsdp/shard.h"

namespace sb::comm {
class CompressedCollectives;
struct CompressedOp;
}

namespace sb::fsdp {

struct Layout {
  bool params_sharded = false;         // fp32 master params are 1/N shards (else full replicas)
  bool grads_sharded = false;          // the reduced gradient kept for the optimizer is a shard
  bool optim_sharded = false;          // Adam moments (and the update) are per shard
  bool reshard_after_forward = false;  // free a unit's gathered params right after its forward
  comm::Group group = comm::Group::World;  // the group sharding runs over
};

// The collectives a strategy issues, with the point's compression policy applied:
// uncompressed kinds are the communicator's collectives, compressed ones its issue() of a
// CompressedCollectives description; both progress the same way (progress_engine.h).
class Collectives {
 public:
  Collectives(comm::Communicator& c, const comm::Policy& policy);
  ~Collectives();
  comm::Communicator& comm() { return comm_; }
  // full ((N*S), param dtype) <- the group's shards ((S), fp32 master) rounded to the param
  // dtype, through the policy's parameter compressor. Each shard is cast once, to the wire
  // dtype; a wire of the param dtype is received straight into full (no fp32 round trip).
  comm::Request all_gather_params(const torch::Tensor& shard, const torch::Tensor& full,
                                  comm::Group g);
  // The same, blocking on the caller: the communicator's synchronous call on this thread (no
  // request, no thread hop); shard must not overlap full.
  void all_gather_params_now(const torch::Tensor& shard, const torch::Tensor& full,
                             comm::Group g);
  bool compresses(comm::CollectiveKind k) const;
  // shard ((S)) <- sum over the group of full ((N*S)); key names the buffer (error feedback).
  comm::Request reduce_scatter_grads(const std::string& key, const torch::Tensor& full,
                                     const torch::Tensor& shard, comm::Group g);
  // t <- sum over the group of t, in place.
  comm::Request all_reduce_grads(const std::string& key, const torch::Tensor& t, comm::Group g);
  std::int64_t state_bytes() const;  // compression state (residuals), part of model state
  // Compression state for checkpoints (empty when nothing is compressed); call between steps.
  comm::StateDict compression_state() const;
  void load_compression_state(const comm::StateDict& s);

 private:
  comm::Request issue(comm::CompressedOp op, comm::Group g, const char* name,
                      comm::CollectiveKind k, bool sync);

  comm::Communicator& comm_;
  std::unique_ptr<comm::CompressedCollectives> cc_;  // null when nothing is compressed
  comm::Policy policy_;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual Layout layout() const = 0;
  // Starts summing unit gradient g ((padded), reduce dtype) over ranks into out: ((S) when
  // grads are sharded, else (padded)). Every request goes into `pending`.
  virtual void reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                           const torch::Tensor& out, std::vector<comm::Request>& pending) const = 0;
  // After the optimizer updated this rank's slice r of the full fp32 replica `master`
  // ((padded)); only strategies with replicated params and sharded optimizer act (zero1).
  virtual void after_update(Collectives& c, const torch::Tensor& master,
                            const ShardRange& r) const {}
};

using StrategyFactory = std::function<std::unique_ptr<Strategy>()>;
// Registers the factory and the name in the harness's "strategy" name set.
void register_strategy(const std::string& name, const std::string& doc, StrategyFactory f);
// Unknown name: sb::Error listing the known ones.
std::unique_ptr<Strategy> make_strategy(const std::string& name);
std::vector<std::string> strategy_names();
// Layout of a strategy without building an engine (memory formulas, validators).
Layout strategy_layout(const std::string& name);

}  // namespace sb::fsdp
