// Every CPU backend against MPI (backend.h): each plain collective on each group and dtype,
// blocking and in flight under every progress mode, gives MPI's result bit for bit (inputs
// are small integers, so every summation order gives the same sum); random fp32 data within
// rounding where the reduction order differs (3+ ranks). "auto" with a table that alternates
// backends by size runs many collectives of both backends in flight on one group without
// deadlock, and records which backend ran each. Training gives MPI's losses (bit-equal at 2
// ranks; at 3+ ranks Gloo's ring adds in another order: within 1e-6). The tuning table's
// rule, its errors (missing, stale, malformed) and its choice of the nearest size. Hybrid
// compression on gloo runs every collective there and matches MPI's results.
#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "harness/core/mpi_context.h"
#include "workloads/comm/backend_table.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/policy.h"
#include "workloads/models/model.h"

using sb::comm::BackendChoice;
using sb::comm::CollOp;
using sb::comm::Communicator;
using sb::comm::Group;
using sb::comm::ReduceOp;
using sbtest::world_rank;
using sbtest::world_size;

namespace {

int two_nodes() { return world_size() % 2 == 0 ? world_size() / 2 : world_size(); }

// The same on every rank (one binary), so a skip never leaves a rank in a collective alone.
#define SB_REQUIRE_GLOO()                                                                    \
  do {                                                                                     \
    if (!sb::comm::find_backend("gloo")->available)                                        \
      GTEST_SKIP() << sb::comm::find_backend("gloo")->unavailable_why;                     \
  } while (0)

// A table for this world and host set that alternates gloo and mpi by size (4 B, 16 B, ...),
// so consecutive collectives of growing sizes switch backends. Each rank writes its own copy.
std::string mixing_table() {
  sb::comm::BackendTable t;
  std::vector<sb::comm::TableEntry> rows;
  for (CollOp op : sb::comm::kCollOps)
    for (std::uint64_t b = 4, i = 0; b <= (1u << 22); b *= 4, ++i) {
      sb::comm::TableEntry e;
      e.op = op;
      e.bytes = b;
      e.seconds = {{"mpi", i % 2 ? 1.0 : 2.0}, {"gloo", i % 2 ? 2.0 : 1.0}};
      rows.push_back(e);
    }
  t = sb::comm::make_table(rows);
  t.world = world_size();
  t.hosts = sb::comm::host_set(MPI_COMM_WORLD);
  t.source = "tests/mpi/comm_backends.cpp";
  const std::string path = fmt::format("{}/sb_mix_{}_{}.toml",
                                       std::filesystem::temp_directory_path().string(), getpid(),
                                       world_rank());
  sb::comm::write_table(t, path);
  return path;
}

// Exact small integers (0..7) from (rank, position, salt): sums over 4 ranks stay exact in
// every dtype, whatever the order.
torch::Tensor ints(std::int64_t n, int rank, int salt, torch::ScalarType dt) {
  auto i = torch::arange(n, torch::kInt64);
  return ((i * 7 + rank * 3 + salt * 5) % 8).to(dt);
}

struct Case {
  CollOp op;
  ReduceOp red;
  torch::ScalarType dt;
  std::int64_t n;  // elements per block
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (auto dt : {torch::kFloat32, torch::kBFloat16, torch::kFloat16, torch::kInt64})
    for (std::int64_t n : {1, 5, 1000, 70000})
      for (CollOp op : sb::comm::kCollOps) {
        v.push_back({op, ReduceOp::Sum, dt, n});
        const bool half = dt == torch::kBFloat16 || dt == torch::kFloat16;
        if (!half && (op == CollOp::AllReduce || op == CollOp::ReduceScatter)) {
          v.push_back({op, ReduceOp::Max, dt, n});
          v.push_back({op, ReduceOp::Min, dt, n});
        }
      }
  return v;
}

// Buffers of one case on group g: (in, out) with the collective's shapes.
std::pair<torch::Tensor, torch::Tensor> buffers(const Case& k, int size, int rank, int salt) {
  switch (k.op) {
    case CollOp::AllGather:
      return {ints(k.n, rank, salt, k.dt), torch::full({k.n * size}, -1, k.dt)};
    case CollOp::ReduceScatter:
      return {ints(k.n * size, rank, salt, k.dt), torch::full({k.n}, -1, k.dt)};
    case CollOp::AllReduce:
    case CollOp::Broadcast: {
      auto t = ints(k.n, rank, salt, k.dt);
      return {t, t};
    }
    case CollOp::AllToAll:
      return {ints(k.n * size, rank, salt, k.dt), torch::full({k.n * size}, -1, k.dt)};
  }
  return {};
}

sb::comm::Request issue(Communicator& c, const Case& k, const torch::Tensor& in,
                        const torch::Tensor& out, Group g, bool async) {
  switch (k.op) {
    case CollOp::AllGather:
      if (async) return c.all_gather_async(in, out, g);
      c.all_gather(in, out, g);
      break;
    case CollOp::ReduceScatter:
      if (async) return c.reduce_scatter_async(in, out, g, "other", k.red);
      c.reduce_scatter(in, out, g, "other", k.red);
      break;
    case CollOp::AllReduce:
      if (async) return c.all_reduce_async(out, g, "other", k.red);
      c.all_reduce(out, g, "other", k.red);
      break;
    case CollOp::Broadcast: {
      const int root = c.size(g) - 1;
      if (async) return c.broadcast_async(out, root, g);
      c.broadcast(out, root, g);
      break;
    }
    case CollOp::AllToAll:
      if (async) return c.all_to_all_async(in, out, g);
      c.all_to_all(in, out, g);
      break;
  }
  return {};
}

std::string describe(const Case& k, Group g) {
  return fmt::format("{} {} {} n={} on {}", sb::comm::coll_name(k.op),
                     k.red == ReduceOp::Sum ? "sum" : k.red == ReduceOp::Max ? "max" : "min",
                     c10::toString(k.dt), k.n, sb::comm::group_name(g));
}

// Runs every case on every group with `c` (all issued before any is waited for, when async)
// and returns the outputs in order.
std::vector<torch::Tensor> run_all(Communicator& c, bool async) {
  std::vector<torch::Tensor> outs;
  std::vector<sb::comm::Request> reqs;
  int salt = 0;
  for (Group g : {Group::World, Group::Shard, Group::Replica})
    for (const Case& k : cases()) {
      auto [in, out] = buffers(k, c.size(g), c.rank(g), ++salt);
      reqs.push_back(issue(c, k, in, out, g, async));
      outs.push_back(out);
      if (async && reqs.size() % 7 == 0) c.progress();  // as the engine does between units
    }
  for (auto& r : reqs) r.wait();
  return outs;
}

void expect_equal_to_mpi(const BackendChoice& b) {
  Communicator mpi(MPI_COMM_WORLD, two_nodes());
  const auto want = run_all(mpi, false);
  using sb::comm::ProgressMode;
  for (int mode = 0; mode < 4; ++mode) {  // blocking, then in flight under each progress mode
    Communicator c(MPI_COMM_WORLD, two_nodes(), true, b);
    const bool async = mode > 0;
    if (async)
      c.set_progress(mode == 1 ? ProgressMode::Thread : mode == 2 ? ProgressMode::Poll
                                                                  : ProgressMode::Inline);
    const auto got = run_all(c, async);
    ASSERT_EQ(got.size(), want.size());
    std::size_t i = 0, bad = 0;
    for (Group g : {Group::World, Group::Shard, Group::Replica})
      for (const Case& k : cases()) {
        if (!torch::equal(got[i], want[i]) && bad++ < 5)
          ADD_FAILURE() << b.name << " mode " << mode << ": " << describe(k, g)
                        << " differs from mpi";
        ++i;
      }
    EXPECT_EQ(bad, 0u) << b.name << " mode " << mode;
  }
}

}  // namespace

TEST(Backends, GlooEqualsMpiOnEveryCollectiveGroupDtypeAndMode) {
  SB_REQUIRE_GLOO();
  expect_equal_to_mpi({"gloo", ""});
}

TEST(Backends, AutoMixingBackendsEqualsMpiWithoutDeadlock) {
  SB_REQUIRE_GLOO();
  const std::string table = mixing_table();
  expect_equal_to_mpi({"auto", table});
  std::filesystem::remove(table);
}

TEST(Backends, RandomDataWithinRoundingWhereTheOrderDiffers) {
  SB_REQUIRE_GLOO();
  Communicator mpi(MPI_COMM_WORLD, 0), gloo(MPI_COMM_WORLD, 0, true, {"gloo", ""});
  auto gen = at::detail::createCPUGenerator(77 + static_cast<std::uint64_t>(world_rank()));
  const std::int64_t n = 4096 * world_size();
  auto x = torch::randn({n}, gen);
  auto a = x.clone(), b = x.clone();
  mpi.all_reduce(a, Group::World);
  gloo.all_reduce(b, Group::World);
  auto ra = torch::empty({n / world_size()}), rb = torch::empty({n / world_size()});
  mpi.reduce_scatter(x, ra, Group::World);
  gloo.reduce_scatter(x, rb, Group::World);
  if (world_size() == 2) {  // a + b == b + a: the same bits
    EXPECT_TRUE(torch::equal(a, b));
    EXPECT_TRUE(torch::equal(ra, rb));
  } else {
    EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-6)) << (a - b).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(ra, rb, 1e-6, 1e-6)) << (ra - rb).abs().max().item<double>();
  }
}

TEST(Backends, TraceEventsNameTheBackendTheTableChose) {
  SB_REQUIRE_GLOO();
  const std::string path = mixing_table();
  const auto table = sb::comm::read_table(path);
  Communicator c(MPI_COMM_WORLD, 0, true, {"auto", path});
  std::vector<sb::CommEvent> events;
  c.set_trace_hook([&](const sb::CommEvent& e) { events.push_back(e); }, MPI_Wtime());
  std::vector<std::uint64_t> sizes;
  for (std::int64_t n = 1; n <= (1 << 16); n *= 4) {
    auto t = torch::ones({n});
    c.all_reduce(t, Group::World);
    sizes.push_back(static_cast<std::uint64_t>(n) * 4);
  }
  ASSERT_EQ(events.size(), sizes.size());
  std::set<std::string> seen;
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].backend, table.choose(CollOp::AllReduce, sizes[i])) << sizes[i] << " B";
    seen.insert(events[i].backend);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"gloo", "mpi"}));
  std::filesystem::remove(path);
}

TEST(Backends, TrainingLossesEqualMpis) {
  SB_REQUIRE_GLOO();
  constexpr std::int64_t kB = 12, kT = 16;
  constexpr int kSteps = 3;
  const std::string table = mixing_table();
  for (const std::string strategy : {"no_shard", "full_shard", "hybrid_shard"}) {
    const int sg = sbtest::replicates(strategy) ? two_nodes() : 0;
    auto model = sb::models::make_model("gpt2-tiny");
    Communicator mpi(MPI_COMM_WORLD, sg);
    const auto want = sbtest::run_engine(*model, mpi, sbtest::engine_config(strategy, kSteps), kB,
                                         kT, kSteps);
    for (const BackendChoice& b : {BackendChoice{"gloo", ""}, BackendChoice{"auto", table}}) {
      Communicator c(MPI_COMM_WORLD, sg, true, b);
      const auto got = sbtest::run_engine(*model, c, sbtest::engine_config(strategy, kSteps), kB,
                                          kT, kSteps);
      for (int s = 0; s < kSteps; ++s) {
        if (world_size() == 2)
          EXPECT_EQ(got.losses[s], want.losses[s]) << b.name << " " << strategy << " step " << s;
        else
          EXPECT_NEAR(got.losses[s], want.losses[s], 1e-6 * std::abs(want.losses[s]))
              << b.name << " " << strategy << " step " << s;
      }
    }
  }
  std::filesystem::remove(table);
}

// Hybrid compression (bf16 parameters, int8 + error feedback on every gradient reduction)
// with comm_backend = "gloo": every collective of the steps, compressed or not, the loss and
// norm scalars included, runs on gloo, in every progress mode, and the
// losses and parameters are MPI's. The compressed reductions sum in rank order on each rank
// whatever the library, so only the plain scalars can differ: bit-equal at 2 ranks; at 3+
// Gloo's ring adds them in another order (within 1e-6).
TEST(Backends, HybridCompressionOnGlooMatchesMpiAndRunsOnGlooOnly) {
  SB_REQUIRE_GLOO();
  constexpr std::int64_t kB = 12, kT = 16;
  constexpr int kSteps = 3;
  for (const std::string strategy : {"no_shard", "full_shard", "hybrid_shard"}) {
    const int sg = strategy == "hybrid_shard" ? two_nodes() : 0;
    auto model = sb::models::make_model("gpt2-tiny");
    auto cfg = sbtest::engine_config(strategy, kSteps);
    cfg.compression = sb::comm::policy_preset("hybrid");
    Communicator mpi(MPI_COMM_WORLD, sg);
    const auto want = sbtest::run_engine(*model, mpi, cfg, kB, kT, kSteps);
    for (auto mode : {sb::comm::ProgressMode::Thread, sb::comm::ProgressMode::Poll,
                      sb::comm::ProgressMode::Inline}) {
      SCOPED_TRACE(strategy + " " + sb::comm::progress_name(mode));
      Communicator c(MPI_COMM_WORLD, sg, true, {"gloo", ""});
      c.set_progress(mode);
      std::mutex m;
      std::map<std::string, int> backends, kinds;
      c.set_trace_hook(
          [&](const sb::CommEvent& e) {
            std::lock_guard<std::mutex> l(m);
            ++backends[e.backend];
            ++kinds[e.kind];
          },
          MPI_Wtime());
      const auto got = sbtest::run_engine(*model, c, cfg, kB, kT, kSteps);
      c.set_trace_hook(nullptr, 0);
      for (int s = 0; s < kSteps; ++s) {
        if (world_size() == 2)
          EXPECT_EQ(got.losses[s], want.losses[s]) << "step " << s;
        else
          EXPECT_NEAR(got.losses[s], want.losses[s], 1e-6 * std::abs(want.losses[s])) << "step " << s;
      }
      const double d = sbtest::max_param_diff(got.params, want.params);
      if (world_size() == 2)
        EXPECT_EQ(d, 0.0);
      else
        EXPECT_LT(d, 1e-5);
      EXPECT_EQ(backends.size(), 1u);
      EXPECT_GT(backends["gloo"], 0) << "no event on gloo";
      // The compressed kinds this strategy issues ran (on gloo: checked above).
      std::vector<std::string> compressed;
      if (strategy != "no_shard") compressed = {"param_all_gather", "grad_reduce_scatter"};
      if (strategy == "no_shard" || c.size(Group::Replica) > 1) compressed.push_back("grad_all_reduce");
      for (const auto& k : compressed) EXPECT_GT(kinds[k], 0) << k;
    }
  }
}

TEST(Backends, TableChoosesTheNearestMeasuredSize) {
  std::vector<sb::comm::TableEntry> rows;
  for (std::uint64_t b : {4, 1024, 1 << 20}) {
    sb::comm::TableEntry e;
    e.op = CollOp::AllGather;
    e.bytes = b;
    e.seconds = {{"mpi", b == 1024 ? 2.0 : 1.0}, {"gloo", b == 1024 ? 1.0 : 2.0}};
    rows.push_back(e);
  }
  const auto t = sb::comm::make_table(rows);
  EXPECT_EQ(t.choose(CollOp::AllGather, 1), "mpi");
  EXPECT_EQ(t.choose(CollOp::AllGather, 63), "mpi");     // log2: 5.98 from 2, 4.02 from 10
  EXPECT_EQ(t.choose(CollOp::AllGather, 65), "gloo");
  EXPECT_EQ(t.choose(CollOp::AllGather, 32767), "gloo");  // nearer 1 KiB than 1 MiB
  EXPECT_EQ(t.choose(CollOp::AllGather, 32769), "mpi");
  EXPECT_EQ(t.choose(CollOp::AllGather, 1ull << 30), "mpi");
  EXPECT_NE(sbtest::error_of([&] { t.choose(CollOp::Broadcast, 4); }).find("no entry for broadcast"),
            std::string::npos);
}

TEST(Backends, MissingStaleOrBrokenTablesAreRefusedOnEveryRank) {
  SB_REQUIRE_GLOO();
  const std::string missing = "/nonexistent/backend-table.toml";
  auto err = sbtest::error_of([&] { Communicator c(MPI_COMM_WORLD, 0, true, {"auto", missing}); });
  EXPECT_NE(err.find("comm_tuning: no backend tuning table at " + missing), std::string::npos) << err;
  EXPECT_NE(err.find("shardbench sweep suite/tune-backends.toml"), std::string::npos) << err;

  const std::string path = mixing_table();
  auto t = sb::comm::read_table(path);
  t.world = world_size() + 1;  // measured with another world size
  sb::comm::write_table(t, path);
  err = sbtest::error_of([&] { Communicator c(MPI_COMM_WORLD, 0, true, {"auto", path}); });
  EXPECT_NE(err.find(fmt::format("is stale: it was measured with {} ranks", world_size() + 1)),
            std::string::npos) << err;

  t.world = world_size();
  t.hosts = {"some-other-node"};
  sb::comm::write_table(t, path);
  err = sbtest::error_of([&] { Communicator c(MPI_COMM_WORLD, 0, true, {"auto", path}); });
  EXPECT_NE(err.find("on [some-other-node]"), std::string::npos) << err;

  std::ofstream(path) << "format = 1\nworld = 2\nhosts = [\"a\"]\nbackends = [\"mpi\"]\n"
                         "[[entry]]\nop = \"all_reduce\"\nbytes = 4\nbackend = \"gloo\"\n";
  err = sbtest::error_of([&] { sb::comm::read_table(path); });
  EXPECT_NE(err.find("entry 1 (all_reduce at 4 bytes): backend \"gloo\" is not one of `backends`"),
            std::string::npos) << err;
  std::ofstream(path) << "format = 1\nworld = [\n";
  err = sbtest::error_of([&] { sb::comm::read_table(path); });
  EXPECT_NE(err.find(path + ":"), std::string::npos) << err;
  std::filesystem::remove(path);
}

TEST(Backends, GlooRefusesDeviceTensorsAndNcclNeedsTheCudaBuild) {
  const auto* nccl = sb::comm::find_backend("nccl");
  ASSERT_NE(nccl, nullptr);
  if (!nccl->available) {
    auto err = sbtest::error_of([] { Communicator c(MPI_COMM_WORLD, 0, true, {"nccl", ""}); });
    EXPECT_NE(err.find("comm_backend = \"nccl\": NCCL needs the CUDA build"), std::string::npos)
        << err;
  }
  auto err = sbtest::error_of([] { Communicator c(MPI_COMM_WORLD, 0, true, {"nonesuch", ""}); });
  EXPECT_NE(err.find("unknown backend \"nonesuch\"; known: gloo, mpi, nccl"), std::string::npos)
      << err;
}
