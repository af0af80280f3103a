// Compression policy: presets, the custom keys, and the validator's refusals with reasons.
#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/policy.h"

using namespace sb::comm;

namespace {

sb::SourcePos at_line(int line) { return sb::SourcePos{"suite.toml", line, 1}; }

sb::Point point(const std::string& compression, std::int64_t world, const std::string& strategy) {
  sb::Point p;
  for (const auto& k : sb::registered_keys()) p.set(k.key, k.default_value);  // as expansion does
  p.set("task", std::string("train"));
  p.set("compression", compression, at_line(1));
  p.set("world", world, at_line(2));
  p.set("strategy", strategy, at_line(3));
  p.set("seed", std::int64_t{5});
  return p;
}

// Every diagnostic the registered validators give, as "key: message".
std::vector<std::string> diagnostics(const sb::Point& p) {
  std::vector<sb::Diagnostic> d;
  for (const auto& v : sb::registered_validators()) v(p, d);
  std::vector<std::string> out;
  for (const auto& x : d)
    if (x.key == "compression" || x.key.rfind("compress.", 0) == 0) out.push_back(x.key + ": " + x.message);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Policy, PresetsAreWhatTheDocsSay) {
  EXPECT_EQ(policy_names(), (std::vector<std::string>{"hybrid", "hybrid-topk", "hybrid3d", "naive-int8", "naive-topk", "none", "uniform3d", "custom"}));
  EXPECT_FALSE(policy_preset("none").any());
  EXPECT_EQ(policy_preset("naive-int8").describe(), "param=int8(block=256) grad=int8(block=256) allreduce=int8(block=256)");
  EXPECT_EQ(policy_preset("naive-topk").describe(), "param=none grad=topk(ratio=0.01) allreduce=topk(ratio=0.01)");
  EXPECT_EQ(policy_preset("hybrid").describe(), "param=bf16 grad=int8(block=256,ef) allreduce=int8(block=256,ef)");
  EXPECT_EQ(policy_preset("hybrid-topk").describe(), "param=bf16 grad=int8(block=256,ef) allreduce=topk(ratio=0.01,ef)");
  // The 3D schemes: tensor and pipeline parallelism's kinds appear where compressed.
  EXPECT_EQ(policy_preset("uniform3d").describe(), "param=int8(block=256) grad=int8(block=256) allreduce=int8(block=256) tp_act=int8(block=256) tp_grad=int8(block=256) pp_act=int8(block=256) pp_grad=int8(block=256)");
  EXPECT_EQ(policy_preset("hybrid3d").describe(), "param=bf16 grad=int8(block=256,ef) allreduce=int8(block=256,ef) tp_act=bf16 tp_grad=bf16 pp_act=bf16 pp_grad=bf16");
  EXPECT_STREQ(kind_name(CollectiveKind::TpAct), "tp_act");
  EXPECT_STREQ(key_prefix(CollectiveKind::TpGrad), "compress.tp_grad");
  EXPECT_STREQ(kind_name(CollectiveKind::PpAct), "pp_act");
  EXPECT_STREQ(key_prefix(CollectiveKind::PpGrad), "compress.pp_grad");
  EXPECT_STREQ(kind_name(CollectiveKind::GradReduceScatter), "grad_reduce_scatter");
  auto p = policy_from_point(point("hybrid", 4, "full_shard"));
  EXPECT_EQ(p.grad_reduce_scatter.seed, 5u);  // the point's seed
  std::string msg;
  try {
    policy_preset("zip");
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("unknown compression policy \"zip\"; known: hybrid, hybrid-topk, hybrid3d, naive-int8, naive-topk, none, uniform3d, custom"), std::string::npos) << msg;
  // Every preset passes validation at world 4.
  for (const auto& n : policy_names())
    if (n != "custom") EXPECT_TRUE(diagnostics(point(n, 4, "hybrid_shard")).empty()) << n;
}

TEST(Policy, CustomIsReadFromTheKeys) {
  auto p = point("custom", 4, "hybrid_shard");
  p.set("compress.param.name", std::string("int8"), at_line(5));
  p.set("compress.param.block", std::int64_t{32}, at_line(6));
  p.set("compress.grad.name", std::string("topk"), at_line(7));
  p.set("compress.grad.ratio", 0.02, at_line(8));
  p.set("compress.grad.error_feedback", true, at_line(9));
  p.set("compress.allreduce.name", std::string("powersgd"), at_line(10));
  p.set("compress.allreduce.rank", std::int64_t{2}, at_line(11));
  p.set("compress.allreduce.error_feedback", true, at_line(12));
  auto pol = policy_from_point(p);
  EXPECT_EQ(pol.describe(), "param=int8(block=32) grad=topk(ratio=0.02,ef) allreduce=powersgd(rank=2,ef)");
  EXPECT_TRUE(diagnostics(p).empty()) << diagnostics(p).front();
}

TEST(Policy, ImpossibleCombinationsAreRefusedWithTheReason) {
  auto d = diagnostics(point("hybrid", 1, "no_shard"));
  EXPECT_TRUE(has(d, "compression: compression \"hybrid\" needs at least 2 ranks (world = 1 runs no collectives)")) << d.size();

  auto p = point("custom", 4, "full_shard");
  p.set("compress.param.name", std::string("topk"), at_line(5));
  p.set("compress.grad.name", std::string("powersgd"), at_line(6));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "param_all_gather (compress.param.*): topk would drop 99% of the weights"));
  EXPECT_TRUE(has(d, "grad_reduce_scatter (compress.grad.*): powersgd needs an all-reduce between its two halves"));

  p = point("custom", 2, "full_shard");
  p.set("compress.param.name", std::string("int8"), at_line(5));
  p.set("compress.param.error_feedback", true, at_line(6));
  p.set("compress.grad.name", std::string("bf16"), at_line(7));
  p.set("compress.grad.stochastic", true, at_line(8));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "error feedback needs a quantity that is summed over steps"));
  EXPECT_TRUE(has(d, "stochastic rounding applies to int8 only (compressor is bf16)"));

  // A compressor on a collective the strategy never runs.
  p = point("custom", 2, "no_shard");
  p.set("compress.param.name", std::string("bf16"), at_line(5));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "compress.param.name: strategy no_shard runs no param_all_gather collective"));

  // Error feedback on one batch's activations; tensor-parallel compressors without tp.
  p = point("custom", 2, "full_shard");
  p.set("compress.tp_act.name", std::string("int8"), at_line(5));
  p.set("compress.tp_act.error_feedback", true, at_line(6));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "tp_act (compress.tp_act.*): error feedback re-sends what compression dropped from one batch's activations"));
  EXPECT_TRUE(has(d, "compress.tp_act.name: compress.tp_act / compress.tp_grad compress tensor-parallel traffic, and mesh.tp = 1 has none"));
  // The same for the pipeline's traffic.
  p = point("custom", 2, "full_shard");
  p.set("compress.pp_grad.name", std::string("int8"), at_line(5));
  p.set("compress.pp_grad.error_feedback", true, at_line(6));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "pp_grad (compress.pp_grad.*): error feedback re-sends what compression dropped from one batch's activations"));
  EXPECT_TRUE(has(d, "compress.pp_act.name: compress.pp_act / compress.pp_grad compress pipeline-parallel traffic, and mesh.pp = 1 has none"));

  // compress.* keys without compression = custom.
  p = point("hybrid", 2, "full_shard");
  p.set("compress.grad.ratio", 0.5, at_line(9));
  d = diagnostics(p);
  EXPECT_TRUE(has(d, "compress.grad.ratio: compress.grad.ratio is read only when compression = \"custom\" (it is \"hybrid\")"));
}
