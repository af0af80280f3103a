// GPU code paths of the FSDP engine and the nccl backend (label gpu), on one rank (an MPI
// singleton; several GPUs are exercised by jobscripts/gpu-check.sh): training on
// device = "cuda" gives the host engine's losses and parameters (fp32; cuBLAS and MKL add in
// other orders: within 1e-4), bf16 training stays near fp32, and every collective on the nccl
// backend equals the mpi backend's result on the same device tensors, inside a step (no host
// synchronisation needed to see it) and in flight under every progress mode; host scalars go
// to mpi, gloo refuses device tensors. Each test skips,
// saying why, in a CPU build or without a GPU.
#include <gtest/gtest.h>

#include "tests/gpu/require_gpu.h"
#include <mpi.h>

#include "tests/mpi/fsdp_testlib.h"
#include "workloads/comm/backend.h"
#include "workloads/comm/communicator.h"
#include "workloads/data/batches.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/device.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

using sb::comm::Communicator;
using sb::comm::Group;
using namespace sb::models;

namespace {

struct MpiEnv : ::testing::Environment {
  void SetUp() override {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  }
  void TearDown() override { MPI_Finalize(); }
};
[[maybe_unused]] auto* const kEnv = ::testing::AddGlobalTestEnvironment(new MpiEnv);

constexpr std::int64_t kB = 4, kT = 32;
constexpr int kSteps = 4;

// Losses and final parameters of kSteps steps of `strategy` on device d.
sbtest::RunResult train(const std::string& strategy, torch::Device d, torch::ScalarType dtype,
                        const std::string& backend) {
  auto model = make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0, true, {backend, ""});
  auto cfg = sbtest::engine_config(strategy, kSteps);
  cfg.device = d;
  cfg.param_dtype = dtype;
  sb::fsdp::Engine e(*model, comm, cfg, init_params(model->units(), 1234));
  sbtest::RunResult r;
  for (int s = 0; s < kSteps; ++s) {
    auto g = sbtest::global_batch(model->config(), kB, kT, s);
    auto st = e.step({sb::data::to_device(g, d)}, sb::fsdp::loss_terms(g));
    r.losses.push_back(st.loss);
  }
  r.params = e.full_params();
  return r;
}

}  // namespace

TEST(GpuTrain, EveryStrategyMatchesTheHostEngine) {
  SB_REQUIRE_GPU();
  const torch::Device gpu = resolve_device("cuda", 0);
  for (const std::string s : {"no_shard", "zero1", "shard_grad_op", "full_shard"}) {
    const auto want = train(s, torch::kCPU, torch::kFloat32, "mpi");
    for (const std::string backend : {"mpi", "nccl"}) {
      const auto got = train(s, gpu, torch::kFloat32, backend);
      for (int i = 0; i < kSteps; ++i)
        EXPECT_NEAR(got.losses[i], want.losses[i], 1e-4 * std::abs(want.losses[i]))
            << s << "/" << backend << " step " << i;
      EXPECT_LT(sbtest::max_param_diff(got.params, want.params), 1e-4) << s << "/" << backend;
    }
  }
}

TEST(GpuTrain, Bf16StaysNearFp32AndRecordsDeviceMemory) {
  SB_REQUIRE_GPU();
  const torch::Device gpu = resolve_device("cuda", 0);
  const auto fp32 = train("full_shard", gpu, torch::kFloat32, "nccl");
  const auto bf16 = train("full_shard", gpu, torch::kBFloat16, "nccl");
  for (int i = 0; i < kSteps; ++i)
    EXPECT_NEAR(bf16.losses[i], fp32.losses[i], 2e-2 * std::abs(fp32.losses[i])) << "step " << i;
  EXPECT_GT(device_peak_allocated_bytes(gpu), 0);
}

TEST(GpuNccl, EveryCollectiveEqualsMpiOnDeviceTensors) {
  SB_REQUIRE_GPU();
  const torch::Device gpu = resolve_device("cuda", 0);
  Communicator mpi(MPI_COMM_WORLD, 0), nccl(MPI_COMM_WORLD, 0, true, {"nccl", ""});
  for (int mode = 0; mode < 3; ++mode) {
    nccl.set_progress(mode == 0   ? sb::comm::ProgressMode::Thread
                      : mode == 1 ? sb::comm::ProgressMode::Poll
                                  : sb::comm::ProgressMode::Inline);
    for (auto dt : {torch::kFloat32, torch::kBFloat16, torch::kInt64}) {
      const int n = mpi.size();
      auto x = (torch::arange(1000 * n, torch::kInt64) % 8).to(dt).to(gpu);
      auto a_g = torch::empty({1000 * n * n}, x.options()), b_g = a_g.clone();
      mpi.all_gather(x, a_g, Group::World);
      auto req = nccl.all_gather_async(x, b_g, Group::World);
      req.wait();  // the compute stream waits for NCCL's event: equal() below sees the result
      EXPECT_TRUE(torch::equal(a_g, b_g)) << "all_gather " << c10::toString(dt);
      auto a_r = x.clone(), b_r = x.clone();
      mpi.all_reduce(a_r, Group::World);
      nccl.all_reduce(b_r, Group::World);
      EXPECT_TRUE(torch::equal(a_r, b_r)) << "all_reduce " << c10::toString(dt);
      auto a_s = torch::empty({1000}, x.options()), b_s = a_s.clone();
      mpi.reduce_scatter(x, a_s, Group::World);
      nccl.reduce_scatter(x, b_s, Group::World);
      EXPECT_TRUE(torch::equal(a_s, b_s)) << "reduce_scatter " << c10::toString(dt);
      auto a_b = x.clone(), b_b = x.clone();
      mpi.broadcast(a_b, 0, Group::World);
      nccl.broadcast(b_b, 0, Group::World);
      EXPECT_TRUE(torch::equal(a_b, b_b)) << "broadcast " << c10::toString(dt);
      auto a_t = torch::empty_like(x), b_t = torch::empty_like(x);
      mpi.all_to_all(x, a_t, Group::World);
      nccl.all_to_all(x, b_t, Group::World);
      EXPECT_TRUE(torch::equal(a_t, b_t)) << "all_to_all " << c10::toString(dt);
    }
  }
}

TEST(GpuNccl, HostTensorsRunOnMpiAndGlooRefusesDeviceTensors) {
  SB_REQUIRE_GPU();
  const torch::Device gpu = resolve_device("cuda", 0);
  // A GPU run's loss and norm scalars live on the host: nccl hands them to mpi.
  Communicator nccl(MPI_COMM_WORLD, 0, true, {"nccl", ""});
  std::vector<sb::CommEvent> ev;
  nccl.set_trace_hook([&](const sb::CommEvent& e) { ev.push_back(e); }, MPI_Wtime());
  auto t = torch::ones({4});
  nccl.all_reduce(t, Group::World);
  auto d = torch::ones({4}, gpu);
  nccl.all_reduce(d, Group::World);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].backend, "mpi");
  EXPECT_EQ(ev[1].backend, "nccl");
  if (sb::comm::find_backend("gloo")->available) {
    Communicator gloo(MPI_COMM_WORLD, 0, true, {"gloo", ""});
    const auto err = sbtest::error_of([&] { gloo.all_reduce(d, Group::World); });
    EXPECT_NE(err.find("gloo runs collectives on host tensors"), std::string::npos) << err;
  }
}
