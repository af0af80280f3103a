// The shipped suites (suite/*.toml) parse, validate and expand, given the names and keys the
// workloads register (mirrored here: harness tests do not link LibTorch). The workloads' own
// cross-key validators are not linked in; `shardbench plan suite/X.toml` runs them too.
#include <filesystem>

#include <gtest/gtest.h>

#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {
namespace {

// As registered by workloads/{models,fsdp,comm,quant,train,infer} (see `shardbench keys`).
Registrar mirror([] {
  auto names = [](const char* set, std::initializer_list<const char*> ns) {
    for (const char* n : ns) register_name(set, n, "mirrored from the workloads");
  };
  names("task", {"train", "infer", "micro"});
  names("model", {"gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-tiny",
                  "bert-base", "bert-large"});
  names("strategy", {"no_shard", "zero1", "shard_grad_op", "full_shard", "hybrid_shard"});
  names("compression", {"none", "naive-int8", "naive-topk", "hybrid", "hybrid-topk", "custom"});
  names("quantization", {"none", "int8-weight", "int8-weight-channel", "int8-dynamic", "fp16",
                         "bf16"});
  names("attention", {"naive", "chunked", "online"});
  names("dtype", {"fp32", "bf16", "fp16", "auto"});
  names("scenario", {"single-stream", "multi-stream", "server", "offline"});
  using I = std::int64_t;
  register_key({"lr", KeyType::Float, 6e-4, "", "train"});
  register_key({"grad_accum", KeyType::Int, I{1}, "", "train"});
  register_key({"shard_group", KeyType::Int, I{0}, "", "train"});
  register_key({"eval_every", KeyType::Int, I{0}, "", "train"});
  register_key({"data", KeyType::String, std::string("markov"), "", "train"});
  register_key({"scenario", KeyType::Name, std::string("single-stream"), "scenario", "infer"});
  register_key({"queries", KeyType::Int, I{32}, "", "infer"});
  register_key({"target_qps", KeyType::Float, 10.0, "", "infer"});
});

// The suites of issue 3. Other suites (e.g. the micro-benchmarks' collectives.toml) use keys
// not mirrored here; `shardbench plan` checks those with the real registrations.
std::vector<std::filesystem::path> shipped() {
  std::vector<std::filesystem::path> out;
  for (const char* s : {"attention", "compression", "paper", "quantization", "quickstart",
                        "scaling", "sharding"})
    out.push_back(std::filesystem::path(SB_SOURCE_DIR) / "suite" / (std::string(s) + ".toml"));
  return out;
}

TEST(Shipped, AllSevenSuitesArePresent) {
  for (const auto& p : shipped()) EXPECT_TRUE(std::filesystem::exists(p)) << p;
}

TEST(Shipped, AnUnknownKeyFarFromAnyIsNotGivenASuggestion) {
  try {
    load_suite_text("[base]\nmicro.min_bytes = 4\nbtach = 8\n", "far.toml");
    FAIL();
  } catch (const SuiteError& e) {
    EXPECT_EQ(std::string(e.what()),
              "far.toml:2:7: micro.min_bytes: unknown key: not registered by the harness or any "
              "linked workload (`shardbench keys` lists every key)\n"
              "far.toml:3:1: btach: unknown key; did you mean 'batch'? (`shardbench keys` lists "
              "every key)");
  }
}

TEST(Shipped, EverySuiteExpands) {
  for (const auto& path : shipped()) {
    try {
      Suite s = load_suite(path.string());
      EXPECT_EQ(s.name, path.stem().string());
      EXPECT_FALSE(s.description.empty()) << path;
      EXPECT_FALSE(s.points.empty()) << path;
    } catch (const SuiteError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(Shipped, QuickstartIsSmallAndTiny) {
  Suite s = load_suite(std::string(SB_SOURCE_DIR) + "/suite/quickstart.toml");
  ASSERT_EQ(s.points.size(), 6u);
  for (const auto& p : s.points) {
    EXPECT_EQ(p.get_int("world"), 2);
    EXPECT_NE(p.get_string("model").find("-tiny"), std::string::npos) << p.name;
  }
  EXPECT_EQ(s.points[1].name, "gpt2-tiny/no_shard/hybrid");
  EXPECT_EQ(s.points[1].baseline_id, s.points[0].id);
}

TEST(Shipped, PaperCarriesTheSeedFigures) {
  Suite s = load_suite(std::string(SB_SOURCE_DIR) + "/suite/paper.toml");
  ASSERT_EQ(s.points.size(), 7u);
  const Point& fp32 = s.points[0];
  const Point& int8 = s.points[1];
  EXPECT_EQ(fp32.get_string("model"), "bert-large");
  EXPECT_EQ(int8.get_string("quantization"), "int8-dynamic");
  EXPECT_EQ(int8.baseline_id, fp32.id);
  EXPECT_EQ(fp32.reference, (std::map<std::string, double>{{"latency_ms", 185.0},
                                                           {"memory_gb", 3.2}}));
  EXPECT_EQ(int8.reference, (std::map<std::string, double>{
                                {"accuracy_delta_pct", 0.5}, {"latency_ms", 42.0},
                                {"memory_gb", 0.8}}));
  EXPECT_EQ(s.points[2].get_string("quantization"), "bf16");
  EXPECT_EQ(s.points[2].baseline_id, fp32.id);
  const Point& train = s.points[3];
  EXPECT_EQ(train.reference.at("samples_per_s"), 32.0);
  EXPECT_EQ(train.get_string("dtype"), "fp32");
  // The throughput table's optimized row: the fastest measured, full_shard without
  // compression in dtype auto; the hybrid row carries the compression table's figures.
  EXPECT_EQ(s.points[4].get_string("compression"), "none");
  EXPECT_EQ(s.points[4].get_string("dtype"), "auto");
  EXPECT_EQ(s.points[4].reference.at("samples_per_s"), 124.0);
  EXPECT_EQ(s.points[4].baseline_id, train.id);
  EXPECT_EQ(s.points[6].get_string("compression"), "hybrid");
  EXPECT_EQ(s.points[6].reference.at("tflops_gain_pct"), 17.3);
  EXPECT_EQ(s.points[6].baseline_id, train.id);
  EXPECT_EQ(s.points[5].reference.at("reached_baseline_loss"), 0.0);
}

}  // namespace
}  // namespace sb
