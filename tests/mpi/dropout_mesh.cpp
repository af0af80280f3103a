// Dropout under every parallel dimension equals one process (models/dropout.h: a mask is a
// function of the global token, not of the rank holding it): 4 steps of gpt2-tiny-8l and
// bert-tiny-8l with dropout 0.1 in fp32, on dp N (full_shard, 2 micro-batches), tp 2 with
// sequence parallelism x dp N/2, and pp 2 (1f1b, 2 micro-batches) x dp N/2, record the losses
// of a one-process engine on the global batch within 1e-5 relative; that run's losses differ
// from the run without dropout (dropout is on). Even worlds for tp and pp.
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/parallel/tp_layers.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

constexpr int kSteps = 4;
constexpr std::int64_t kB = 24, kT = 16;  // divides over 2, 3 and 4 ranks x 2 micro-batches
constexpr double kP = 0.1;

std::vector<double> one_process(const std::string& preset, double p) {
  Communicator self(MPI_COMM_SELF, 1);
  auto model = sb::models::make_model(preset);
  model->set_dropout({p, p, 5});
  sb::fsdp::Engine e(*model, self, engine_config("no_shard", kSteps),
                     sb::models::init_params(model->units(), 1234));
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    g.dropout_step = s;
    losses.push_back(e.step({g}, sb::fsdp::loss_terms(g)).loss);
  }
  return losses;
}

struct Case {
  int tp = 1, pp = 1, micro = 1;
  bool sp = false;
};

std::vector<double> meshed(const std::string& preset, const Case& c) {
  sb::Mesh mesh;
  mesh.tp = c.tp, mesh.pp = c.pp, mesh.dp_shard = world_size() / (c.tp * c.pp);
  Communicator comm(MPI_COMM_WORLD, mesh);
  auto model = sb::models::make_model(preset);
  if (c.tp > 1) model->set_tensor_parallel(sb::parallel::tensor_parallel(comm, c.sp));
  if (c.pp > 1) model->set_pipeline(c.pp, 1, comm.rank(Group::Pp));
  model->set_dropout({kP, kP, 5});
  auto cfg = engine_config("full_shard", kSteps);
  cfg.pp_schedule = "1f1b";
  sb::fsdp::Engine e(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    g.dropout_step = s;
    const auto mine = slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size());
    std::vector<sb::models::Batch> micro;
    for (int m = 0; m < c.micro; ++m) micro.push_back(slice(mine, m, c.micro));
    losses.push_back(e.step(micro, sb::fsdp::loss_terms(g)).loss);
  }
  return losses;
}

TEST(DropoutMesh, EveryDimensionEqualsOneProcess) {
  const int n = world_size();
  for (const std::string preset : {"gpt2-tiny-8l", "bert-tiny-8l"}) {
    const auto want = one_process(preset, kP), plain = one_process(preset, 0.0);
    double moved = 0;
    for (int s = 0; s < kSteps; ++s) moved = std::max(moved, std::abs(want[s] - plain[s]));
    EXPECT_GT(moved, 1e-3) << preset << ": dropout changed nothing";
    std::vector<std::pair<std::string, Case>> cases = {{"dp", {1, 1, 2, false}}};
    if (n % 2 == 0) {
      cases.push_back({"tp 2 + sequence parallel", {2, 1, 1, true}});
      cases.push_back({"pp 2", {1, 2, 2, false}});
    }
    for (const auto& [name, c] : cases) {
      const auto got = meshed(preset, c);
      for (int s = 0; s < kSteps; ++s)
        EXPECT_NEAR(got[s], want[s], 1e-5 * std::abs(want[s])) << preset << " " << name << " step " << s;
    }
  }
}

}  // namespace
