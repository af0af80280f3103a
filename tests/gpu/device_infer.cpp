// GPU code paths (label gpu): the `device` key's resolution and one-rank inference on
// device = "cuda" (models, attention variants, fp16/bf16 quantizers) against the same
// computation on the host. Each test skips, saying why, in a CPU build or without a GPU.
#include <gtest/gtest.h>

#include "tests/gpu/require_gpu.h"

#include "harness/core/check.h"
#include "workloads/data/batches.h"
#include "workloads/models/attention.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/device.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/quant/quantizer.h"

using namespace sb::models;

namespace {

// padded: the second row's last quarter is padding (BERT reads the mask; the SDPA variant
// then takes its boolean-mask path instead of is_causal / no mask).
Batch batch_of(const ModelConfig& c, std::int64_t B, std::int64_t T, bool padded = false) {
  torch::manual_seed(5);
  Batch b;
  b.input_ids = torch::randint(0, c.vocab, {B, T}, torch::kLong);
  if (padded) {
    b.attention_mask = torch::ones({B, T}, torch::kLong);
    b.attention_mask[B - 1].narrow(0, T - T / 4, T / 4).fill_(0);
  }
  return b;
}

double rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kCPU).to(torch::kFloat) - want).abs().max().item<double>() /
         want.abs().max().item<double>();
}

}  // namespace

TEST(Device, CpuAlwaysResolves) {
  EXPECT_TRUE(resolve_device("cpu", 3).is_cpu());
}

TEST(Device, CudaWithoutBuildOrGpuIsAClearError) {
  if (built_with_cuda() && visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible";
  try {
    resolve_device("cuda", 0);
    FAIL() << "resolve_device(\"cuda\") succeeded without a CUDA build or a GPU";
  } catch (const sb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device = \"cuda\""), std::string::npos) << m;
    EXPECT_NE(m.find(built_with_cuda() ? "no GPU visible" : "cmake --preset cuda"),
              std::string::npos) << m;
  }
}

TEST(Device, RanksTakeGpusInTurn) {
  SB_REQUIRE_GPU();
  const int n = visible_gpus();
  EXPECT_EQ(resolve_device("cuda", 0).index(), 0);
  EXPECT_EQ(resolve_device("cuda", n).index(), 0);
  EXPECT_EQ(resolve_device("cuda", n + 1).index(), n > 1 ? 1 : 0);
}

TEST(Device, LogitsOnGpuEqualTheHost) {
  SB_REQUIRE_GPU();
  const auto gpu = resolve_device("cuda", 0);
  for (const char* name : {"gpt2-tiny", "bert-tiny"}) {
    for (const auto& [attn, doc] : attention_variants()) {
      auto model = make_model(name, attn);
      auto w = init_params(model->units(), 3);
      torch::NoGradGuard ng;
      const auto b = batch_of(model->config(), 2, 16, std::string(name) == "bert-tiny");
      PersistentParams host(w, false);
      const auto want = model->logits(host, b);
      for (auto& u : w)
        for (auto& t : u) t = t.to(gpu);
      PersistentParams dev(w, false);
      const auto got = model->logits(dev, sb::data::to_device(b, gpu));
      synchronize(gpu);
      EXPECT_TRUE(got.device() == gpu) << name << " " << attn;
      // TF32 may be used for fp32 matmuls on the GPU: 1e-3 relative.
      EXPECT_LT(rel_err(got, want), 1e-3) << name << " " << attn;
    }
  }
}

TEST(Device, HalfQuantizersServeOnGpu) {
  SB_REQUIRE_GPU();
  const auto gpu = resolve_device("cuda", 0);
  auto model = make_model("gpt2-tiny", "naive");
  auto w = init_params(model->units(), 4);
  torch::NoGradGuard ng;
  const auto b = batch_of(model->config(), 2, 16);
  PersistentParams host(w, false);
  const auto want = model->logits(host, b);
  for (auto& u : w)
    for (auto& t : u) t = t.to(gpu);
  for (const char* q : {"none", "fp16", "bf16"}) {
    auto served = sb::quant::quantize(q, *model, w);
    const auto got = model->logits(*served, sb::data::to_device(b, gpu));
    EXPECT_TRUE(got.device() == gpu) << q;
    EXPECT_LT(rel_err(got, want), std::string(q) == "none" ? 1e-3 : 5e-2) << q;
  }
  // The whole forward in fp16 / bf16 on the GPU (quant_compute = auto there): tensor cores.
  for (auto [q, dt] : {std::pair{"fp16", torch::kHalf}, std::pair{"bf16", torch::kBFloat16}}) {
    EXPECT_EQ(sb::quant::compute_dtype(q, "auto", gpu), dt) << q;
    const auto got = model->logits(*sb::quant::quantize(q, *model, w, dt), sb::data::to_device(b, gpu));
    EXPECT_EQ(got.scalar_type(), dt) << q;
    EXPECT_LT(rel_err(got.to(torch::kFloat), want), 5e-2) << q;
  }
}

// KV-cached decoding on the GPU (cache offsets: the masked SDPA path) equals the full forward.
TEST(Device, CachedDecodingOnGpuEqualsTheFullForward) {
  SB_REQUIRE_GPU();
  const auto gpu = resolve_device("cuda", 0);
  for (const auto& [attn, doc] : attention_variants()) {
    auto cfg = preset_config("gpt2-tiny");
    cfg.attention = attn;
    cfg.attention_chunk = 4;
    Gpt2 m(cfg);
    auto w = init_params(m.units(), 6);
    for (auto& u : w)
      for (auto& t : u) t = t.to(gpu);
    PersistentParams p(w, false);
    torch::NoGradGuard ng;
    auto ids = torch::randint(0, 256, {2, 20}, torch::kLong).to(gpu);
    Batch b;
    b.input_ids = ids;
    const auto full = m.logits(p, b);  // (2, 20, 256)
    auto cache = m.make_cache(2, 20, torch::TensorOptions().dtype(torch::kFloat32).device(gpu));
    std::vector<torch::Tensor> parts = {m.forward_cached(p, ids.narrow(1, 0, 7), cache)};
    for (int t = 7; t < 20; ++t) parts.push_back(m.forward_cached(p, ids.narrow(1, t, 1), cache));
    const auto cached = torch::cat(parts, 1);
    EXPECT_TRUE(cached.device() == gpu) << attn;
    EXPECT_LT(rel_err(cached, full.to(torch::kCPU)), 1e-3) << attn;
  }
}
