// Point-to-point transfers through the Communicator (communicator.h send/recv): on every CPU
// backend, dtype and progress mode, blocking and non-blocking, each received tensor equals
// what the peer sent, byte for byte, around a ring of any size; sends of 16 MiB that cross
// (every rank sends before it receives) complete without deadlock under every progress mode,
// also with collectives in flight; peers are ranks of the group asked (shard), and the trace
// names the peer's world rank, the mesh dimension and the message's exact bytes. Bad peers and tags fail with
// the fix. The p2p micro-benchmark cases (p2p_case.h) receive exactly what was sent.
#include <torch/types.h>

#include <mutex>
#include <vector>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/p2p_case.h"

using sb::comm::BackendChoice;
using sb::comm::Communicator;
using sb::comm::Group;
using sb::comm::Request;
using sbtest::world_rank;
using sbtest::world_size;

namespace {

std::vector<std::string> cpu_backends() {
  std::vector<std::string> v{"mpi"};
  if (sb::comm::find_backend("gloo")->available) v.push_back("gloo");  // same on every rank
  return v;
}

torch::Tensor pattern(int rank, std::int64_t n, torch::ScalarType dt) {
  return ((torch::arange(n, torch::kInt64) * 3 + rank * 11) % 97).to(dt);
}

int next(int r, int n) { return (r + 1) % n; }
int prev(int r, int n) { return (r + n - 1) % n; }

TEST(CommP2P, RingEqualsWhatWasSentOnEveryBackendDtypeAndMode) {
  const int r = world_rank(), n = world_size();
  for (const auto& backend : cpu_backends())
    for (const char* mode : {"thread", "poll", "inline"}) {
      Communicator c(MPI_COMM_WORLD, 0, true, BackendChoice{backend, ""});
      c.set_progress(mode);
      for (auto dt : {torch::kFloat32, torch::kBFloat16, torch::kInt64, torch::kUInt8})
        for (std::int64_t len : {1, 1000, 300000}) {
          const auto mine = pattern(r, len, dt);
          // Non-blocking: the receive posted first, then the send, then both waited for.
          auto got = torch::zeros({len}, dt);
          Request rr = c.recv_async(got, prev(r, n), Group::World);
          Request rs = c.send_async(mine, next(r, n), Group::World);
          rs.wait();
          rr.wait();
          EXPECT_TRUE(got.equal(pattern(prev(r, n), len, dt)))
              << backend << " " << mode << " " << c10::toString(dt) << " " << len;
          // Blocking: rank 0 sends first, the others receive first (a ring of blocking calls).
          auto got2 = torch::zeros({len}, dt);
          if (r == 0) {
            c.send(mine, next(r, n), Group::World);
            c.recv(got2, prev(r, n), Group::World);
          } else {
            c.recv(got2, prev(r, n), Group::World);
            c.send(mine, next(r, n), Group::World);
          }
          EXPECT_TRUE(got2.equal(pattern(prev(r, n), len, dt)))
              << backend << " " << mode << " blocking " << c10::toString(dt) << " " << len;
        }
    }
}

// 16 MiB is past every transport's eager limit: a send that waited for its receive before
// the rank posted that receive would hang here.
TEST(CommP2P, CrossingLargeSendsWithCollectivesInFlightComplete) {
  const int r = world_rank(), n = world_size();
  const std::int64_t len = 4 << 20;  // fp32: 16 MiB
  for (const auto& backend : cpu_backends())
    for (const char* mode : {"thread", "poll", "inline"}) {
      Communicator c(MPI_COMM_WORLD, 0, true, BackendChoice{backend, ""});
      c.set_progress(mode);
      auto sum = torch::full({1 << 16}, static_cast<float>(r + 1));
      Request ar = c.all_reduce_async(sum, Group::World);
      const auto mine = pattern(r, len, torch::kFloat32);
      auto a = torch::zeros({len}), b = torch::zeros({len});
      // Sends first on every rank, to both neighbours, then the receives.
      Request s1 = c.send_async(mine, next(r, n), Group::World, "other", 5);
      Request s2 = c.send_async(mine, prev(r, n), Group::World, "other", 6);
      Request r1 = c.recv_async(a, prev(r, n), Group::World, "other", 5);
      Request r2 = c.recv_async(b, next(r, n), Group::World, "other", 6);
      for (Request* q : {&r2, &r1, &s2, &s1, &ar}) q->wait();
      EXPECT_TRUE(a.equal(pattern(prev(r, n), len, torch::kFloat32))) << backend << " " << mode;
      EXPECT_TRUE(b.equal(pattern(next(r, n), len, torch::kFloat32))) << backend << " " << mode;
      EXPECT_EQ(sum[0].item<float>(), n * (n + 1) / 2.0f) << backend << " " << mode;
    }
}

TEST(CommP2P, PeersAreGroupRanksAndTheTraceNamesWorldRanksAndBytes) {
  const int r = world_rank(), n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "needs shard groups of 2 (every rank skips alike)";
  Communicator c(MPI_COMM_WORLD, 2);  // shard groups {0, 1}, {2, 3}
  std::mutex m;
  std::vector<sb::CommEvent> events;
  c.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(m);
    events.push_back(e);
  }, MPI_Wtime());
  const int me = c.rank(Group::Shard), other = 1 - me;
  const auto mine = pattern(r, 777, torch::kBFloat16);
  auto got = torch::zeros({777}, torch::kBFloat16);
  Request rr = c.recv_async(got, other, Group::Shard, "pp_activation");
  c.send(mine, other, Group::Shard, "pp_activation");
  rr.wait();
  const int peer_world = r ^ 1;
  EXPECT_TRUE(got.equal(pattern(peer_world, 777, torch::kBFloat16)));
  EXPECT_EQ(c.world_rank(Group::Shard, other), peer_world);
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_TRUE(e.op == "send" || e.op == "recv") << e.op;
    EXPECT_EQ(e.group, "shard");
    EXPECT_EQ(e.dim, "dp_shard");
    EXPECT_EQ(e.kind, "pp_activation");
    EXPECT_EQ(e.peer, peer_world);
    EXPECT_EQ(e.wire_bytes, 777u * 2);     // the message in its own dtype
    EXPECT_EQ(e.logical_bytes, 777u * 4);  // the uncompressed fp32 baseline (docs/METRICS.md)
    EXPECT_EQ(e.rank, r);
  }
}

TEST(CommP2P, BadPeerTagAndBufferNameTheFix) {
  const int r = world_rank(), n = world_size();
  Communicator c(MPI_COMM_WORLD);
  auto t = torch::zeros({4});
  auto msg = [&](auto f) {
    try {
      f();
    } catch (const sb::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(msg([&] { c.send(t, r, Group::World); }).find("is not another rank of the world group"), std::string::npos);
  EXPECT_NE(msg([&] { c.recv(t, n, Group::World); }).find(fmt::format("peer {} is not another rank", n)), std::string::npos);
  EXPECT_NE(msg([&] { c.send(t, next(r, n), Group::World, "other", 40000); }).find("tag 40000 is outside 0..32767"), std::string::npos);
  auto strided = torch::zeros({4, 4}).t();
  EXPECT_NE(msg([&] { c.send(strided, next(r, n), Group::World); }).find("must be defined and contiguous"), std::string::npos);
}

TEST(CommP2P, MicroCasesReceiveWhatWasSent) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "the p2p benchmarks pair ranks";
  Communicator async(MPI_COMM_WORLD, 0, true), blocking(MPI_COMM_WORLD, 0, false);
  for (const auto& [name, doc] : sb::micro::p2p_benches())
    for (const char* impl : {"mpi", "ours", "ours-async"})
      for (std::int64_t bytes : {1, 8, 65536, 1 << 20}) {
        sb::micro::P2PConfig cfg;
        cfg.bench = sb::micro::p2p_from_name(name);
        cfg.impl = impl;
        cfg.bytes = bytes;
        cfg.window = 8;
        sb::micro::P2PCase pc(cfg, MPI_COMM_WORLD,
                              std::string(impl) == "ours-async" ? &async : &blocking);
        for (int i = 0; i < 3; ++i) pc.run();
        EXPECT_EQ(pc.check(), 0) << name << " " << impl << " " << bytes;
        EXPECT_EQ(pc.peer(), world_rank() ^ 1);
      }
}

}  // namespace
