// A newcomer adds a sharding strategy by adding one file: this one, and nothing else. It
// registers "zero2_replicated_params" (DeepSpeed's ZeRO-2: parameters replicated, each unit's
// gradient reduce-scattered, the optimizer updating this rank's shard of the replica, the
// updated shards all-gathered back after the step) with the record of what it does. From the
// record alone the rest takes it: `plan` (the name check, the compression validator, the train
// task's memory model per term), and a training point run by the registered train task, whose
// losses equal the one-process reference trainer's and whose memory equals the prediction.
#include "harness/spec/plan.h"
#include "harness/spec/suite.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "tests/mpi/train_point.h"
#include "workloads/data/training_source.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/train/reference_trainer.h"
#include "workloads/train/train_workload.h"

namespace {

using namespace sbtest;
using sb::comm::CollectiveKind;
using sb::fsdp::Collectives;
using sb::fsdp::Extent;
using sb::fsdp::MeshDim;
using sb::fsdp::Payload;
using sb::fsdp::StepPhase;

const char* kName = "zero2_replicated_params";

// ---- the strategy: all a newcomer writes -------------------------------------------------
class Zero2ReplicatedParams final : public sb::fsdp::Strategy {
 public:
  // g: the unit's full gradient (padded) -> out: this rank's summed shard (S).
  void reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                   const torch::Tensor& out, std::vector<sb::comm::Request>& pending) const override {
    pending.push_back(c.reduce_scatter_grads(key, g, out, sb::comm::Group::World));
  }
  // The fp32 replica gets every rank's updated shard (a copy of our own: MPI forbids overlap).
  void after_update(Collectives& c, const torch::Tensor& master,
                    const sb::fsdp::ShardRange& r) const override {
    auto mine = master.narrow(0, r.offset, r.size).clone();  // (S) fp32
    c.all_gather_params_now(mine, master, sb::comm::Group::World);
  }
};

const sb::Registrar reg([] {
  sb::fsdp::StrategyInfo info;
  info.layout.grads_sharded = info.layout.optim_sharded = true;  // parameters replicated
  info.collectives = {{CollectiveKind::GradReduceScatter, StepPhase::backward, MeshDim::dp_shard,
                       Extent::unit, Payload::grads},
                      {CollectiveKind::ParamAllGather, StepPhase::after_optimizer,
                       MeshDim::dp_shard, Extent::unit, Payload::master}};
  info.make = [] { return std::make_unique<Zero2ReplicatedParams>(); };
  sb::fsdp::register_strategy(kName, "test: ZeRO-2 with replicated parameters", std::move(info));
});

// ---- the checks --------------------------------------------------------------------------
std::string suite_text() {
  return fmt::format(R"([suite]
name = "new-strategy"
[base]
task = "train"
model = "gpt2-tiny"
dtype = "fp32"
strategy = "{}"
world = {}
threads = 1
batch = 12
seq = 16
steps = 6
warmup = 0
lr = 3e-3
lr_warmup = 2
eval_batches = 1
peak_gflops = 1.0
)",
                     kName, world_size());
}

TEST(NewStrategy, PlanPrintsItsMemoryModel) {
  const sb::Suite s = sb::load_suite_text(suite_text(), "new_strategy.toml");  // validated
  ASSERT_EQ(s.points.size(), 1u);
  const sb::Point& p = s.points[0];
  auto model = sb::models::make_model("gpt2-tiny");
  // What the registered train task gives the memory model for this point.
  const auto want =
      sb::fsdp::predict_memory(sb::train::memory_inputs(p, *model, torch::kFloat32, 0));
  // Its layout, as the memory model reads it: the fp32 replica of every (padded) unit, the
  // reduced gradient and Adam's moments of this rank's shard only.
  std::uint64_t param = 0, shard = 0;
  for (const auto& u : model->units()) {
    const auto r = sb::fsdp::shard_range(u.numel(), world_size(), 0);
    param += 4 * static_cast<std::uint64_t>(r.padded);
    shard += static_cast<std::uint64_t>(r.size);
  }
  EXPECT_EQ(want.param, param);
  EXPECT_EQ(want.grad, 4 * shard);
  EXPECT_EQ(want.optim, 8 * shard);
  EXPECT_EQ(want.model_state, want.param + want.grad + want.optim);
  const std::string plan = sb::format_plan(s);
  EXPECT_NE(plan.find(sb::format_bytes(static_cast<double>(want.model_state))), std::string::npos)
      << plan;
  const std::string memory = sb::format_memory(s);
  for (const auto& t : want.terms()) EXPECT_NE(memory.find(t.name), std::string::npos) << memory;
  for (std::uint64_t b : {want.param, want.grad, want.optim, want.activation_layers})
    EXPECT_NE(memory.find(sb::format_bytes(static_cast<double>(b))), std::string::npos)
        << memory << "\nmissing " << b;
  EXPECT_GT(want.activation_layers, 0u);
  if (world_rank() == 0) std::printf("%s%s", plan.c_str(), memory.c_str());
}

TEST(NewStrategy, TrainingPointMatchesTheOneProcessTrainerAndItsMemoryModel) {
  const sb::Suite s = sb::load_suite_text(suite_text(), "new_strategy.toml");
  const sb::Point& p = s.points[0];
  sb::Recorder rec;  // the point, run by the registered train task on every rank
  run_train_point(p, rec);

  // The one-process trainer on the same global batches, weights and AdamW.
  ASSERT_EQ(rec.steps().size(), static_cast<std::size_t>(p.get_int("steps")));
  const std::vector<double> ref = reference_losses(p, rec);
  for (const auto& st : rec.steps()) {
    const double want = ref.at(static_cast<std::size_t>(st.step));
    EXPECT_NEAR(st.loss, want, 1e-5 * std::abs(want)) << kName << " step " << st.step;
  }
  EXPECT_LT(rec.steps().back().loss, rec.steps().front().loss) << "the point did not train";

  // Its memory: what the engine measured equals the memory model's prediction (recorded
  // beside it) and plan's estimate.
  ASSERT_EQ(rec.memories().size(), 1u);
  const sb::RankMemory& m = rec.memories()[0];
  EXPECT_EQ(m.param_bytes, m.predicted_param_bytes);
  EXPECT_EQ(m.grad_bytes, m.predicted_grad_bytes);
  EXPECT_EQ(m.optim_bytes, m.predicted_optim_bytes);
  EXPECT_EQ(m.compression_bytes, m.predicted_compression_bytes);
  EXPECT_EQ(m.model_state_bytes, m.predicted_model_state_bytes);
  EXPECT_GT(m.predicted_activation_layers_bytes, 0u);
  EXPECT_EQ(static_cast<double>(m.model_state_bytes),
            sb::find_task("train")->model_state_bytes_per_rank(p));
  EXPECT_LT(m.grad_bytes, m.param_bytes) << "gradients are sharded, parameters are not";
}

}  // namespace
