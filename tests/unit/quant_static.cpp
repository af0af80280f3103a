// Static int8 (quantization = "int8-static"): each observer's range on known data, the
// calibrated model's logits within a stated tolerance of fp32 on gpt2-tiny and bert-tiny (fp32
// and bf16 compute), calibration deterministic, the skip list chosen by measured error, and
// the format refusing to run without a calibration.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "harness/core/check.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/quant/calibration.h"
#include "workloads/quant/quantizer.h"

using namespace sb;

namespace {

quant::ActivationRange observe(const std::string& name, const torch::Tensor& x, double pct = 99.99) {
  quant::ObserverOptions o;
  o.percentile = pct;
  auto obs = quant::make_observer(name, o);
  for (int pass = 0; pass < obs->passes(); ++pass)
    for (const auto& chunk : x.chunk(4)) obs->observe(pass, chunk);
  return obs->range();
}

std::vector<models::Batch> batches(const models::ModelConfig& c, int n, std::uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<models::Batch> out(n);
  for (auto& b : out) b.input_ids = torch::randint(c.vocab, {2, 32}, gen, torch::kInt64);
  return out;
}

}  // namespace

// minmax is the data's extremes over every chunk; percentile cuts p% per tail to within a
// bin; entropy ignores one far outlier that minmax keeps.
TEST(StaticInt8, ObserversOnKnownData) {
  auto x = torch::linspace(-1, 3, 40001);  // uniform on [-1, 3]
  auto mm = observe("minmax", x);
  EXPECT_DOUBLE_EQ(mm.lo, -1.0);
  EXPECT_DOUBLE_EQ(mm.hi, 3.0);
  const double bin = 4.0 / quant::RangeHistogram::kBins;
  auto pc = observe("percentile", x, 99.0);  // 1% per tail of a width-4 range: 0.04
  EXPECT_NEAR(pc.lo, -1.0 + 0.04, bin);
  EXPECT_NEAR(pc.hi, 3.0 - 0.04, bin);
  auto gen = at::detail::createCPUGenerator(5);
  auto g = torch::randn({100000}, gen);
  g[17] = 80.0;  // one outlier, 20 standard deviations past the rest
  const auto mg = observe("minmax", g), en = observe("entropy", g);
  EXPECT_DOUBLE_EQ(mg.hi, 80.0);
  EXPECT_LT(en.hi, 10.0) << en.lo << " " << en.hi;
  EXPECT_GT(en.hi, 2.0) << en.lo << " " << en.hi;
  EXPECT_LT(en.lo, -2.0) << en.lo << " " << en.hi;
}

// The codes' formula: zero is exact, the range's ends map to 0 and qmax.
TEST(StaticInt8, ActivationCodes) {
  const auto a = quant::ActivationQuant::of({-1.0, 3.0}, 255);
  EXPECT_DOUBLE_EQ(a.step, 4.0 / 255);
  EXPECT_EQ(a.zero_point, 64);  // round(1 / (4/255)) = round(63.75)
  auto c = a.codes(torch::tensor({-1.0f, 0.0f, 3.0f, 100.0f, -100.0f}));
  EXPECT_TRUE(torch::equal(c, torch::tensor({0, 64, 255, 255, 0}, torch::kByte))) << c;
  EXPECT_EQ(a.fake(torch::tensor({0.0f})).item<float>(), 0.0f);
  const auto h = quant::ActivationQuant::of({0.5, 2.0}, 127);  // widened to hold 0
  EXPECT_EQ(h.zero_point, 0);
  EXPECT_DOUBLE_EQ(h.step, 2.0 / 127);
}

// Calibrated int8-static logits against fp32, every observer, fp32 and bf16 compute. The
// tolerance is int8-dynamic's (tests/unit/quant_models.cpp) for fp32 compute, plus bf16's for
// bf16 compute.
TEST(StaticInt8, LogitsWithinToleranceOfFp32) {
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(preset);
    auto w = models::init_params(model->units(), 3);
    torch::NoGradGuard ng;
    models::PersistentParams fp32(w, /*requires_grad=*/false);
    const auto eval = batches(model->config(), 1, 77).front();
    const auto ref = model->logits(fp32, eval);
    for (const auto& obs : quant::observer_names()) {
      quant::CalibrationOptions o;
      o.observer = obs;
      const auto cal = quant::calibrate(*model, w, batches(model->config(), 4, 11), o);
      EXPECT_TRUE(cal.skipped().empty()) << preset << " " << obs;  // skip_error 1 by default
      for (auto dt : {torch::kFloat, torch::kBFloat16}) {
        auto q = quant::quantize("int8-static", *model, w, dt, &cal);
        // bert's pooler and classifier: not run by the MLM forward calibration ran.
        EXPECT_EQ(q->unquantized_matrices(), std::string(preset) == "bert-tiny" ? 2 : 0);
        auto got = model->logits(*q, eval);
        EXPECT_EQ(got.scalar_type(), dt);
        const double rel = ((got.to(torch::kFloat) - ref).norm() / ref.norm()).item<double>();
        const double top1 = (got.argmax(-1) == ref.argmax(-1)).to(torch::kDouble).mean().item<double>();
        EXPECT_LE(rel, dt == torch::kFloat ? 6e-2 : 7.5e-2) << preset << " " << obs;
        EXPECT_GE(top1, 0.9) << preset << " " << obs;
        std::printf("%-10s %-10s %-5s rel_l2 %.2e top1 %.3f\n", preset, obs.c_str(),
                    dt == torch::kFloat ? "fp32" : "bf16", rel, top1);
      }
    }
  }
}

// The same weights and batches give the same ranges, steps and errors.
TEST(StaticInt8, CalibrationIsDeterministic) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 4);
  for (const auto& obs : quant::observer_names()) {
    quant::CalibrationOptions o;
    o.observer = obs;
    const auto a = quant::calibrate(*model, w, batches(model->config(), 2, 9), o);
    const auto b = quant::calibrate(*model, w, batches(model->config(), 2, 9), o);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    EXPECT_EQ(a.layers.size(), 9u);  // 4 linears per block x 2 blocks + the tied LM head
    for (const auto& [key, l] : a.layers) {
      const auto& m = b.layers.at(key);
      EXPECT_EQ(l.range.lo, m.range.lo) << l.name;
      EXPECT_EQ(l.range.hi, m.range.hi) << l.name;
      EXPECT_EQ(l.input.zero_point, m.input.zero_point) << l.name;
      EXPECT_EQ(l.error, m.error) << l.name;
    }
  }
}

// A layer whose input has an outlier channel (BERT's failure under static int8) measures a
// large error and is kept in the compute dtype; the others stay int8.
TEST(StaticInt8, SkipListIsChosenByMeasuredError) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 6);
  // Block 0's MLP output projection reads GELU(c_fc(x)); one huge c_fc bias makes one of its
  // input features 400x the rest, so a per-tensor activation step rounds the others to 0.
  // The projection ignores that feature (its weight column is zero), so all of its output
  // comes from the features int8 loses.
  const auto& spec = model->units()[1].params;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    if (spec[i].name == "h.0.mlp.c_fc.bias") w[1][i][3] = 400.0f;
    if (spec[i].name == "h.0.mlp.c_proj.weight") w[1][i].select(1, 3).zero_();
  }
  quant::CalibrationOptions o;
  o.skip_error = 0.1;
  const auto cal = quant::calibrate(*model, w, batches(model->config(), 2, 1), o);
  const auto skipped = cal.skipped();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0], "h.0.mlp.c_proj.weight");
  for (const auto& [key, l] : cal.layers)
    if (!l.skip) EXPECT_LT(l.error, 0.1) << l.name;
  auto q = quant::quantize("int8-static", *model, w, torch::kFloat, &cal);
  EXPECT_EQ(q->unquantized_matrices(), 1);
}

TEST(StaticInt8, RefusedWithoutCalibration) {
  EXPECT_TRUE(quant::needs_calibration("int8-static"));
  EXPECT_FALSE(quant::needs_calibration("int8-dynamic"));
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 1);
  std::string msg;
  try {
    quant::quantize("int8-static", *model, w);
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("int8-static: the format needs calibrated activation ranges (calibration_batches > 0)"),
            std::string::npos) << msg;
  msg.clear();
  try {
    quant::make_observer("kl");
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("calibration = \"kl\": no such observer; known: entropy, minmax, percentile"),
            std::string::npos) << msg;
}

// The MLP's GELU runs as the int8 kernel's post-op: the same as GELU after the kernel, for
// BERT's erf GELU and GPT-2's tanh one, in fp32 and bf16.
TEST(StaticInt8, FusedGeluIsGeluOfTheLinear) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 8);
  auto b = batches(model->config(), 1, 3);
  const auto cal = quant::calibrate(*model, w, b, {});
  auto gen = at::detail::createCPUGenerator(2);
  const auto x = torch::randn({16, 64}, gen);
  const int fc = 8;  // block 0: ln_1 (2), attn (4), ln_2 (2), then mlp.c_fc.weight
  ASSERT_EQ(model->units()[1].params[fc].name, "h.0.mlp.c_fc.weight");
  for (auto dt : {torch::kFloat, torch::kBFloat16}) {
    auto q = quant::quantize("int8-static", *model, w, dt, &cal);
    const auto params = q->acquire(1);
    for (const char* approx : {"none", "tanh"}) {
      const auto xd = x.to(dt);
      auto fused = q->linear_gelu(1, fc, xd, params[fc], params[fc + 1], approx).to(torch::kFloat);
      auto apart = at::gelu(q->linear(1, fc, xd, params[fc], params[fc + 1]), approx).to(torch::kFloat);
      EXPECT_EQ(fused.sizes(), apart.sizes());
      const double rel = ((fused - apart).norm() / apart.norm()).item<double>();
      EXPECT_LE(rel, dt == torch::kFloat ? 1e-5 : 1e-2) << approx << " " << c10::toString(dt);
    }
  }
}
