// Distillation under FSDP (the Modelcomp issue): the teacher forward-only and sharded like the
// student, its outputs riding in each rank's micro-batch; under every strategy at 2-4 ranks
// the losses match the one-process trainer (the teacher's outputs on the whole global batch)
// within 1e-5 relative and the final parameters within 1e-4 of each element and 5e-7 in RMS,
// also for a student matching a narrower teacher's hidden states through its projection;
// with temperature 1 and soft weight 0 the engine trains as without a teacher (within fp32
// rounding: the plain loss is the chunked LM-head cross-entropy).
// Why two parameter bounds, not fsdp_parity.cpp's 2e-5 on every element: with soft targets
// this sharp, a few weights' gradients are sums that nearly cancel, and Adam's m / sqrt(v)
// turns their float rounding (the summation order of 3 ranks against one process) into up to
// 2.8e-5 (one element of gpt2-tiny's first MLP at 3 ranks on an AVX-512 EPYC, every other
// element under 5e-6; RMS 1e-8 to 9e-8 at 2-4 ranks). A real error (a micro-batch's teacher
// missing, a wrong weight) moves many elements by a step's size, lr = 3e-3: both bounds see it.
#include <cmath>
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/distill/distill.h"
#include "workloads/distill/projected.h"
#include "workloads/models/family.h"
#include "workloads/train/reference_trainer.h"

using namespace sbtest;
using sb::comm::Communicator;

namespace {

constexpr int kSteps = 6;
constexpr std::int64_t kB = 12, kT = 16;

sb::distill::DistillConfig full_loss() {
  sb::distill::DistillConfig c;
  c.temperature = 2.0, c.soft_weight = 0.5, c.hard_weight = 0.5, c.hidden_weight = 0.2;
  return c;
}

sb::models::UnitTensors teacher_weights(const sb::models::Model& m) {
  auto w = sb::models::init_params(m.units(), 4321);
  for (auto& u : w)
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(8);  // soft targets far from the student's
  return w;
}

// The engine (student) and a forward-only teacher engine of the same strategy.
RunResult run_distilled(sb::models::Model& student, sb::models::Model& teacher, Communicator& comm,
                        const std::string& strategy, const sb::distill::DistillConfig& c, bool with_teacher) {
  auto cfg = engine_config(strategy, kSteps);
  sb::fsdp::Engine e(student, comm, cfg, sb::models::init_params(student.units(), 1234));
  auto tc = cfg;
  tc.forward_only = true;
  sb::fsdp::Engine te(teacher, comm, tc, teacher_weights(teacher));
  if (with_teacher)
    e.set_loss([&](sb::models::ParamProvider& p, const sb::models::Batch& b) {
      return student.loss_with(p, b, sb::distill::combiner(b, c));
    });
  RunResult r;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(student.config(), kB, kT, s);
    auto mine = slice(g, comm.rank(), comm.size());
    if (with_teacher)
      sb::distill::attach_teacher(teacher, [&](const auto& f) { return te.forward_with(f); }, mine, c.hidden_weight > 0);
    auto st = e.step({mine}, sb::fsdp::loss_terms(g));
    r.losses.push_back(st.loss);
  }
  r.params = e.full_params();
  return r;
}

RunResult reference(sb::models::Model& student, sb::models::Model& teacher, const sb::distill::DistillConfig& c) {
  sb::train::TrainConfig tc;
  tc.adamw = test_adamw(kSteps);
  tc.seed = 1234;
  tc.loss = [&](sb::models::ParamProvider& p, const sb::models::Batch& b) {
    return student.loss_with(p, b, sb::distill::combiner(b, c));
  };
  sb::train::ReferenceTrainer ref(student, tc);
  sb::models::PersistentParams tp(teacher_weights(teacher), false);
  RunResult r;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(student.config(), kB, kT, s);
    sb::distill::attach_teacher(teacher, [&](const auto& f) { return f(tp); }, g, c.hidden_weight > 0);
    r.losses.push_back(ref.step({g}).loss);
  }
  for (const auto& unit : ref.params()) {
    r.params.emplace_back();
    for (const auto& t : unit) r.params.back().push_back(t.detach().clone());
  }
  return r;
}

// sqrt(mean over every element of every tensor of (a - b)^2).
double rms_param_diff(const std::vector<std::vector<torch::Tensor>>& a, const std::vector<std::vector<torch::Tensor>>& b) {
  double sum = 0, n = 0;
  for (std::size_t u = 0; u < a.size(); ++u)
    for (std::size_t i = 0; i < a[u].size(); ++i) {
      sum += (a[u][i] - b[u][i]).to(torch::kDouble).pow(2).sum().item<double>();
      n += static_cast<double>(a[u][i].numel());
    }
  return n > 0 ? std::sqrt(sum / n) : 0.0;
}

class DistillParity : public ::testing::TestWithParam<std::string> {};

TEST_P(DistillParity, EveryStrategyMatchesOneProcess) {
  const std::string strategy = GetParam();
  // gpt2-tiny from gpt2-tiny; bert-tiny-1l from bert-tiny; gpt2-tiny from a teacher half as
  // wide, through the student's projection (its unit sharded and trained like the others).
  for (const std::string preset : {"gpt2-tiny", "bert-tiny", "projected"}) {
    std::unique_ptr<sb::models::Model> student, teacher;
    if (preset == "projected") {
      auto narrow = sb::models::preset_config("gpt2-tiny");
      narrow.d_model = 32, narrow.d_ff = 128;
      student = std::make_unique<sb::distill::ProjectedStudent>(sb::models::make_model("gpt2-tiny"), 32);
      teacher = sb::models::family("gpt2").make(narrow);
    } else {
      student = sb::models::make_model(preset == "bert-tiny" ? "bert-tiny-1l" : preset);
      teacher = sb::models::make_model(preset);
    }
    const int sg = replicates(strategy) && world_size() % 2 == 0 ? world_size() / 2 : 0;
    Communicator comm(MPI_COMM_WORLD, sg);
    const auto c = full_loss();
    const auto got = run_distilled(*student, *teacher, comm, strategy, c, true);
    const auto want = reference(*student, *teacher, c);
    for (int s = 0; s < kSteps; ++s)
      EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::abs(want.losses[s])) << strategy << " " << preset << " step " << s;
    const double d = max_param_diff(got.params, want.params), rms = rms_param_diff(got.params, want.params);
    EXPECT_LT(d, 1e-4) << strategy << " " << preset;
    EXPECT_LT(rms, 5e-7) << strategy << " " << preset;
    if (world_rank() == 0)
      std::printf("[ distill ] %-14s %-10s loss %.6f -> %.6f (one process %.6f), max |dp| %.2e, rms %.2e\n", strategy.c_str(),
                  preset.c_str(), got.losses.front(), got.losses.back(), want.losses.back(), d, rms);
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, DistillParity,
                         ::testing::Values("no_shard", "zero1", "shard_grad_op", "full_shard", "hybrid_shard"));

TEST(Distill, SoftWeightZeroTrainsAsWithoutATeacher) {
  auto student = sb::models::make_model("gpt2-tiny"), teacher = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  sb::distill::DistillConfig c;
  c.temperature = 1, c.soft_weight = 0, c.hard_weight = 1;
  const auto plain = run_distilled(*student, *teacher, comm, "full_shard", c, false);
  const auto distilled = run_distilled(*student, *teacher, comm, "full_shard", c, true);
  // Without a teacher the engine's loss is the chunked LM-head cross-entropy
  // (models::linear_cross_entropy); distillation needs the whole logits, so the two sum in
  // another order: equal within fp32 rounding, not bit for bit.
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(plain.losses[s], distilled.losses[s], 1e-6 * std::abs(plain.losses[s])) << "step " << s;
  EXPECT_LT(max_param_diff(plain.params, distilled.params), 1e-5);
}

}  // namespace
