// The bytes the FSDP engine hands to MPI, per collective kind, for every compression preset
// (and PowerSGD) on every registered strategy (fp32 and bf16 parameters): one traced step of
// gpt2-tiny is compared with the closed form of docs/COMPRESSION.md "Wire bytes of one step",
// which fsdp::step_wire_bytes computes from the strategy's record (its collectives, their
// elements, mesh dimension and payload), the unit sizes and each compressor's wire_bytes(n).
// Catches a record that says something else than its strategy's class does, a collective
// that bypasses the policy (zero1 once gathered fp32 under `hybrid`) or the wrong dtype.
#include <map>
#include <mutex>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/compressor.h"
#include "workloads/fsdp/shard.h"
#include "workloads/fsdp/wire_model.h"
#include "workloads/models/dtype.h"

using namespace sbtest;
using sb::comm::CollectiveKind;
using sb::comm::Communicator;
using sb::comm::Policy;

namespace {

constexpr std::int64_t kB = 12, kT = 16;  // 12 rows divide evenly over 1, 2, 3 and 4 ranks
using Bytes = std::uint64_t;

// hybrid_shard's shard group: two emulated nodes when the world is even, else one.
int shard_group() { return world_size() % 2 == 0 ? world_size() / 2 : world_size(); }

// How many times each unit is acquired in one forward (2: tied, pinned by the engine).
std::vector<int> acquires_per_forward(sb::models::Model& m) {
  struct Counter final : sb::models::ParamProvider {
    std::vector<std::vector<torch::Tensor>> p;
    std::vector<int> n;
    std::vector<torch::Tensor> acquire(int u) override {
      ++n[u];
      return p[u];
    }
    void release(int, const torch::Tensor&) override {}
  } c;
  c.p = sb::models::init_params(m.units(), 1234);
  c.n.assign(c.p.size(), 0);
  torch::NoGradGuard ng;
  m.loss(c, global_batch(m.config(), 2, kT, 0));
  return c.n;
}

// The record's closed form of one steady-state step (fsdp::step_wire_bytes,
// docs/COMPRESSION.md "Wire bytes of one step"): kind name -> the bytes this rank hands to MPI.
std::map<std::string, Bytes> expected(const std::string& strategy,
                                      const std::vector<sb::models::UnitSpec>& units,
                                      const std::vector<int>& acquires, const Policy& p,
                                      torch::ScalarType param_dtype) {
  const auto& info = sb::fsdp::strategy_info(strategy);
  const auto mesh = info.mesh(world_size(), shard_group());
  std::map<std::string, Bytes> e;
  for (const auto& [kind, bytes] :
       sb::fsdp::step_wire_bytes(info, units, acquires, mesh, param_dtype, torch::kFloat32, p))
    e[sb::comm::kind_name(kind)] = bytes;
  return e;
}

// The communicator of a strategy: two emulated nodes when its record runs a collective over
// dp_replicate (hybrid sharding), else one.
int shard_group_of(const std::string& strategy) {
  return sb::fsdp::strategy_info(strategy).uses(sb::fsdp::MeshDim::dp_replicate) ? shard_group() : 0;
}

sb::fsdp::EngineConfig config(const std::string& strategy, const Policy& p,
                             torch::ScalarType dtype) {
  sb::fsdp::EngineConfig cfg;
  cfg.strategy = strategy;
  cfg.adamw = test_adamw(2);
  cfg.param_dtype = dtype;
  cfg.compression = p;
  return cfg;
}

void run_steps(sb::fsdp::Engine& e, Communicator& comm, sb::models::Model& model, int steps) {
  for (int s = 0; s < steps; ++s) {
    comm.set_step(s);
    const auto g = global_batch(model.config(), kB, kT, s);
    e.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
  }
}

struct Sums {
  std::map<std::string, Bytes> wire, logical;  // kind -> bytes
};

// Runs two steps and sums the second step's wire and logical bytes per kind (the first one
// learns which units are pinned).
Sums measured(sb::models::Model& model, const std::string& strategy, const Policy& p,
              torch::ScalarType dtype) {
  Communicator comm(MPI_COMM_WORLD, shard_group_of(strategy));
  std::mutex m;
  Sums sum;
  comm.set_trace_hook(
      [&](const sb::CommEvent& e) {
        std::lock_guard<std::mutex> l(m);
        if (e.step == 1 && e.kind != "other") {
          sum.wire[e.kind] += e.wire_bytes;
          sum.logical[e.kind] += e.logical_bytes;
        }
      },
      MPI_Wtime());
  sb::fsdp::Engine e(model, comm, config(strategy, p, dtype),
                     sb::models::init_params(model.units(), 1234));
  run_steps(e, comm, model, 2);
  std::lock_guard<std::mutex> l(m);
  return sum;
}

class WireBytes : public ::testing::TestWithParam<std::string> {};

// Wire bytes per kind equal the closed form; logical bytes per kind equal, to the byte, the
// wire bytes of the uncompressed fp32 run of the same point (so `none` at fp32 has a
// compression ratio of exactly 1 and every policy and dtype divides the same baseline).
TEST_P(WireBytes, EveryPresetMatchesTheFormula) {
  const std::string strategy = GetParam();
  auto model = sb::models::make_model("gpt2-tiny");
  const auto acquires = acquires_per_forward(*model);
  const auto fp32_none = expected(strategy, model->units(), acquires,
                                  sb::comm::policy_preset("none"), torch::kFloat32);
  std::vector<Policy> policies;
  for (const auto& preset : sb::comm::policy_names())
    if (preset != "custom") policies.push_back(sb::comm::policy_preset(preset));
  Policy psgd;  // PowerSGD on the all-reduce: its own wire (P and Q)
  psgd.preset = "custom";
  psgd.grad_all_reduce.name = "powersgd";
  psgd.grad_all_reduce.set("rank", 2);
  psgd.grad_all_reduce.error_feedback = true;
  policies.push_back(psgd);
  for (const Policy& p : policies) {
    const std::string preset = p.preset == "custom" ? "powersgd" : p.preset;
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      const auto want = expected(strategy, model->units(), acquires, p, dtype);
      const auto got = measured(*model, strategy, p, dtype);
      const std::string what = strategy + "/" + preset + "/" + sb::models::dtype_name(dtype);
      auto at = [](const std::map<std::string, Bytes>& m, const std::string& k) -> Bytes {
        return m.count(k) ? m.at(k) : 0;
      };
      for (const auto& [kind, bytes] : want) {
        EXPECT_EQ(at(got.wire, kind), bytes) << what << " " << kind << " on rank " << world_rank();
        EXPECT_EQ(at(got.logical, kind), fp32_none.at(kind))
            << what << " " << kind << ": logical bytes differ from the fp32 `none` run's wire";
      }
      for (const auto& [kind, bytes] : got.wire)
        EXPECT_TRUE(want.count(kind)) << what << ": unexpected kind " << kind;
      if (preset == "none" && dtype == torch::kFloat32) EXPECT_EQ(got.logical, got.wire) << what;
      if (world_rank() == 0)
        std::printf("[ wire ] %-38s gather %9llu  reduce_scatter %9llu  all_reduce %9llu\n",
                    what.c_str(), static_cast<unsigned long long>(want.at("param_all_gather")),
                    static_cast<unsigned long long>(want.at("grad_reduce_scatter")),
                    static_cast<unsigned long long>(want.at("grad_all_reduce")));
    }
  }
}

// Every registered strategy: its record must say what its class puts on the wire.
INSTANTIATE_TEST_SUITE_P(AllStrategies, WireBytes,
                         ::testing::ValuesIn(sb::fsdp::strategy_names()));

// zero1 under `hybrid`: the replica's other slices arrive as bf16, this rank's own slice (its
// optimizer master) stays exact fp32.
TEST(WireBytes, Zero1KeepsItsOwnSliceExact) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  sb::fsdp::Engine e(*model, comm,
                     config("zero1", sb::comm::policy_preset("hybrid"), torch::kFloat32),
                     sb::models::init_params(model->units(), 1234));
  run_steps(e, comm, *model, 2);
  const auto params = e.full_params();  // zero1: this rank's replica
  std::int64_t own_inexact = 0, other_inexact = 0;
  for (const auto& unit : params) {
    std::vector<torch::Tensor> flat;
    for (const auto& t : unit) flat.push_back(t.reshape({-1}));
    const auto all = torch::cat(flat);  // (numel)
    const auto r = sb::fsdp::shard_range(all.numel(), world_size(), world_rank());
    auto inexact = all.ne(all.to(torch::kBFloat16).to(torch::kFloat));  // not a bf16 value
    auto own = torch::zeros_like(inexact);
    const std::int64_t lo = std::min(r.offset, all.numel());
    own.narrow(0, lo, std::min(r.offset + r.size, all.numel()) - lo).fill_(true);
    own_inexact += inexact.logical_and(own).sum().item<std::int64_t>();
    other_inexact += inexact.logical_and(own.logical_not()).sum().item<std::int64_t>();
  }
  EXPECT_EQ(other_inexact, 0) << "slices of other ranks are not what the bf16 wire carries";
  EXPECT_GT(own_inexact, 0) << "rank " << world_rank() << "'s own slice was rounded to bf16";
}

}  // namespace
