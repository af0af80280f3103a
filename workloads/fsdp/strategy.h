// Sharding strategies: one per file (strategy_<name>.cpp), registered by name (name set
// "strategy") with a record of what the strategy does (StrategyInfo): where a unit's state
// lives (its Layout) and which collectives run per unit and step, in which phase, over which
// mesh dimension and with how many elements. Callers ask the record, never the name: the
// memory model (memory_model.h), the wire bytes of a step (wire_model.h), the compression
// policy's validation and the engine's choices all derive from it. The engine (engine.cpp)
// does the mechanics common to all strategies: flat buffers, gathering, autograd hooks, the
// sharded optimizer; a strategy's class issues its own gradient and after-step collectives.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/core/registry.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/policy.h"
#include "workloads/fsdp/shard.h"

namespace sb::comm {
class CompressedCollectives;
struct CompressedOp;
}

namespace sb::fsdp {

struct Layout {
  bool params_sharded = false;         // fp32 master params are 1/dp_shard shards (else replicas)
  bool grads_sharded = false;          // the reduced gradient kept for the optimizer is a shard
  bool optim_sharded = false;          // Adam moments (and the update) are per shard
  bool reshard_after_forward = false;  // free a unit's gathered params right after its forward
  // A unit is padded to a multiple of dp_shard (and cut into shards) when anything is sharded.
  bool sharded() const { return params_sharded || optim_sharded; }
};

// The data-parallel dimensions of the process mesh (the Mesh issue's names; world =
// dp_replicate x dp_shard): dp_shard, the ranks that shard a unit's state among themselves;
// dp_replicate, ranks that hold the same shard (hybrid_shard's replicas); dp, both (every
// data-parallel rank).
enum class MeshDim { dp_shard, dp_replicate, dp };
const char* dim_name(MeshDim d);  // "dp_shard", "dp_replicate", "dp"

// The sizes of the data-parallel dimensions of a run.
struct DpMesh {
  int dp_shard = 1, dp_replicate = 1;
  int size(MeshDim d) const;
};

enum class StepPhase {
  forward,          // before a unit's forward (the engine's parameter all-gather)
  backward,         // during backward: re-gathers, and gradient reductions as they come
  after_optimizer,  // after the optimizer updated this rank's slice (Strategy::after_update)
};
const char* phase_name(StepPhase p);

// The elements a collective moves, as its full buffer (all-gather output, reduce-scatter
// input, all-reduce buffer): the unit's flat buffer (padded to a multiple of dp_shard when the
// layout shards anything) or this rank's shard of it (1/dp_shard).
enum class Extent { unit, shard };

// What a collective carries: parameters in the compute dtype, the fp32 master replica, or
// gradients in the reduce dtype.
enum class Payload { params, master, grads };

// One collective a strategy issues once per unit and step. Exceptions: a backward re-gather is
// skipped for a unit the model acquires more than once per forward (a tied embedding), which
// the engine keeps gathered from its forward to its backward; a collective marked
// skipped_on_one_rank is not issued when its dimension has one rank (hybrid_shard's replica
// all-reduce with a single shard group). Over one rank a collective moves nothing, but one
// that is issued still keeps its compression state.
struct CollectiveUse {
  comm::CollectiveKind kind;
  StepPhase phase;
  MeshDim over;
  Extent elements;
  Payload payload;
  bool skipped_on_one_rank = false;
};

// The parts the sharding records share: everything sharded (ZeRO-2 and -3, and hybrid_shard,
// which differ only in reshard_after_forward and the replicas' all-reduce), and each unit's
// gradient reduce-scattered over dp_shard as backward produces it.
inline Layout fully_sharded(bool reshard_after_forward) {
  return {.params_sharded = true, .grads_sharded = true, .optim_sharded = true,
          .reshard_after_forward = reshard_after_forward};
}
inline CollectiveUse grad_reduce_scatter() {
  return {comm::CollectiveKind::GradReduceScatter, StepPhase::backward, MeshDim::dp_shard,
          Extent::unit, Payload::grads};
}

class Strategy;
using StrategyFactory = std::function<std::unique_ptr<Strategy>()>;

// The record a strategy registers.
struct StrategyInfo {
  Layout layout;
  // Per unit and step, in issue order. At registration a strategy lists what its own class
  // issues (backward gradient reductions, after-optimizer gathers); register_strategy puts in
  // front the parameter all-gathers the engine issues for the layout (forward, and backward
  // again when it reshards after forward).
  std::vector<CollectiveUse> collectives;
  // The strategy's class, for what its record cannot say (zero1's after-optimizer gather);
  // unset: the record's backward collectives run as Strategy's default reduce_grad does.
  StrategyFactory make;

  bool issues(comm::CollectiveKind k) const;  // any collective of that kind
  bool uses(MeshDim d) const;                 // any collective over d
  bool has_phase(StepPhase p) const;
  // The mesh on `world` ranks: a strategy with a collective over dp_replicate runs with
  // dp_shard = shard_group (hybrid sharding); every other one shards over the whole world.
  DpMesh mesh(int world, int shard_group) const;
  // The communicator group of d under this strategy's mesh: dp = world, dp_replicate =
  // replica, dp_shard = shard where there are replicas, else the world.
  comm::Group group(MeshDim d) const;
  // The same on c's mesh: the world is every data-parallel rank only when tp, pp and sp are 1;
  // otherwise a strategy without replicas (whose dp_shard is then every data-parallel rank)
  // runs over the shard group, so tensor-parallel ranks never reduce each other's blocks.
  comm::Group group(MeshDim d, const comm::Communicator& c) const;
  // The factor a unit's flat buffer is padded to: dp_shard when the layout shards anything.
  int shard_factor(const DpMesh& m) const { return layout.sharded() ? m.dp_shard : 1; }
  // Elements of a collective on a unit whose shard range (over shard_factor) is r.
  static std::int64_t elements(const CollectiveUse& c, const ShardRange& r);
};

// Registers the record (and the name in the harness's "strategy" name set). A name
// registered twice, or a record whose collectives the engine cannot issue, fails at start-up.
void register_strategy(const std::string& name, const std::string& doc, StrategyInfo info);
// The record; an unknown name is an sb::Error listing the known ones.
const StrategyInfo& strategy_info(const std::string& name);
const StrategyInfo* find_strategy(const std::string& name);  // null when unknown
std::unique_ptr<Strategy> make_strategy(const std::string& name);
std::vector<std::string> strategy_names();  // sorted

// The collectives a strategy issues, with the point's compression policy applied:
// uncompressed kinds are the communicator's collectives, compressed ones its issue() of a
// CompressedCollectives description; both progress the same way (progress_engine.h).
class Collectives {
 public:
  Collectives(comm::Communicator& c, const comm::Policy& policy);
  ~Collectives();
  comm::Communicator& comm() { return comm_; }
  // The group a strategy's collective over dimension d runs on: the record's
  // (StrategyInfo::group), or while the expert scope is on (an experts unit's collectives,
  // set by the engine around them), the expert-data-parallel group in place of the data-
  // parallel ones (World, Shard), the ranks that hold the same experts.
  comm::Group group(const StrategyInfo& s, MeshDim d) const { return group_of(s.group(d, comm_), expert_); }
  comm::Group group_of(comm::Group g, bool expert) const;
  void set_expert_scope(bool on) { expert_ = on; }
  // The expert scope for a block of collectives: on for an experts unit, off again however the
  // block is left (an exception included), so no later unit's collective runs on Edp.
  class ExpertScope {
   public:
    ExpertScope(Collectives& c, bool on) : c_(c) { c_.set_expert_scope(on); }
    ~ExpertScope() { c_.set_expert_scope(false); }
    ExpertScope(const ExpertScope&) = delete;
    ExpertScope& operator=(const ExpertScope&) = delete;

   private:
    Collectives& c_;
  };
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
  bool expert_ = false;
  std::unique_ptr<comm::CompressedCollectives> cc_;  // null when nothing is compressed
  comm::Policy policy_;
};

// What a strategy's class does; its record (StrategyInfo) says what that is.
class Strategy {
 public:
  virtual ~Strategy() = default;
  // Starts summing unit gradient g ((padded), reduce dtype) over ranks into out: ((S) when
  // grads are sharded, else (padded)): the record's backward gradient collectives. Every
  // request goes into `pending`. The default issues them in the record's order, each on its
  // dimension's group: a reduce-scatter of g into out, or an all-reduce of out in place (of
  // g copied into out when it is the first); a later one keys its compression state
  // "<key>/<group>" ("/replica") and is skipped over one rank when marked so.
  virtual void reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                           const torch::Tensor& out, std::vector<comm::Request>& pending) const;
  // After the optimizer updated this rank's slice r of the full fp32 replica `master`
  // ((padded)): the record's after-optimizer collectives (called only when it has some).
  virtual void after_update(Collectives& c, const torch::Tensor& master,
                            const ShardRange& r) const {}
  // The record this strategy was made from (make_strategy sets it).
  const StrategyInfo& record() const { return *record_; }

 private:
  friend std::unique_ptr<Strategy> make_strategy(const std::string& name);
  const StrategyInfo* record_ = nullptr;
};

}  // namespace sb::fsdp
