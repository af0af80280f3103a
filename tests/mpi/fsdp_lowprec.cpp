// Low-precision training (docs/FSDP.md "Mixed precision"): every strategy at 2, 3, 4 ranks in
// bf16 and in fp16 (with dynamic loss scaling) against the one-process engine in the same
// dtypes on the whole global batch; fp16 loss scaling skips a step whose gradients overflow
// (on every rank, parameters untouched, the scale halved) and recovers; the scale doubles
// after its growth interval; the scaler's state survives a checkpoint.
#include <torch/types.h>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"

using sb::comm::Communicator;
using namespace sbtest;

namespace {

constexpr std::int64_t kB = 12, kT = 16;
constexpr int kSteps = 4;

int two_nodes() { return world_size() % 2 == 0 ? world_size() / 2 : world_size(); }

sb::fsdp::EngineConfig lowprec(const std::string& strategy, torch::ScalarType dt) {
  auto c = engine_config(strategy, kSteps);
  c.param_dtype = dt;
  c.reduce_dtype = dt;
  c.loss_scaling = dt == torch::kFloat16;
  c.loss_scale_init = 1024.0;
  return c;
}

}  // namespace

// Tolerance, relative, on every step's loss: 3e-4 in bf16 and fp16 (a sum over ranks of
// per-rank gradients rounded to 16 bits is not the one-process sum rounded once, and moves the
// next steps' parameters; measured here at most 2.9e-5 and 2.0e-5 at 2-4 ranks. While the
// loss itself was a 16-bit number, 1.3e-2 and 8.8e-4: the loss's own rounding, one bf16 ulp
// 2^-8, one fp16 ulp 2^-11; now computed in fp32, models/loss.h).
TEST(Lowprec, EveryStrategyMatchesTheOneProcessRunInTheSameDtype) {
  for (auto dt : {torch::kBFloat16, torch::kFloat16}) {
    const double tol = 3e-4;
    auto model = sb::models::make_model("gpt2-tiny");
    Communicator self(MPI_COMM_SELF, 1);
    const auto want = run_engine(*model, self, lowprec("no_shard", dt), kB, kT, kSteps);
    for (const std::string s : {"no_shard", "zero1", "shard_grad_op", "full_shard", "hybrid_shard"}) {
      Communicator comm(MPI_COMM_WORLD, replicates(s) ? two_nodes() : 0);
      const auto got = run_engine(*model, comm, lowprec(s, dt), kB, kT, kSteps);
      double worst = 0;
      for (int i = 0; i < kSteps; ++i) {
        const double rel = std::abs(got.losses[i] - want.losses[i]) / std::abs(want.losses[i]);
        worst = std::max(worst, rel);
        EXPECT_LT(rel, tol) << s << " " << c10::toString(dt) << " step " << i;
      }
      if (world_rank() == 0)
        std::printf("[ lowprec ] %-14s %-9s worst relative loss difference %.2e\n", s.c_str(),
                    c10::toString(dt), worst);
    }
  }
}

// The loss of a bf16 or fp16 step is computed in fp32 from the 16-bit logits (models/loss.h,
// as autocast does), not rounded to 16 bits (bf16 losses near 11 moved in steps of 0.0625):
// the step's loss equals the fp32 cross-entropy of the very logits the step computed, summed
// over every rank's terms, within 1e-6 relative. Causal LM, MLM and classification, sharded.
TEST(Lowprec, TheStepsLossIsTheFp32CrossEntropyOfItsLowPrecisionLogits) {
  for (auto dt : {torch::kBFloat16, torch::kFloat16})
    for (const std::string objective : {"causal-lm", "mlm", "classification"}) {
      auto model = sb::models::make_model(objective == "causal-lm" ? "gpt2-tiny" : "bert-tiny");
      Communicator comm(MPI_COMM_WORLD, 0);
      sb::fsdp::Engine e(*model, comm, lowprec("full_shard", dt), sb::models::init_params(model->units(), 7));
      torch::Tensor logits;  // (terms, classes) of this rank's micro-batch, as the loss saw them
      e.set_loss([&](sb::models::ParamProvider& p, const sb::models::Batch& b) {
        sb::models::LossCombiner keep;
        keep.combine = [&](const sb::models::LossParts& parts) {
          logits = parts.logits.detach();
          return parts.loss;
        };
        return model->loss_with(p, b, keep);
      });
      auto g = global_batch(model->config(), kB, kT, 0);
      if (objective == "classification") {
        g.labels = torch::arange(kB, torch::kLong) % model->config().num_labels;
        g.targets = torch::Tensor();
      }
      const auto mine = slice(g, comm.rank(), comm.size());
      const auto st = e.step({mine}, sb::fsdp::loss_terms(g));
      ASSERT_EQ(logits.scalar_type(), dt) << objective;
      const auto t = mine.targets.defined() ? mine.targets.reshape({-1}).masked_select(mine.targets.reshape({-1}) != -100)
                                            : mine.labels;
      double sum = at::cross_entropy_loss(logits.to(torch::kFloat), t, {}, at::Reduction::Sum).item<double>();
      MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      const double want = sum / static_cast<double>(sb::fsdp::loss_terms(g));
      EXPECT_NEAR(st.loss, want, 1e-6 * std::abs(want)) << c10::toString(dt) << " " << objective;
    }
}

TEST(Lowprec, Fp16LossScalingSkipsAnOverflowingStepAndRecovers) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  auto cfg = lowprec("full_shard", torch::kFloat16);
  cfg.loss_scale_init = std::ldexp(1.0, 40);  // fp16 gradients x 2^40 overflow
  cfg.adamw.total_steps = 40;
  sb::fsdp::Engine e(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
  int skipped = 0, step = 0;
  double scale = cfg.loss_scale_init;
  for (;; ++step) {
    ASSERT_LT(step, 40) << "never recovered";
    const auto before = e.full_params();
    auto g = global_batch(model->config(), kB, kT, step);
    const auto st = e.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
    EXPECT_EQ(st.loss_scale, scale);
    if (!st.skipped) break;
    ++skipped;
    EXPECT_EQ(max_param_diff(e.full_params(), before), 0.0) << "a skipped step moved parameters";
    EXPECT_EQ(e.loss_scale(), scale / 2);
    scale /= 2;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_EQ(e.steps_skipped(), skipped);
  for (int i = 0; i < 3; ++i) {  // recovered: finite losses, updates applied
    ++step;
    auto g = global_batch(model->config(), kB, kT, step);
    const auto st = e.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
    EXPECT_FALSE(st.skipped) << "step " << step;
    EXPECT_TRUE(std::isfinite(st.loss) && std::isfinite(st.grad_norm))
        << "step " << step << " loss " << st.loss << " norm " << st.grad_norm << " scale " << st.loss_scale;
  }
}

TEST(Lowprec, TheScaleDoublesAfterItsGrowthIntervalAndSurvivesACheckpoint) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  auto cfg = lowprec("full_shard", torch::kFloat16);
  cfg.loss_scale_growth_interval = 2;
  const auto dir = shared_tmpdir("lowprec", "ckpt");
  double scale_after = 0;
  {
    sb::fsdp::Engine e(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
    for (int s = 0; s < 3; ++s) {
      auto g = global_batch(model->config(), kB, kT, s);
      e.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
    }
    EXPECT_EQ(e.loss_scale(), 2048.0);  // 1024 doubled after steps 0 and 1; step 2 counts one
    e.save(dir);
    scale_after = e.loss_scale();
  }
  sb::fsdp::Engine r(*model, comm, cfg, sb::models::init_params(model->units(), 99));
  r.load(dir);
  EXPECT_EQ(r.loss_scale(), scale_after);
  auto g = global_batch(model->config(), kB, kT, 3);
  r.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
  EXPECT_EQ(r.loss_scale(), 4096.0) << "the good-step count was not restored";
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}
