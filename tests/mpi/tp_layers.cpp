// Megatron's tensor-parallel layers (workloads/parallel/tp_layers.h) over a mesh with tp =
// every rank (and, at 4 ranks, tp 2 x dp_shard 2): a column-parallel projection, GELU and a
// row-parallel projection (the MLP's shape) equal the one-process MLP on the full weights in
// fp32: the output on every rank, the input's gradient, and each rank's weight and bias
// gradients equal its block of the full gradients; one all-reduce forward ("tp_act") and one
// backward ("tp_grad"), each of the output's bytes exactly. Splits that do not divide fail
// naming the fix.
#include <torch/types.h>
#include <ATen/ATen.h>

#include <mutex>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/communicator.h"
#include "workloads/parallel/tp_layers.h"

using sb::comm::Communicator;
using sb::comm::Group;
using sbtest::world_rank;
using sbtest::world_size;

namespace {

struct Full {
  torch::Tensor x, w1, b1, w2, b2, probe;
};

// The same full tensors on every rank (one seed).
Full make_full(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t F) {
  torch::manual_seed(7);
  Full f;
  f.x = torch::randn({B, T, H});
  f.w1 = torch::randn({F, H}) * 0.2;
  f.b1 = torch::randn({F}) * 0.1;
  f.w2 = torch::randn({H, F}) * 0.2;
  f.b2 = torch::randn({H}) * 0.1;
  f.probe = torch::randn({B, T, H});  // loss = sum(y * probe): a gradient with every entry
  return f;
}

torch::Tensor leaf(const torch::Tensor& t) { return t.clone().set_requires_grad(true); }

void check_mlp(const sb::Mesh& mesh) {
  const std::int64_t B = 2, T = 5, H = 12, F = 48;  // H and F divide by 2, 3 and 4
  Communicator c(MPI_COMM_WORLD, mesh);
  std::mutex m;
  std::vector<sb::CommEvent> events;
  c.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(m);
    events.push_back(e);
  }, MPI_Wtime());
  const Full f = make_full(B, T, H, F);
  // The reference: the full MLP in one process.
  auto x = leaf(f.x), w1 = leaf(f.w1), b1 = leaf(f.b1), w2 = leaf(f.w2), b2 = leaf(f.b2);
  auto ref = at::linear(torch::gelu(at::linear(x, w1, b1)), w2, b2);
  (ref * f.probe).sum().backward();
  // Tensor parallel: this rank's blocks.
  const int r = c.rank(Group::Tp), n = c.size(Group::Tp);
  auto xt = leaf(f.x);
  auto w1r = leaf(sb::parallel::column_shard(f.w1, r, n));
  auto b1r = leaf(sb::parallel::column_shard(f.b1, r, n));
  auto w2r = leaf(sb::parallel::row_shard(f.w2, r, n));
  auto b2t = leaf(f.b2);
  auto h = torch::gelu(sb::parallel::column_parallel(xt, w1r, b1r, c));
  auto y = sb::parallel::row_parallel(h, w2r, b2t, c);
  (y * f.probe).sum().backward();
  const auto tol = [](const torch::Tensor& a, const torch::Tensor& b) {
    return torch::allclose(a, b, 1e-5, 1e-5);
  };
  const std::string at = mesh.str();
  EXPECT_TRUE(tol(y, ref)) << at << " max diff " << (y - ref).abs().max().item<double>();
  EXPECT_TRUE(tol(xt.grad(), x.grad())) << at;
  EXPECT_TRUE(tol(w1r.grad(), sb::parallel::column_shard(w1.grad(), r, n))) << at;
  EXPECT_TRUE(tol(b1r.grad(), sb::parallel::column_shard(b1.grad(), r, n))) << at;
  EXPECT_TRUE(tol(w2r.grad(), sb::parallel::row_shard(w2.grad(), r, n))) << at;
  EXPECT_TRUE(tol(b2t.grad(), b2.grad())) << at;
  // One all-reduce of the output forward, one of the input's gradient backward.
  const std::uint64_t bytes = B * T * H * 4;
  const std::uint64_t wire = bytes * 2 * (n - 1) / n;
  ASSERT_EQ(events.size(), n > 1 ? 2u : 0u) << at;
  if (n > 1) {
    EXPECT_EQ(events[0].kind, "tp_act");
    EXPECT_EQ(events[1].kind, "tp_grad");
    for (const auto& e : events) {
      EXPECT_EQ(e.op, "all_reduce");
      EXPECT_EQ(e.dim, "tp");
      EXPECT_EQ(e.wire_bytes, wire) << at;
      EXPECT_EQ(e.logical_bytes, wire) << at;
    }
  }
}

TEST(TpLayers, MlpEqualsTheOneProcessMlp) {
  sb::Mesh all;
  all.tp = world_size();
  check_mlp(all);
  if (world_size() == 4) {
    sb::Mesh mixed;
    mixed.tp = 2, mixed.dp_shard = 2;
    check_mlp(mixed);
  }
}

TEST(TpLayers, UnevenSplitNamesTheFix) {
  try {
    sb::parallel::column_shard(torch::zeros({10, 4}), 0, 4);
    ADD_FAILURE() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide by tp"), std::string::npos) << e.what();
  }
}

}  // namespace
