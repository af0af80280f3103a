// The strategy registry (records checked and completed at registration, the policy check that
// asks them) and the Collectives wrapper that applies the compression policy.
#include "workloads/fsdp/strategy.h"

#include "harness/core/check.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/comm/compressed_collectives.h"

namespace sb::fsdp {
namespace {

using comm::CollectiveKind;

sb::Registry<StrategyInfo>& registry() {
  static sb::Registry<StrategyInfo> r("sharding strategy", "strategy");
  return r;
}

// What the engine can run: the phases and kinds its hooks call a strategy for
// (Strategy::reduce_grad in backward, after_update after the optimizer), and layouts its
// buffers support. A record that breaks one is a programming error, refused at start-up.
void check_record(const std::string& name, const StrategyInfo& info) {
  const Layout& l = info.layout;
  const auto fail = [&](const std::string& why) {
    SB_FAIL("sharding strategy '{}' registers a record the engine cannot run: {}", name, why);
  };
  if (l.reshard_after_forward && !l.params_sharded)
    fail("reshard_after_forward needs params_sharded (replicated parameters are never freed)");
  if (l.grads_sharded && !l.params_sharded && !l.optim_sharded)
    fail("grads_sharded needs a sharded optimizer or sharded parameters to consume the shard");
  bool reduces = false, scatters = false;
  for (const CollectiveUse& c : info.collectives) {
    const std::string what = fmt::format("{} in {}", comm::kind_name(c.kind), phase_name(c.phase));
    switch (c.phase) {
      case StepPhase::forward:
        fail(what + ": forward collectives are the engine's (the parameter all-gather of a "
             "layout with params_sharded); list only what the strategy's class issues");
        break;
      case StepPhase::backward:
        if (c.kind == CollectiveKind::ParamAllGather)
          fail(what + ": the backward re-gather is the engine's (reshard_after_forward)");
        if (c.payload != Payload::grads) fail(what + ": a gradient reduction carries grads");
        reduces = true;
        scatters |= c.kind == CollectiveKind::GradReduceScatter;
        break;
      case StepPhase::after_optimizer:
        if (c.kind != CollectiveKind::ParamAllGather || c.payload != Payload::master ||
            l.params_sharded || !l.optim_sharded)
          fail(what + ": after the optimizer the engine supports one thing, the all-gather of "
               "the updated slices into the fp32 master replica (replicated params, sharded "
               "optimizer)");
        if (!info.make)
          fail(what + ": no class (StrategyInfo::make) runs it: the default runs the backward "
               "gradient collectives only; an after-optimizer gather needs the strategy's own "
               "Strategy::after_update");
        break;
    }
  }
  if (!reduces) fail("no gradient collective in backward: gradients would never be summed");
  if (scatters != l.grads_sharded)
    fail(l.grads_sharded ? "grads_sharded, but no grad_reduce_scatter produces the shard"
                         : "a grad_reduce_scatter leaves a shard, but grads_sharded is false");
}

// The parameter all-gathers the engine issues for a layout, ahead of the strategy's own.
std::vector<CollectiveUse> engine_gathers(const Layout& l) {
  std::vector<CollectiveUse> out;
  if (l.params_sharded)
    out.push_back({CollectiveKind::ParamAllGather, StepPhase::forward, MeshDim::dp_shard,
                   Extent::unit, Payload::params});
  if (l.reshard_after_forward)
    out.push_back({CollectiveKind::ParamAllGather, StepPhase::backward, MeshDim::dp_shard,
                   Extent::unit, Payload::params});
  return out;
}

// A custom compression policy that compresses a kind of collective the strategy never issues
// is a suite mistake, not a no-op (the record says which kinds it issues).
void validate_policy(const sb::Point& p, std::vector<sb::Diagnostic>& out) {
  if (sb::config<sb::TrainChoice>(p).compression != "custom") return;
  const std::string& strategy = sb::config<sb::ModelKeys>(p).strategy;
  const StrategyInfo* info = find_strategy(strategy);
  if (!info) return;  // the name check reports it
  comm::Policy policy;
  try {
    policy = comm::policy_from_point(p);
  } catch (const sb::Error&) {
    return;  // the policy's own validator reports it
  }
  for (auto k : {CollectiveKind::ParamAllGather, CollectiveKind::GradReduceScatter,
                 CollectiveKind::GradAllReduce})
    if (policy.compresses(k) && !info->issues(k)) {
      const std::string key = std::string(comm::key_prefix(k)) + ".name";
      out.push_back({key, fmt::format("strategy {} runs no {} collective, so {} = \"{}\" "
                                      "would never be used; set it to \"none\"",
                                      strategy, comm::kind_name(k), key, policy[k].name)});
    }
}

sb::Registrar reg([] { sb::register_validator(validate_policy); });

}  // namespace

const char* dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::dp_shard: return "dp_shard";
    case MeshDim::dp_replicate: return "dp_replicate";
    case MeshDim::dp: return "dp";
  }
  return "?";
}

const char* phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::forward: return "forward";
    case StepPhase::backward: return "backward";
    case StepPhase::after_optimizer: return "after_optimizer";
  }
  return "?";
}

int DpMesh::size(MeshDim d) const {
  switch (d) {
    case MeshDim::dp_shard: return dp_shard;
    case MeshDim::dp_replicate: return dp_replicate;
    case MeshDim::dp: return dp_shard * dp_replicate;
  }
  return 1;
}

bool StrategyInfo::issues(comm::CollectiveKind k) const {
  for (const auto& c : collectives)
    if (c.kind == k) return true;
  return false;
}
bool StrategyInfo::uses(MeshDim d) const {
  for (const auto& c : collectives)
    if (c.over == d) return true;
  return false;
}
bool StrategyInfo::has_phase(StepPhase p) const {
  for (const auto& c : collectives)
    if (c.phase == p) return true;
  return false;
}

DpMesh StrategyInfo::mesh(int world, int shard_group) const {
  if (!uses(MeshDim::dp_replicate)) return {world, 1};
  SB_CHECK(shard_group >= 1 && world % shard_group == 0,
           "shard group {} must be >= 1 and divide the world size {}", shard_group, world);
  return {shard_group, world / shard_group};
}

comm::Group StrategyInfo::group(MeshDim d) const {
  switch (d) {
    case MeshDim::dp: return comm::Group::World;
    case MeshDim::dp_replicate: return comm::Group::Replica;
    case MeshDim::dp_shard: break;
  }
  return uses(MeshDim::dp_replicate) ? comm::Group::Shard : comm::Group::World;
}

comm::Group StrategyInfo::group(MeshDim d, const comm::Communicator& c) const {
  const comm::Group g = group(d);
  if (g != comm::Group::World) return g;
  const int dp = c.size(comm::Group::Shard) * c.size(comm::Group::Replica);
  if (dp == c.size(comm::Group::World)) return g;  // every rank is data-parallel
  SB_CHECK(c.size(comm::Group::Replica) == 1, "a strategy without replicas runs over every "
           "data-parallel rank, but the mesh {} has dp_replicate = {}: set mesh.dp_replicate = 1",
           c.mesh().str(), c.size(comm::Group::Replica));
  return comm::Group::Shard;
}

std::int64_t StrategyInfo::elements(const CollectiveUse& c, const ShardRange& r) {
  return c.elements == Extent::unit ? r.padded : r.size;
}

void register_strategy(const std::string& name, const std::string& doc, StrategyInfo info) {
  check_record(name, info);
  auto all = engine_gathers(info.layout);
  all.insert(all.end(), info.collectives.begin(), info.collectives.end());
  info.collectives = std::move(all);
  registry().add(name, doc, std::move(info));
}

const StrategyInfo& strategy_info(const std::string& name) { return registry().get(name); }
const StrategyInfo* find_strategy(const std::string& name) { return registry().find(name); }
std::unique_ptr<Strategy> make_strategy(const std::string& name) {
  const StrategyInfo& info = strategy_info(name);
  std::unique_ptr<Strategy> s = info.make ? info.make() : std::make_unique<Strategy>();
  s->record_ = &info;
  return s;
}

void Strategy::reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                           const torch::Tensor& out, std::vector<comm::Request>& pending) const {
  bool first = true;
  for (const CollectiveUse& u : record().collectives) {
    if (u.phase != StepPhase::backward || u.payload != Payload::grads) continue;
    const comm::Group group = c.group(record(), u.over);
    if (u.skipped_on_one_rank && c.comm().size(group) <= 1) continue;
    const std::string k = first ? key : key + "/" + comm::group_name(group);
    if (u.kind == CollectiveKind::GradReduceScatter) {
      pending.push_back(c.reduce_scatter_grads(k, g, out, group));
    } else {  // GradAllReduce (check_record allows no other gradient collective)
      if (first && !out.is_same(g)) out.copy_(g);
      pending.push_back(c.all_reduce_grads(k, out, group));
    }
    first = false;
  }
}

std::vector<std::string> strategy_names() { return registry().names(); }

// ---- Collectives -------------------------------------------------------------------------
Collectives::Collectives(comm::Communicator& c, const comm::Policy& policy)
    : comm_(c), policy_(policy) {
  if (policy_.any()) cc_ = std::make_unique<comm::CompressedCollectives>(policy_, c.rank());
}
Collectives::~Collectives() = default;

std::int64_t Collectives::state_bytes() const { return cc_ ? cc_->state_bytes() : 0; }

comm::StateDict Collectives::compression_state() const {
  return cc_ ? cc_->state() : comm::StateDict{};
}
void Collectives::load_compression_state(const comm::StateDict& s) {
  if (cc_) return cc_->load_state(s);
  SB_CHECK(s.empty(), "{} entries of compression state for a run without compression", s.size());
}

comm::Group Collectives::group_of(comm::Group g, bool expert) const {
  // Replica: every replica's rank at this one's place in its shard group, so of the same ep
  // index: the ranks that hold the same experts across replicas.
  if (!expert || comm_.size(comm::Group::Ep) == 1 || g == comm::Group::Replica) return g;
  // World is the shard group only without replicas (the Edp group is a split of one shard group).
  SB_CHECK(g == comm::Group::Shard || (g == comm::Group::World && comm_.size(comm::Group::Replica) == 1),
           "an experts unit's collective over the {} group: expert parallelism runs over a shard "
           "group's ranks (and its replicas' through the replica group)", comm::group_name(g));
  return comm::Group::Edp;
}

bool Collectives::compresses(comm::CollectiveKind k) const { return cc_ && cc_->compresses(k); }

namespace {
// The uncompressed parameter gather sends the shard in full's dtype: one cast (or none).
torch::Tensor as_dtype_of(const torch::Tensor& shard, const torch::Tensor& full) {
  return shard.scalar_type() == full.scalar_type() ? shard : shard.to(full.scalar_type());
}
}  // namespace

// A compressed collective runs through the communicator like a plain one: same progress
// mode, overlap and trace event, with the bytes its description gives.
comm::Request Collectives::issue(comm::CompressedOp op, comm::Group g, const char* name,
                                 comm::CollectiveKind k, bool sync) {
  return comm_.issue(std::move(op.run), g, name, comm::kind_name(k),
                     static_cast<std::uint64_t>(op.bytes.logical_bytes),
                     static_cast<std::uint64_t>(op.bytes.wire_bytes), sync);
}

comm::Request Collectives::all_gather_params(const torch::Tensor& shard, const torch::Tensor& full,
                                             comm::Group g) {
  if (!compresses(comm::CollectiveKind::ParamAllGather)) {
    // The communicator's request holds the cast copy until it completes.
    return comm_.all_gather_async(as_dtype_of(shard, full), full, g, "param_all_gather");
  }
  // full is an alias with its own version counter (engine.cpp): written in place, raw.
  return issue(cc_->all_gather_params_op(shard, full, comm_.size(g)), g, "all_gather",
               comm::CollectiveKind::ParamAllGather, false);
}

void Collectives::all_gather_params_now(const torch::Tensor& shard, const torch::Tensor& full,
                                        comm::Group g) {
  if (compresses(comm::CollectiveKind::ParamAllGather)) {
    issue(cc_->all_gather_params_op(shard, full, comm_.size(g)), g, "all_gather",
          comm::CollectiveKind::ParamAllGather, true)
        .wait();
    return;
  }
  comm_.all_gather(as_dtype_of(shard, full), full, g, "param_all_gather");
}

comm::Request Collectives::reduce_scatter_grads(const std::string& key, const torch::Tensor& full,
                                                const torch::Tensor& shard, comm::Group g) {
  if (!compresses(comm::CollectiveKind::GradReduceScatter))
    return comm_.reduce_scatter_async(full, shard, g, "grad_reduce_scatter");
  return issue(cc_->reduce_scatter_grads_op(key, full, shard, comm_.size(g)), g, "reduce_scatter",
               comm::CollectiveKind::GradReduceScatter, false);
}

comm::Request Collectives::all_reduce_grads(const std::string& key, const torch::Tensor& t,
                                            comm::Group g) {
  if (!compresses(comm::CollectiveKind::GradAllReduce))
    return comm_.all_reduce_async(t, g, "grad_all_reduce");
  return issue(cc_->all_reduce_grads_op(key, t, comm_.size(g)), g, "all_reduce",
               comm::CollectiveKind::GradAllReduce, false);
}

}  // namespace sb::fsdp
