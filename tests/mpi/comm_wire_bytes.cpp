// The bytes the FSDP engine hands to MPI, per collective kind, for every compression preset
// on every strategy (fp32 and bf16 parameters): one traced step of gpt2-tiny is compared
// with the closed form of docs/COMPRESSION.md "Wire bytes of one step", computed here from
// the unit sizes, the world and group sizes, the strategy's layout and each compressor's
// wire_bytes(n). Catches a collective that bypasses the policy (zero1 once gathered fp32
// under `hybrid`) or sends the wrong dtype.
#include <map>
#include <mutex>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/compressor.h"
#include "workloads/fsdp/shard.h"

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

// Bytes one rank sends to the others (docs/METRICS.md "Compression"), in integers.
// Uncompressed: the buffer's bytes x (n-1)/n (all-gather, reduce-scatter; the full buffer),
// x 2(n-1)/n (all-reduce), rounded down.
Bytes ring(Bytes buffer, int k, int n) { return n > 1 ? buffer * k * (n - 1) / n : 0; }

// Parameter all-gather of a shard of S elements over n ranks, param dtype of elt bytes.
Bytes gather_bytes(std::int64_t S, int n, std::size_t elt, const Policy& p) {
  if (!p.compresses(CollectiveKind::ParamAllGather)) return ring(elt * S * n, 1, n);
  return (n - 1) * sb::comm::make_compressor(p.param_all_gather)->wire_bytes(S);
}
// Gradient reduce-scatter of a full fp32 buffer of n*S elements over n ranks: one compressed
// chunk to each other rank.
Bytes reduce_scatter_bytes(std::int64_t S, int n, const Policy& p) {
  if (!p.compresses(CollectiveKind::GradReduceScatter)) return ring(4 * S * n, 1, n);
  return (n - 1) * sb::comm::make_compressor(p.grad_reduce_scatter)->wire_bytes(S);
}
// Gradient all-reduce of x fp32 elements over n ranks (compressed: padded to n * ceil(x/n),
// a reduce-scatter then an all-gather of the reduced chunk).
Bytes all_reduce_bytes(std::int64_t x, int n, const Policy& p) {
  if (!p.compresses(CollectiveKind::GradAllReduce)) return ring(4 * x, 2, n);
  const std::int64_t c = (x + n - 1) / n;
  return 2 * (n - 1) * sb::comm::make_compressor(p.grad_all_reduce)->wire_bytes(c);
}

// The closed form of one steady-state step (docs/COMPRESSION.md "Wire bytes of one step"):
// kind -> the bytes this rank hands to MPI.
std::map<std::string, Bytes> expected(const std::string& strategy,
                                      const std::vector<sb::models::UnitSpec>& units,
                                      const std::vector<int>& acquires, const Policy& p,
                                      std::size_t param_elt) {
  const int w = world_size(), s = strategy == "hybrid_shard" ? shard_group() : w, R = w / s;
  std::map<std::string, Bytes> e;
  for (auto k : {"param_all_gather", "grad_reduce_scatter", "grad_all_reduce"}) e[k] = 0;
  for (std::size_t u = 0; u < units.size(); ++u) {
    const std::int64_t numel = units[u].numel();
    const auto r = sb::fsdp::shard_range(numel, strategy == "no_shard" ? 1 : s, 0);
    if (strategy == "no_shard") {
      e["grad_all_reduce"] += all_reduce_bytes(r.padded, w, p);
    } else if (strategy == "zero1") {  // all-reduce, then the updated slice gathered (fp32)
      e["grad_all_reduce"] += all_reduce_bytes(r.padded, w, p);
      e["param_all_gather"] += gather_bytes(r.size, w, 4, p);
    } else {  // sharded params: gathered once (shard_grad_op, pinned) or twice per step
      const int gathers = strategy == "shard_grad_op" || acquires[u] > 1 ? 1 : 2;
      e["param_all_gather"] += gathers * gather_bytes(r.size, s, param_elt, p);
      e["grad_reduce_scatter"] += reduce_scatter_bytes(r.size, s, p);
      if (strategy == "hybrid_shard" && R > 1)
        e["grad_all_reduce"] += all_reduce_bytes(r.size, R, p);
    }
  }
  return e;
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
  Communicator comm(MPI_COMM_WORLD, strategy == "hybrid_shard" ? shard_group() : 0);
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
                                  sb::comm::policy_preset("none"), 4);
  for (const auto& preset : sb::comm::policy_names()) {
    if (preset == "custom") continue;
    const Policy p = sb::comm::policy_preset(preset);
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      const auto want = expected(strategy, model->units(), acquires, p, c10::elementSize(dtype));
      const auto got = measured(*model, strategy, p, dtype);
      const std::string what = strategy + "/" + preset + "/" + sb::fsdp::dtype_name(dtype);
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

INSTANTIATE_TEST_SUITE_P(AllStrategies, WireBytes,
                         ::testing::Values("no_shard", "zero1", "shard_grad_op", "full_shard",
                                           "hybrid_shard"));

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
