// A newcomer adds a compressor by adding one file: this one, and nothing else. It registers
// "int16" (block-wise absmax int16: one fp32 step per group of `group` elements, codes
// round(x / step)) with its record: an element-wise codec with one setting, `group`, whose key
// compress.<collective>.group the suite sets and whose range the policy checks. From the
// record alone the rest takes it: `plan` (keys, names, the policy's validation, the train
// task's memory model with the error-feedback state), and a training point run by the
// registered train task, whose losses follow the one-process reference trainer's and whose
// compression state and wire bytes equal the predictions.
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/spec/plan.h"
#include "harness/spec/suite.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "tests/mpi/train_point.h"
#include "workloads/comm/compressor.h"
#include "workloads/data/training_source.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/fsdp/shard.h"
#include "workloads/train/reference_trainer.h"
#include "workloads/train/train_workload.h"

namespace {

using namespace sbtest;
using sb::comm::CompressorConfig;

const char* kName = "int16";
constexpr std::int64_t kGroup = 64;  // the suite's compress.grad.group
// Relative loss difference allowed against the uncompressed one-process reference: int16 codes
// err by up to half a step (2^-16 of the group's maximum), error feedback re-sends it. Measured
// on the 6 steps: 4.5e-7, 1.3e-6, 8.9e-6 at 2, 3, 4 ranks; a codec that loses values or a
// wrong sum moves the loss by far more (the uncompressed path is held to 1e-5).
constexpr double kLossTolerance = 5e-5;

// ---- the compressor: all a newcomer writes ---------------------------------------------
// Wire: [g fp32 steps][n int16 codes], g = ceil(n / group): 4 g + 2 n bytes.
class Int16 final : public sb::comm::Compressor {
 public:
  explicit Int16(const CompressorConfig& c) : group_(c.get_int("group")) {}
  std::string name() const override { return kName; }
  std::int64_t groups(std::int64_t n) const { return (n + group_ - 1) / group_; }
  std::int64_t wire_bytes(std::int64_t n) const override { return 4 * groups(n) + 2 * n; }
  torch::Tensor compress(const torch::Tensor& x) override {
    sb::comm::check_compress_input(x, kName);
    const std::int64_t n = x.numel(), g = groups(n);
    auto rows = torch::constant_pad_nd(x, {0, g * group_ - n}).view({g, group_});  // (g, group)
    auto step = rows.abs().amax(1).div(32767);                                      // (g)
    auto safe = torch::where(step > 0, step, torch::ones_like(step));              // 0 / 1 = 0
    auto codes = rows.div(safe.unsqueeze(1)).round().view({-1}).narrow(0, 0, n);    // (n)
    auto wire = torch::empty({wire_bytes(n)}, torch::kUInt8);
    sb::comm::wire_view(wire, 0, g, torch::kFloat).copy_(step);
    sb::comm::wire_view(wire, 4 * g, n, torch::kShort).copy_(codes);
    return wire;
  }
  torch::Tensor decompress(const torch::Tensor& wire, std::int64_t n) const override {
    sb::comm::check_wire(wire, wire_bytes(n), kName);
    const std::int64_t g = groups(n);
    auto step = sb::comm::wire_view(wire, 0, g, torch::kFloat);                      // (g)
    auto codes = sb::comm::wire_view(wire, 4 * g, n, torch::kShort).to(torch::kFloat);
    auto rows = torch::constant_pad_nd(codes, {0, g * group_ - n}).view({g, group_});
    return rows.mul(step.unsqueeze(1)).view({-1}).narrow(0, 0, n).contiguous();
  }

 private:
  std::int64_t group_;
};

const sb::Registrar reg([] {
  sb::comm::CompressorInfo info;
  info.settings = {{"group", sb::KeyType::Int, 128, 1, 1 << 20, false, "elements per fp32 step"}};
  info.make = [](const CompressorConfig& c) { return std::make_unique<Int16>(c); };
  sb::comm::register_compressor(kName, "test: block-wise absmax int16 (4*ceil(n/group)+2n B)",
                                std::move(info));
});

// ---- the checks --------------------------------------------------------------------------
std::string suite_text(const std::string& group = std::to_string(kGroup)) {
  return fmt::format(R"([suite]
name = "new-compressor"
[base]
task = "train"
model = "gpt2-tiny"
dtype = "fp32"
strategy = "full_shard"
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
compression = "custom"
compress.grad.name = "{}"
compress.grad.group = {}
compress.grad.error_feedback = true
)",
                     world_size(), kName, group);
}

// Per unit of gpt2-tiny under full_shard: (the padded full gradient, its shard).
std::vector<sb::fsdp::ShardRange> unit_ranges() {
  std::vector<sb::fsdp::ShardRange> out;
  auto model = sb::models::make_model("gpt2-tiny");
  for (const auto& u : model->units()) out.push_back(sb::fsdp::shard_range(u.numel(), world_size(), 0));
  return out;
}

TEST(NewCompressor, ItsRecordGivesTheKeysAndTheValidation) {
  const sb::KeySpec* k = sb::find_key("compress.grad.group");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->default_value, sb::Value{std::int64_t{128}});
  EXPECT_EQ(k->doc, "custom policy: int16 elements per fp32 step on grad_reduce_scatter");
  EXPECT_NE(sb::find_key("compress.param.group"), nullptr);
  // The codec on its own: within half a step of each group (plus fp32 rounding of code x step).
  auto gen = at::detail::createCPUGenerator(7);
  auto x = torch::randn({1000}, gen, torch::kFloat);
  CompressorConfig c;
  c.name = kName;
  c.set("group", kGroup);
  auto codec = sb::comm::make_compressor(c);
  const auto wire = codec->compress(x);
  EXPECT_EQ(wire.numel(), 4 * 16 + 2 * 1000);
  const auto y = codec->decompress(wire, 1000);
  for (std::int64_t g = 0; g < 16; ++g) {
    auto xs = x.narrow(0, g * kGroup, std::min<std::int64_t>(kGroup, 1000 - g * kGroup));
    auto ys = y.narrow(0, g * kGroup, xs.numel());
    const double max = xs.abs().max().item<double>(), step = max / 32767;
    EXPECT_LE((xs - ys).abs().max().item<double>(), 0.5 * step + 1e-6 * max) << "group " << g;
  }
  // Its range, checked by the policy from the record.
  const std::string e = error_of([] { sb::load_suite_text(suite_text("0"), "bad.toml"); });
  EXPECT_NE(e.find("grad_reduce_scatter (compress.grad.*): int16 group = 0 must be in [1, 1048576]"),
            std::string::npos) << e;
}

TEST(NewCompressor, PlanPredictsItsStateInTheMemoryModel) {
  const sb::Suite s = sb::load_suite_text(suite_text(), "new_compressor.toml");  // validated
  ASSERT_EQ(s.points.size(), 1u);
  const sb::Point& p = s.points[0];
  auto model = sb::models::make_model("gpt2-tiny");
  const auto want =
      sb::fsdp::predict_memory(sb::train::memory_inputs(p, *model, torch::kFloat32, 0));
  // Error feedback on the reduce-scatter keeps each unit's whole (padded) fp32 input.
  std::uint64_t residuals = 0;
  for (const auto& r : unit_ranges()) residuals += 4 * static_cast<std::uint64_t>(r.padded);
  EXPECT_EQ(want.compression, residuals);
  EXPECT_EQ(want.model_state, want.param + want.grad + want.optim + want.compression);
  const std::string plan = sb::format_plan(s);
  EXPECT_NE(plan.find(sb::format_bytes(static_cast<double>(want.model_state))), std::string::npos)
      << plan;
  const std::string memory = sb::format_memory(s);
  EXPECT_NE(memory.find("compression"), std::string::npos) << memory;
  EXPECT_NE(memory.find(sb::format_bytes(static_cast<double>(want.compression))), std::string::npos)
      << memory;
  if (world_rank() == 0) std::printf("%s%s", plan.c_str(), memory.c_str());
}

TEST(NewCompressor, TrainingPointFollowsTheReferenceWithItsPredictedStateAndWire) {
  const sb::Suite s = sb::load_suite_text(suite_text(), "new_compressor.toml");
  const sb::Point& p = s.points[0];
  sb::Recorder rec;  // the point, run by the registered train task on every rank
  run_train_point(p, rec);

  // The one-process trainer on the same global batches, weights and AdamW: int16 gradients
  // with error feedback stay close to it (each value within 2^-16 of its group's maximum).
  ASSERT_EQ(rec.steps().size(), static_cast<std::size_t>(p.get_int("steps")));
  const std::vector<double> ref = reference_losses(p, rec);
  double worst = 0;
  for (const auto& st : rec.steps()) {
    const double want = ref.at(static_cast<std::size_t>(st.step));
    if (st.step == 0) EXPECT_NEAR(st.loss, want, 1e-5 * std::abs(want)) << "before any update";
    EXPECT_NEAR(st.loss, want, kLossTolerance * std::abs(want)) << kName << " step " << st.step;
    worst = std::max(worst, std::abs(st.loss - want) / std::abs(want));
  }
  if (world_rank() == 0) std::printf("largest relative loss difference: %.3g\n", worst);
  EXPECT_LT(rec.steps().back().loss, rec.steps().front().loss) << "the point did not train";

  // Its state: the residuals the record's collectives keep, measured as predicted.
  ASSERT_EQ(rec.memories().size(), 1u);
  const sb::RankMemory& m = rec.memories()[0];
  EXPECT_EQ(m.compression_bytes, m.predicted_compression_bytes);
  EXPECT_GT(m.compression_bytes, 0u);
  EXPECT_EQ(m.model_state_bytes, m.predicted_model_state_bytes);
  EXPECT_EQ(static_cast<double>(m.model_state_bytes),
            sb::find_task("train")->model_state_bytes_per_rank(p));

  // Its wire: every step's gradient reduce-scatters send (world - 1) int16 wires of each
  // unit's shard, against the fp32 logical bytes.
  const auto w = static_cast<std::uint64_t>(world_size());
  std::uint64_t wire = 0, logical = 0;
  for (const auto& r : unit_ranges()) {
    const auto sh = static_cast<std::uint64_t>(r.size);
    wire += (w - 1) * (4 * ((sh + kGroup - 1) / kGroup) + 2 * sh);
    logical += (w - 1) * 4 * sh;
  }
  std::map<std::int64_t, std::pair<std::uint64_t, std::uint64_t>> per_step;  // wire, logical
  for (const auto& e : rec.comm_events())
    if (e.kind == "grad_reduce_scatter") {
      per_step[e.step].first += e.wire_bytes;
      per_step[e.step].second += e.logical_bytes;
    }
  ASSERT_EQ(per_step.size(), rec.steps().size());
  for (const auto& [step, b] : per_step) {
    EXPECT_EQ(b.first, wire) << "step " << step;
    EXPECT_EQ(b.second, logical) << "step " << step;
  }
}

}  // namespace
