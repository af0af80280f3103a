// Strategy registry and the Collectives wrapper that applies the compression policy.
#include "workloads/fsdp/strategy.h"

#include <map>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/compressed_collectives.h"

namespace sb::fsdp {
namespace {
std::map<std::string, StrategyFactory>& registry() {
  static std::map<std::string, StrategyFactory> r;
  return r;
}
}  // namespace

void register_strategy(const std::string& name, const std::string& doc, StrategyFactory f) {
  registry()[name] = std::move(f);
  sb::register_name("strategy", name, doc);
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const auto& [n, f] : registry()) out.push_back(n);
  return out;
}

std::unique_ptr<Strategy> make_strategy(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end())
    SB_FAIL("unknown strategy '{}'; known strategies: {}", name,
            fmt::format("{}", fmt::join(strategy_names(), ", ")));
  return it->second();
}

Layout strategy_layout(const std::string& name) { return make_strategy(name)->layout(); }

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
