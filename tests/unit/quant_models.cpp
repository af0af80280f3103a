// Quantized inference: each format's GPT-2 / BERT logits stay within a stated tolerance of
// fp32, model bytes are exact, int8-weight is exactly the seed's formula, names are checked.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <tuple>
#include <vector>

#include "harness/core/check.h"
#include "workloads/models/device.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/quant/calibration.h"
#include "workloads/quant/quantizer.h"

using namespace sb;

namespace {

models::Batch batch_for(const models::ModelConfig& c, std::int64_t B, std::int64_t T) {
  auto gen = at::detail::createCPUGenerator(77);
  models::Batch b;
  b.input_ids = torch::randint(c.vocab, {B, T}, gen, torch::kInt64);
  return b;
}

// Relative L2 error of the logits and top-1 agreement of `name` against fp32.
struct Deviation {
  double rel_l2 = 0, top1 = 0;
};
Deviation deviation(const std::string& preset, const std::string& name) {
  auto model = models::make_model(preset);
  auto w = models::init_params(model->units(), 3);
  // Trained-like weights: a scale spread per row (and an outlier) so per-channel matters.
  torch::NoGradGuard ng;
  models::PersistentParams fp32(w, /*requires_grad=*/false);
  auto q = quant::quantize(name, *model, w);
  auto b = batch_for(model->config(), 2, 32);
  auto ref = model->logits(fp32, b), got = model->logits(*q, b);  // (B, T, V)
  Deviation d;
  d.rel_l2 = ((got - ref).norm() / ref.norm()).item<double>();
  d.top1 = (got.argmax(-1) == ref.argmax(-1)).to(torch::kDouble).mean().item<double>();
  return d;
}

}  // namespace

// Tolerances (relative L2 of the logits of a randomly initialised tiny model; measured values
// are about 5x smaller, see docs/QUANTIZATION.md).
TEST(Quantization, LogitsWithinToleranceOfFp32) {
  const std::vector<std::pair<std::string, double>> tol = {
      {"none", 0.0}, {"fp16", 2e-3}, {"bf16", 1.5e-2}, {"int8-weight", 5e-2},
      {"int8-weight-channel", 4e-2}, {"int8-dynamic", 6e-2}};
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    for (const auto& [name, t] : tol) {
      auto d = deviation(preset, name);
      EXPECT_LE(d.rel_l2, t) << preset << " " << name;
      if (name == "none") EXPECT_EQ(d.rel_l2, 0.0);
      EXPECT_GE(d.top1, name == "none" ? 1.0 : 0.9) << preset << " " << name;
      std::printf("%-10s %-20s rel_l2 %.2e top1 %.3f\n", preset, name.c_str(), d.rel_l2, d.top1);
    }
  }
}

TEST(Quantization, ModelBytesAreExact) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 1);
  std::int64_t mat = 0, vec = 0, mats = 0, rows = 0;
  for (const auto& u : model->units())
    for (const auto& p : u.params) {
      if (p.shape.size() == 2) mat += p.numel(), ++mats, rows += p.shape[0];
      else vec += p.numel();
    }
  // int8-static with every layer calibrated (gpt2-tiny's forward runs all of them).
  models::Batch b;
  b.input_ids = torch::randint(model->config().vocab, {1, 8}, torch::kInt64);
  const auto cal = quant::calibrate(*model, w, {b}, {});
  auto bytes = [&](const std::string& n) {
    return quant::quantize(n, *model, w, torch::kFloat, quant::needs_calibration(n) ? &cal : nullptr)->model_bytes();
  };
  EXPECT_EQ(bytes("none"), 4 * (mat + vec));
  EXPECT_EQ(bytes("fp16"), 2 * mat + 4 * vec);
  EXPECT_EQ(bytes("bf16"), 2 * mat + 4 * vec);
  EXPECT_EQ(bytes("int8-weight"), mat + 4 * mats + 4 * vec);
  EXPECT_EQ(bytes("int8-weight-channel"), mat + 4 * rows + 4 * vec);
  EXPECT_EQ(bytes("int8-dynamic"), mat + 4 * rows + 4 * vec);
  EXPECT_EQ(bytes("int8-static"), mat + 4 * rows + 4 * vec);
  EXPECT_EQ(quant::quantize("int8-dynamic", *model, w)->resident_bytes(), 2 * mat + 16 * rows + 4 * vec);
  // The plan-time formula agrees with the converted model for every format.
  for (const auto& n : quant::quantizer_names())
    EXPECT_EQ(quant::quantized_model_bytes(n, model->units()), bytes(n)) << n;
}

// The seed's quantize_weights: scale = 127 / max|W|; W' = round(W * scale) / scale.
TEST(Quantization, Int8WeightIsTheSeedsFormula) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 2);
  auto q = quant::quantize("int8-weight", *model, w);
  auto wte = w[0][0];  // (V, d), also the tied LM head
  const float scale = 127.0f / wte.abs().max().item<float>();
  auto expect = wte.mul(scale).round().clamp(-127, 127).div(scale);
  EXPECT_TRUE(torch::allclose(q->acquire(0)[0], expect, 0, 1e-7));
  // linear() runs on the same dequantized weight: the tied head's logits.
  auto x = torch::randn({5, wte.size(1)});
  EXPECT_TRUE(torch::allclose(q->linear(0, 0, x, q->acquire(0)[0], {}), at::linear(x, expect), 1e-5, 1e-6));
  // Per channel: each row's max maps to +-127 exactly.
  auto qc = quant::quantize("int8-weight-channel", *model, w);
  auto deq = qc->acquire(0)[0];
  EXPECT_TRUE(torch::allclose(deq.abs().amax(1), wte.abs().amax(1), 1e-6, 0));
}

TEST(Quantization, UnknownNameListsKnownOnes) {
  auto model = models::make_model("gpt2-tiny");
  auto w = models::init_params(model->units(), 1);
  std::string msg;
  try {
    quant::quantize("int4", *model, w);
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("unknown quantization \"int4\"; known: bf16, fp16, int8-dynamic, int8-static, int8-weight, "
                     "int8-weight-channel, none"), std::string::npos) << msg;
}

// quant_compute = bf16 / fp16: the whole forward runs in that dtype, exactly as the fp32 model
// cast to it (eager PyTorch's model.to(torch.bfloat16)); the weight-only int8 formats
// dequantize into bf16 and stay within their fp32 tolerance.
TEST(Quantization, LowComputeIsTheModelCastToThatDtype) {
  for (const char* preset : {"gpt2-tiny", "bert-tiny"}) {
    auto model = models::make_model(preset);
    auto w = models::init_params(model->units(), 5);
    torch::NoGradGuard ng;
    auto b = batch_for(model->config(), 2, 16);
    for (auto [name, dt] : {std::pair{"bf16", torch::kBFloat16}, std::pair{"fp16", torch::kHalf}}) {
      auto cast = w;
      for (auto& u : cast)
        for (auto& t : u) t = t.to(dt);
      models::PersistentParams ref(cast, /*requires_grad=*/false);
      auto q = quant::quantize(name, *model, w, dt);
      auto got = model->logits(*q, b), want = model->logits(ref, b);
      EXPECT_EQ(got.scalar_type(), dt) << preset << " " << name;
      EXPECT_TRUE(torch::equal(got, want)) << preset << " " << name;
    }
    models::PersistentParams fp32(w, false);
    auto ref = model->logits(fp32, b);
    for (const char* name : {"int8-weight", "int8-weight-channel"}) {
      auto got = model->logits(*quant::quantize(name, *model, w, torch::kBFloat16), b);
      EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
      const double rel = ((got.to(torch::kFloat) - ref).norm() / ref.norm()).item<double>();
      EXPECT_LE(rel, 6e-2) << preset << " " << name;
    }
  }
}

TEST(Quantization, ComputeDtypeChoice) {
  const torch::Device cpu(torch::kCPU);
  std::string why;
  EXPECT_EQ(quant::compute_dtype("bf16", "fp32", cpu, &why), torch::kFloat);
  EXPECT_EQ(why, "quant_compute = \"fp32\"");
  EXPECT_EQ(quant::compute_dtype("int8-weight", "bf16", cpu, &why), torch::kBFloat16);
  EXPECT_EQ(quant::compute_dtype("int8-dynamic", "auto", cpu, &why), torch::kFloat);
  EXPECT_EQ(why, "int8-dynamic computes in fp32 only");
  // auto follows the CPU's units: bf16 with avx512_bf16 / amx_bf16, else fp32 and says why.
  const std::string missing = models::missing_fast_units(cpu, torch::kBFloat16);
  EXPECT_EQ(quant::compute_dtype("bf16", "auto", cpu, &why),
            missing.empty() ? torch::kBFloat16 : torch::kFloat);
  if (!missing.empty()) {
    EXPECT_NE(why.find("has none of avx512_bf16, amx_bf16"), std::string::npos) << why;
  }
  EXPECT_EQ(quant::check_compute_choice("int8-dynamic", "bf16"),
            "quant_compute = \"bf16\": quantization \"int8-dynamic\" computes in fp32 only; set "
            "quant_compute = \"auto\" or \"fp32\"");
  EXPECT_EQ(quant::check_compute_choice("fp16", "bf16"),
            "quant_compute = \"bf16\": quantization \"fp16\" computes in fp32 or fp16; set "
            "quant_compute = \"auto\", \"fp32\" or \"fp16\"");
  EXPECT_EQ(quant::check_compute_choice("fp16", "fp16"), "");
}

// auto times every engine this LibTorch has and keeps the fastest; once weights are packed
// for it, asking for another engine is an error naming both.
TEST(Quantization, Int8EngineIsMeasuredAndFixed) {
  auto c = quant::select_int8_engine("auto");
  EXPECT_NE(c.why.find(c.engine + " "), std::string::npos) << c.why;
  EXPECT_NE(c.why.find(" ms"), std::string::npos) << c.why;
  EXPECT_EQ(quant::select_int8_engine(c.engine).engine, c.engine);
  const std::string other = c.engine == "qnnpack" ? "x86" : "qnnpack";
  std::string msg;
  try {
    quant::select_int8_engine(other);
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("already packed int8 weights for engine " + c.engine), std::string::npos) << msg;
}

// auto's engine is timed on the model's own linears: every 2-D weight but the embedding
// tables, one entry per distinct (in, out) with its count per forward, at the batch's rows.
TEST(Quantization, LinearShapesAreTheModelsOwn) {
  auto m = models::make_model("gpt2-tiny");  // 2 layers, d 64, d_ff 256
  const auto shapes = quant::linear_shapes(m->units(), 1024);
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> got;
  for (const auto& s : shapes) got.emplace_back(s.rows, s.in, s.out, s.count);
  const decltype(got) want = {{1024, 64, 64, 2},     // attn.c_proj
                              {1024, 64, 192, 2},    // attn.c_attn (q, k, v fused)
                              {1024, 64, 256, 2},    // mlp.c_fc
                              {1024, 256, 64, 2}};   // mlp.c_proj
  EXPECT_EQ(got, want);
  // The choice on them says which shapes it timed.
  const auto c = quant::select_int8_engine("auto", shapes);
  EXPECT_NE(c.why.find(c.engine + " "), std::string::npos) << c.why;
}

// The int8 path follows the CPU's flags (fake lists here): VNNI or AMX keep 8-bit activations,
// AVX2 alone quantizes them to 7 bits, and the note says which units run the GEMMs.
TEST(Quantization, Int8UnitsFollowTheIsa) {
  const auto amx = quant::int8_units({"avx2", "avx512f", "avx512_vnni", "amx_tile", "amx_int8"});
  EXPECT_EQ(amx.path, "amx_int8");
  EXPECT_TRUE(amx.full_range);
  EXPECT_NE(amx.note.find("AMX"), std::string::npos) << amx.note;
  const auto vnni = quant::int8_units({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"});
  EXPECT_EQ(vnni.path, "avx512_vnni");
  EXPECT_TRUE(vnni.full_range);
  EXPECT_EQ(quant::int8_units({"avx2", "avx_vnni"}).path, "avx_vnni");
  const auto avx2 = quant::int8_units({"sse4_2", "avx", "avx2", "fma"});
  EXPECT_EQ(avx2.path, "avx2");
  EXPECT_FALSE(avx2.full_range);
  EXPECT_NE(avx2.note.find("7 bits"), std::string::npos) << avx2.note;
  EXPECT_EQ(quant::int8_units({"asimd"}).path, "none");
  EXPECT_FALSE(quant::int8_units({}).full_range);
}
