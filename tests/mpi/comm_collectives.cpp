// The tensor communicator against values computed by hand: every collective on every group,
// blocking and non-blocking, bf16/fp16 sums, trace events with exact byte counts, and the
// shard/replica group layout.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include "tests/mpi/mpi_main.h"
#include "harness/core/check.h"
#include "workloads/comm/communicator.h"

using sb::comm::Communicator;
using sb::comm::Group;

namespace {

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
// Two emulated nodes when the world is even, else one.
int two_nodes() { return world_size() % 2 == 0 ? world_size() / 2 : world_size(); }

}  // namespace

TEST(Communicator, GroupLayout) {
  Communicator c(MPI_COMM_WORLD, two_nodes());
  const int n = world_size(), r = world_rank(), s = two_nodes();
  EXPECT_EQ(c.size(Group::World), n);
  EXPECT_EQ(c.size(Group::Shard), s);
  EXPECT_EQ(c.size(Group::Replica), n / s);
  EXPECT_EQ(c.rank(Group::Shard), r % s);
  EXPECT_EQ(c.rank(Group::Replica), r / s);
  // Every rank of my replica group holds the same shard rank: gather and compare.
  auto t = torch::full({1}, static_cast<std::int64_t>(c.rank(Group::Shard)), torch::kInt64);
  auto all = torch::empty({c.size(Group::Replica)}, torch::kInt64);
  c.all_gather(t, all, Group::Replica);
  EXPECT_TRUE(torch::all(all == c.rank(Group::Shard)).item<bool>());
}

TEST(Communicator, AllGatherInRankOrder) {
  Communicator c(MPI_COMM_WORLD, two_nodes());
  for (Group g : {Group::World, Group::Shard, Group::Replica}) {
    const int n = c.size(g), r = c.rank(g);
    auto shard = torch::arange(3, torch::kFloat32) + 10.0 * r;  // (3)
    auto full = torch::empty({3 * n}, torch::kFloat32);         // (3n)
    c.all_gather(shard, full, g);
    auto expect = (torch::arange(3, torch::kFloat32).repeat({n}) +
                   10.0 * torch::arange(n, torch::kFloat32).repeat_interleave(3));
    EXPECT_TRUE(torch::equal(full, expect)) << sb::comm::group_name(g);
  }
}

TEST(Communicator, ReduceScatterAllReduceBroadcastAllToAll) {
  Communicator c(MPI_COMM_WORLD, 0);
  const int n = c.size(), r = c.rank();
  // reduce_scatter: rank r contributes (r+1) * [0..2n); block r of the sum is kept.
  auto full = (torch::arange(2 * n, torch::kFloat32) * (r + 1)).contiguous();  // (2n)
  auto shard = torch::empty({2}, torch::kFloat32);
  c.reduce_scatter(full, shard, Group::World);
  const float tri = n * (n + 1) / 2.0f;
  auto expect = torch::arange(2 * r, 2 * r + 2, torch::kFloat32) * tri;
  EXPECT_TRUE(torch::equal(shard, expect));
  // all_reduce sum and max in float64 and int64
  auto a = torch::full({4}, static_cast<double>(r), torch::kFloat64);
  c.all_reduce(a, Group::World);
  EXPECT_DOUBLE_EQ(a[0].item<double>(), (n - 1) * n / 2.0);
  auto m = torch::full({2}, static_cast<std::int64_t>(r * 7), torch::kInt64);
  c.all_reduce(m, Group::World, "other", sb::comm::ReduceOp::Max);
  EXPECT_EQ(m[1].item<std::int64_t>(), 7 * (n - 1));
  // broadcast from the last rank
  auto b = torch::full({5}, static_cast<float>(r), torch::kFloat32);
  c.broadcast(b, n - 1, Group::World);
  EXPECT_TRUE(torch::all(b == static_cast<float>(n - 1)).item<bool>());
  // all_to_all: block j of in = 100*r + j; block j of out = 100*j + r
  auto in = (torch::arange(n, torch::kInt32) + 100 * r).contiguous();
  auto out = torch::empty({n}, torch::kInt32);
  c.all_to_all(in, out, Group::World);
  EXPECT_TRUE(torch::equal(out, torch::arange(n, torch::kInt32) * 100 + r));
}

TEST(Communicator, HalfPrecisionSums) {
  Communicator c(MPI_COMM_WORLD, 0);
  const int n = c.size();
  for (auto dt : {torch::kBFloat16, torch::kFloat16}) {
    auto t = torch::full({8}, 0.5, dt);  // sums of halves are exact in both formats
    c.all_reduce(t, Group::World);
    EXPECT_EQ(t.scalar_type(), dt);
    EXPECT_TRUE(torch::all(t.to(torch::kFloat32) == 0.5f * n).item<bool>());
    auto full = torch::ones({2 * n}, dt), shard = torch::empty({2}, dt);
    c.reduce_scatter(full, shard, Group::World);
    EXPECT_TRUE(torch::all(shard.to(torch::kFloat32) == static_cast<float>(n)).item<bool>());
  }
  // Max is refused on half tensors, with the fix in the message.
  auto h = torch::ones({2}, torch::kBFloat16);
  try {
    c.all_reduce(h, Group::World, "other", sb::comm::ReduceOp::Max);
    ADD_FAILURE() << "expected an error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("only sums are defined on BFloat16 tensors"),
              std::string::npos) << e.what();
  }
}

const sb::comm::ProgressMode kAllModes[] = {sb::comm::ProgressMode::Thread, sb::comm::ProgressMode::Poll,
                                        sb::comm::ProgressMode::Inline};

// A request that reads what an earlier one writes sees the written data in every mode (the
// communication thread runs requests one after another; inline waits for the earlier one):
// reduce-scatter into a shard, then all-reduce that shard twice.
TEST(Communicator, ARequestReadsWhatAnEarlierOneWrote) {
  for (auto mode : kAllModes) {
    SCOPED_TRACE(sb::comm::progress_name(mode));
    Communicator c(MPI_COMM_WORLD, 0);
    c.set_progress(mode);
    const int n = c.size(), r = c.rank();
    auto full = torch::full({256 * n}, static_cast<float>(r + 1), torch::kFloat32);
    auto shard = torch::zeros({256}, torch::kFloat32);
    auto r1 = c.reduce_scatter_async(full, shard, Group::World);  // shard = n(n+1)/2
    auto r2 = c.all_reduce_async(shard, Group::World);            // shard = n * n(n+1)/2
    auto r3 = c.all_reduce_async(shard, Group::World);            // shard = n^2 * n(n+1)/2
    r3.wait();
    r2.wait();
    r1.wait();
    const float want = static_cast<float>(n * n) * n * (n + 1) / 2.0f;
    EXPECT_TRUE(torch::all(shard == want).item<bool>()) << shard[0].item<float>() << " vs " << want;
  }
}

// The non-blocking reduce-scatter (an all-to-all, then the received blocks summed locally in
// pieces of 1M elements) equals the one-shot sum over ranks bit for bit: bf16 summed in fp32 and
// rounded once, fp32 summed in rank order, on a shard of 2^20 + 3 elements (two pieces, the
// last of 3). Every rank regenerates every rank's input from its seed.
TEST(Communicator, ReduceScatterSumsInPiecesAsInOne) {
  const std::int64_t s = (std::int64_t{1} << 20) + 3;
  for (auto mode : {sb::comm::ProgressMode::Poll, sb::comm::ProgressMode::Inline}) {
    for (auto dt : {torch::kBFloat16, torch::kFloat32}) {
      SCOPED_TRACE(std::string(sb::comm::progress_name(mode)) + (dt == torch::kFloat32 ? " fp32" : " bf16"));
      Communicator c(MPI_COMM_WORLD, 0);
      c.set_progress(mode);
      const int n = c.size(), r = c.rank();
      auto input = [&](int q) {
        auto g = at::make_generator<at::CPUGeneratorImpl>(1000 + q);
        return torch::randn({n * s}, g, torch::TensorOptions().dtype(torch::kFloat32)).to(dt);
      };
      auto shard = torch::empty({s}, dt);
      c.reduce_scatter_async(input(r), shard, Group::World).wait();
      std::vector<torch::Tensor> blocks;
      for (int q = 0; q < n; ++q) blocks.push_back(input(q).narrow(0, r * s, s));
      const auto b = torch::stack(blocks);  // row q: rank q's block for this rank
      const auto want = dt == torch::kFloat32 ? b.sum(0) : b.sum(0, false, torch::kFloat).to(dt);
      EXPECT_TRUE(torch::equal(shard, want));
    }
  }
}

// Every progress mode (thread, poll, inline): many requests in flight, a blocking collective
// issued among them, waited in reverse order; results, issue order and trace events.
TEST(Communicator, NonBlockingKeepsIssueOrderAndTraces) {
  for (auto mode : kAllModes) {
    SCOPED_TRACE(sb::comm::progress_name(mode));
    Communicator c(MPI_COMM_WORLD, 0);
    c.set_progress(mode);
    const int n = c.size(), r = c.rank();
    std::vector<sb::CommEvent> events;
    c.set_trace_hook([&](const sb::CommEvent& e) { events.push_back(e); }, MPI_Wtime());
    c.set_step(7);
    std::vector<torch::Tensor> shards, fulls;
    std::vector<sb::comm::Request> reqs;
    auto sum = torch::full({5}, static_cast<double>(r + 1), torch::kFloat64);
    for (int i = 0; i < 16; ++i) {
      shards.push_back(torch::full({1000}, static_cast<float>(i * n + r), torch::kFloat32));
      fulls.push_back(torch::empty({1000 * n}, torch::kFloat32));
      reqs.push_back(c.all_gather_async(shards.back(), fulls.back(), Group::World, "param_all_gather"));
      if (i == 7) c.all_reduce(sum, Group::World);  // blocking, with 8 requests outstanding
      c.progress();
    }
    for (int i = 15; i >= 0; --i) reqs[i].wait();
    EXPECT_EQ(sum[4].item<double>(), n * (n + 1) / 2.0);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < n; ++j)
        EXPECT_EQ(fulls[i][j * 1000 + 999].item<float>(), static_cast<float>(i * n + j));
    ASSERT_EQ(events.size(), 17u);
    for (const auto& e : events) {
      if (e.op == "all_reduce") continue;
      EXPECT_EQ(e.op, "all_gather");
      EXPECT_EQ(e.group, "world");
      EXPECT_EQ(e.kind, "param_all_gather");
      EXPECT_EQ(e.step, 7);
      EXPECT_EQ(e.rank, r);
      EXPECT_EQ(e.logical_bytes, 4000u * (n - 1));  // fp32: the uncompressed run itself
      EXPECT_EQ(e.wire_bytes, 4000u * (n - 1));
      EXPECT_GE(e.duration_s, 0.0);
    }
    EXPECT_GE(c.exposed_s(), 0.0);
    EXPECT_TRUE(c.async()) << "MPI_THREAD_MULTIPLE was requested; collectives should be async";
  }
  EXPECT_THROW(sb::comm::progress_from_name("spin"), sb::Error);
}

TEST(Communicator, RefusesBadShardGroupAndSizes) {
  const int n = world_size();
  try {
    Communicator bad(MPI_COMM_WORLD, n + 1);
    ADD_FAILURE() << "expected an error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("shard_group {} must be >= 1 and divide "
                                                     "the world size {}", n + 1, n)),
              std::string::npos) << e.what();
  }
  Communicator c(MPI_COMM_WORLD, 0);
  try {  // the size check runs before anything is sent, on every rank alike
    c.all_gather(torch::ones({3}), torch::empty({3 * n + 1}), Group::World);
    ADD_FAILURE() << "expected an error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_gather: full has"), std::string::npos) << e.what();
  }
}

TEST(Communicator, WireBytesFactors) {
  EXPECT_EQ(sb::comm::wire_bytes("all_reduce", 1000, 4), 1500u);
  EXPECT_EQ(sb::comm::wire_bytes("all_gather", 1000, 4), 750u);
  EXPECT_EQ(sb::comm::wire_bytes("reduce_scatter", 900, 3), 600u);
  EXPECT_EQ(sb::comm::wire_bytes("broadcast", 1000, 4), 1000u);
  EXPECT_EQ(sb::comm::wire_bytes("all_reduce", 1000, 1), 0u);
}
