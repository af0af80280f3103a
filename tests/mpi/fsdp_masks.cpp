// Pruning masks under FSDP (gradual pruning in the train task): under every strategy at 2-4
// ranks, training with masks set on the engine (Engine::set_masks) keeps the masked weights
// exactly zero, and the losses and final parameters match the one-process trainer with the
// same masks (within 1e-5 relative and 2e-5, as tests/mpi/fsdp_parity.cpp).
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/prune/pruner.h"
#include "workloads/train/reference_trainer.h"

using namespace sbtest;
using sb::comm::Communicator;

namespace {

constexpr int kSteps = 6;
constexpr std::int64_t kB = 12, kT = 16;

// Magnitude pruning of the initial weights to 60%, as 0/1 masks (1 on every other parameter).
sb::models::UnitTensors masks_of(const sb::models::Model& m) {
  const auto w = sb::models::init_params(m.units(), 1234);
  const auto p = sb::prune::prune("magnitude", m, w, {0.6, "global"});
  sb::models::UnitTensors out;
  for (std::size_t u = 0; u < w.size(); ++u) {
    auto& d = out.emplace_back();
    for (std::size_t i = 0; i < w[u].size(); ++i)
      d.push_back(sb::prune::is_prunable(m.units()[u].params[i].name, m.units()[u].params[i].shape)
                      ? (p.weights[u][i] != 0).to(torch::kFloat)
                      : torch::ones_like(w[u][i]));
  }
  return out;
}

class MaskParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskParity, MaskedTrainingMatchesOneProcessAndStaysPruned) {
  const std::string strategy = GetParam();
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = sb::models::make_model(preset);
    const auto masks = masks_of(*model);
    const int sg = replicates(strategy) && world_size() % 2 == 0 ? world_size() / 2 : 0;
    Communicator comm(MPI_COMM_WORLD, sg);
    sb::fsdp::Engine e(*model, comm, engine_config(strategy, kSteps), sb::models::init_params(model->units(), 1234));
    e.set_masks(masks);
    sb::train::TrainConfig tc;
    tc.adamw = test_adamw(kSteps);
    tc.seed = 1234;
    sb::train::ReferenceTrainer ref(*model, tc);
    ref.set_masks(masks);
    for (int s = 0; s < kSteps; ++s) {
      auto g = global_batch(model->config(), kB, kT, s);
      const double got = e.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g)).loss;
      const double want = ref.step({g}).loss;
      EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << strategy << " " << preset << " step " << s;
    }
    const auto full = e.full_params();
    EXPECT_LT(max_param_diff(full, ref.params()), 2e-5) << strategy << " " << preset;
    std::int64_t masked = 0;
    for (std::size_t u = 0; u < full.size(); ++u)
      for (std::size_t i = 0; i < full[u].size(); ++i) {
        auto off = masks[u][i] == 0;
        masked += off.sum().item<std::int64_t>();
        EXPECT_TRUE((full[u][i].masked_select(off) == 0).all().item<bool>()) << strategy << " " << preset;
      }
    EXPECT_GT(masked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, MaskParity,
                         ::testing::Values("no_shard", "zero1", "shard_grad_op", "full_shard", "hybrid_shard"));

}  // namespace
