// Compressors: exact wire sizes, round-trip bounds (int8: half a step of the block), topk
// keeps exactly the k largest, error feedback loses nothing over steps, clear errors.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "harness/core/check.h"
#include "workloads/comm/compressor.h"
#include "workloads/comm/error_feedback.h"

using sb::comm::CompressorConfig;
using sb::comm::make_compressor;

namespace {

CompressorConfig cfg(const std::string& name) {
  CompressorConfig c;
  c.name = name;
  return c;
}

// (n) fp32 whose blocks of 256 have very different magnitudes, one all-zero block, and exact
// .5-step values, so that per-block scaling and rounding ties are exercised.
torch::Tensor test_vector(std::int64_t n, std::uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto x = torch::randn({n}, gen, torch::kFloat);
  auto scale = torch::pow(10.0, torch::arange(n, torch::kFloat).div(256).floor().remainder(7).sub(3));
  x.mul_(scale);
  if (n > 600) x.narrow(0, 512, 256).zero_();
  return x;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Compressors, WireBytesAreExactForEveryN) {
  for (std::int64_t n : {1, 7, 255, 256, 257, 1000, 4096, 100003}) {
    auto x = test_vector(n, 1);
    CompressorConfig i8 = cfg("int8");
    i8.set("block", 64);
    CompressorConfig tk = cfg("topk");
    tk.set("ratio", 0.013);
    const std::int64_t k = std::min<std::int64_t>(
        n, std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(0.013 * double(n) - 1e-9))));
    const std::vector<std::pair<CompressorConfig, std::int64_t>> expect = {
        {cfg("none"), 4 * n},
        {cfg("fp16"), 2 * n},
        {cfg("bf16"), 2 * n},
        {cfg("int8"), 4 * ((n + 255) / 256) + n},
        {i8, 4 * ((n + 63) / 64) + n},
        {tk, 8 * k}};
    for (const auto& [c, bytes] : expect) {
      auto comp = make_compressor(c);
      EXPECT_EQ(comp->wire_bytes(n), bytes) << c.name << " n=" << n;
      auto wire = comp->compress(x);
      EXPECT_EQ(wire.numel(), bytes) << c.name << " n=" << n;
      EXPECT_EQ(wire.scalar_type(), torch::kUInt8);
      EXPECT_EQ(comp->decompress(wire, n).numel(), n);
    }
  }
}

TEST(Compressors, TopkRatioGivesCeilK) {
  CompressorConfig c = cfg("topk");
  c.set("ratio", 0.01);
  auto t = make_compressor(c);
  EXPECT_EQ(t->wire_bytes(1000), 8 * 10);    // exactly 10, not 11 from 0.01's representation
  EXPECT_EQ(t->wire_bytes(1001), 8 * 11);    // ceil(10.01)
  EXPECT_EQ(t->wire_bytes(50), 8 * 1);       // at least one
  c.set("ratio", 1.0);
  EXPECT_EQ(make_compressor(c)->wire_bytes(37), 8 * 37);
}

TEST(Compressors, CastsRoundTripLikeTorchCasts) {
  auto x = test_vector(1000, 2);
  EXPECT_TRUE(torch::equal(make_compressor(cfg("none"))->decompress(make_compressor(cfg("none"))->compress(x), 1000), x));
  auto fp16 = make_compressor(cfg("fp16"));
  EXPECT_TRUE(torch::equal(fp16->decompress(fp16->compress(x), 1000), x.to(torch::kHalf).to(torch::kFloat)));
  auto bf16 = make_compressor(cfg("bf16"));
  EXPECT_TRUE(torch::equal(bf16->decompress(bf16->compress(x), 1000), x.to(torch::kBFloat16).to(torch::kFloat)));
}

// Per element: |x - D(C(x))| <= step/2, step = max|x| over the element's block / 127.
TEST(Compressors, Int8RoundTripWithinHalfAStepOfItsBlock) {
  for (std::int64_t block : {1, 32, 256}) {
    const std::int64_t n = 2000;  // not a multiple of 256: a partial last block
    auto x = test_vector(n, 3);
    CompressorConfig c = cfg("int8");
    c.set("block", block);
    auto comp = make_compressor(c);
    auto y = comp->decompress(comp->compress(x), n);
    auto xa = x.accessor<float, 1>(), ya = y.accessor<float, 1>();
    for (std::int64_t b0 = 0; b0 < n; b0 += block) {
      const std::int64_t b1 = std::min(n, b0 + block);
      float amax = 0;
      for (auto i = b0; i < b1; ++i) amax = std::max(amax, std::abs(xa[i]));
      const double step = double(amax) / 127.0;
      for (auto i = b0; i < b1; ++i) {
        // 1e-6 relative: the fp32 multiply q * step in decompress rounds once more.
        ASSERT_LE(std::abs(double(xa[i]) - double(ya[i])), step * 0.5 + 1e-6 * std::abs(xa[i]))
            << "block " << block << " element " << i;
      }
      if (amax == 0)
        for (auto i = b0; i < b1; ++i) ASSERT_EQ(ya[i], 0.0f);
    }
    // The largest magnitude of each block is exact (code +-127).
    EXPECT_EQ(y.abs().max().item<float>(), x.abs().max().item<float>());
  }
}

TEST(Compressors, Int8StochasticRoundingIsSeededAndWithinOneStep) {
  const std::int64_t n = 4096;
  auto x = test_vector(n, 4);
  CompressorConfig c = cfg("int8");
  c.set("stochastic", true);
  c.seed = 42;
  auto a = make_compressor(c), b = make_compressor(c);
  auto wa = a->compress(x);
  EXPECT_TRUE(torch::equal(wa, b->compress(x)));  // same seed: same rounding
  c.seed = 43;
  EXPECT_FALSE(torch::equal(wa, make_compressor(c)->compress(x)));
  auto y = a->decompress(wa, n);
  auto step = x.view({16, 256}).abs().amax(1).div(127.0).repeat_interleave(256);
  EXPECT_TRUE(((x - y).abs() <= step + 1e-6 * x.abs()).all().item<bool>());
  // Unbiased: the mean error over 64 draws of one vector is far below a step.
  auto acc = torch::zeros({n}, torch::kDouble);
  for (int i = 0; i < 64; ++i) acc += (a->decompress(a->compress(x), n) - x).to(torch::kDouble);
  EXPECT_LT((acc / 64).abs().div(step.to(torch::kDouble).clamp_min(1e-30)).mean().item<double>(), 0.1);
}

TEST(Compressors, TopkKeepsExactlyTheKLargestMagnitudes) {
  const std::int64_t n = 5000;
  auto x = test_vector(n, 5).mul_(torch::rand({n}) + 0.5);  // distinct magnitudes
  CompressorConfig c = cfg("topk");
  c.set("ratio", 0.01);
  auto comp = make_compressor(c);
  auto y = comp->decompress(comp->compress(x), n);
  const std::int64_t k = 50;
  EXPECT_EQ((y != 0).sum().item<std::int64_t>(), k);
  // The kept ones are x's values unchanged, at the positions of the k largest |x|.
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto xa = x.accessor<float, 1>();
  std::sort(order.begin(), order.end(), [&](auto i, auto j) { return std::abs(xa[i]) > std::abs(xa[j]); });
  auto ya = y.accessor<float, 1>();
  for (std::int64_t r = 0; r < n; ++r) {
    const auto i = order[r];
    if (r < k) EXPECT_EQ(ya[i], xa[i]) << "rank " << r;
    else ASSERT_EQ(ya[i], 0.0f) << "rank " << r;
  }
  // decompress_add adds exactly the sent entries.
  auto acc = torch::full({n}, 1.5f);
  comp->decompress_add(comp->compress(x), acc);
  EXPECT_TRUE(torch::equal(acc, torch::full({n}, 1.5f) + y));
}

// Over steps: sum of what was sent + the final residual == sum of the inputs.
TEST(ErrorFeedback, SentPlusResidualEqualsSumOfInputs) {
  for (const char* name : {"topk", "int8", "bf16"}) {
    CompressorConfig c = cfg(name);
    c.set("ratio", 0.05);
    c.set("block", 32);
    auto comp = make_compressor(c);
    sb::comm::ErrorFeedback ef;
    const std::int64_t n = 777;
    auto sum_in = torch::zeros({n}, torch::kDouble), sum_sent = torch::zeros({n}, torch::kDouble);
    for (int step = 0; step < 30; ++step) {
      auto x = test_vector(n, 100 + step);
      sum_in += x.to(torch::kDouble);
      auto wire = ef.compress(*comp, "buf", x);
      sum_sent += comp->decompress(wire, n).to(torch::kDouble);
      // Other keys are independent buffers.
      ef.compress(*comp, "other", x * 3);
    }
    auto total = sum_sent + ef.residual("buf").to(torch::kDouble);
    const double tol = 1e-5 * sum_in.abs().max().item<double>() * 30;
    EXPECT_LT((total - sum_in).abs().max().item<double>(), tol) << name;
    // topk without feedback would have lost most of the mass; with it, nothing.
    EXPECT_EQ(ef.residual_bytes(), 2 * n * 4);
  }
  sb::comm::ErrorFeedback ef;
  auto comp = make_compressor(cfg("int8"));
  ef.compress(*comp, "g", torch::ones({10}));
  EXPECT_NE(error_of([&] { ef.compress(*comp, "g", torch::ones({11})); })
                .find("error feedback buffer \"g\" had 10 elements and now has 11"),
            std::string::npos);
}

TEST(Compressors, UnknownNamesAndBadInputsAreClearErrors) {
  auto e = error_of([] { make_compressor(cfg("zstd")); });
  EXPECT_NE(e.find("unknown compressor \"zstd\"; known: bf16, fp16, int8, none, topk"), std::string::npos) << e;
  e = error_of([] { make_compressor(cfg("powersgd")); });
  EXPECT_NE(e.find("compressor \"powersgd\" is not element-wise"), std::string::npos) << e;
  auto int8 = make_compressor(cfg("int8"));
  e = error_of([&] { int8->compress(torch::ones({4, 4})); });
  EXPECT_NE(e.find("int8: compressors take a contiguous 1-D fp32 tensor, got Float of shape [4, 4]"), std::string::npos) << e;
  e = error_of([&] { int8->decompress(torch::zeros({10}, torch::kUInt8), 100); });
  EXPECT_NE(e.find("int8: expected a contiguous uint8 wire buffer of 104 bytes"), std::string::npos) << e;
  CompressorConfig c = cfg("topk");
  c.set("ratio", 0);
  e = error_of([&] { make_compressor(c); });
  EXPECT_NE(e.find("topk compressor: ratio = 0 must be in (0, 1]"), std::string::npos) << e;
  EXPECT_EQ(sb::comm::compressor_names(), (std::vector<std::string>{"bf16", "fp16", "int8", "none", "topk"}));
}

// The registry of records: a second file claiming a name, or a setting another compressor
// declares, fails at start-up (here: when registering); an unknown name lists every known one.
TEST(CompressorRegistry, DuplicatesFailAndUnknownNamesListTheKnownOnes) {
  using sb::comm::CompressorInfo;
  using sb::comm::register_compressor;
  auto codec = [](const CompressorConfig&) { return make_compressor(cfg("none")); };
  EXPECT_NE(error_of([&] { register_compressor("int8", "a second int8", codec); })
                .find("compressor 'int8' is registered twice (two files claim the name): rename one"),
            std::string::npos);
  CompressorInfo info;
  info.make = codec;
  info.settings = {{"block", sb::KeyType::Int, 64, 1, 1e9, false, "elements per block"}};
  EXPECT_NE(error_of([&] { register_compressor("int4", "int4", info); })
                .find("compressor 'int4': setting 'block' is already declared by compressor "
                      "'int8' (keys compress.*.block); name yours differently"),
            std::string::npos);
  EXPECT_FALSE(sb::comm::compressors().has("int4")) << "a refused record must not be half-added";

  EXPECT_NE(error_of([] { sb::comm::compressor_info("zstd"); })
                .find("unknown compressor 'zstd'; known: bf16, fp16, int8, none, powersgd, topk"),
            std::string::npos);
  EXPECT_NE(error_of([] { cfg("int8").set("blok", 3); })
                .find("compressor setting 'blok' is declared by no compressor; known settings: "
                      "block, rank, ratio, stochastic"),
            std::string::npos);
}

// What callers ask instead of the name: the form, the identity, the settings and their keys.
TEST(CompressorRegistry, RecordsDescribeFormSettingsAndKeys) {
  using sb::comm::CompressorForm;
  const auto& psgd = sb::comm::compressor_info("powersgd");
  EXPECT_EQ(psgd.form, CompressorForm::WholeAllReduce);
  EXPECT_NE(error_of([] { make_compressor(cfg("powersgd")); }).find("needs an all-reduce between its two halves"),
            std::string::npos);
  EXPECT_TRUE(sb::comm::compressor_info("none").identity);
  EXPECT_FALSE(sb::comm::compressor_info("bf16").identity);
  // Unset settings read as their declared defaults; keys and docs as `shardbench keys` lists them.
  EXPECT_EQ(cfg("int8").get_int("block"), 256);
  EXPECT_EQ(cfg("topk").get("ratio"), 0.01);
  EXPECT_EQ(cfg("powersgd").get_int("rank"), 4);
  EXPECT_FALSE(cfg("int8").get_bool("stochastic"));
  const sb::KeySpec* k = sb::find_key("compress.grad.block");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->doc, "custom policy: int8 elements per fp32 scale on grad_reduce_scatter");
  EXPECT_EQ(k->default_value, sb::Value{std::int64_t{256}});
  k = sb::find_key("compress.allreduce.ratio");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->default_value, sb::Value{0.01});
  EXPECT_EQ(k->doc, "custom policy: topk fraction kept on grad_all_reduce");
  std::string owner;
  ASSERT_NE(sb::comm::find_setting("rank", &owner), nullptr);
  EXPECT_EQ(owner, "powersgd");
  EXPECT_EQ(sb::comm::range_text(*sb::comm::find_setting("ratio")), "in (0, 1]");
  EXPECT_EQ(sb::comm::range_text(*sb::comm::find_setting("rank")), ">= 1");
}
