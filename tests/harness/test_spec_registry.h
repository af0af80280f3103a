// Test registrations for the spec tests: the names and workload keys a suite may use, as the
// workloads would register them. Fixed on purpose: the literal ids in the tests hash the
// complete canonical config, so adding a key here changes them.
#pragma once
#include <filesystem>
#include <string>

#include "harness/workload.h"

namespace sb::testing {

inline Registrar test_registry([] {
  for (const char* m : {"gpt2-tiny", "bert-tiny", "bert-large"}) register_name("model", m, "test model");
  for (const char* s : {"no_shard", "zero1", "full_shard"}) register_name("strategy", s, "test strategy");
  for (const char* c : {"none", "naive-int8", "hybrid"}) register_name("compression", c, "test policy");
  for (const char* q : {"none", "int8-dynamic"}) register_name("quantization", q, "test quantizer");
  for (const char* a : {"naive", "chunked"}) register_name("attention", a, "test kernel");
  register_name("dtype", "fp32", "test dtype");
  register_name("task", "micro", "named but not a registered task: plan prints '-'");
  register_name("task", "infer", "named but not a registered task: plan prints '-'");
  // train: a made-up state size (1 MiB of state, divided by world when fully sharded), so the
  // plan's state column is checked exactly.
  // Its memory terms: that state as half parameters, half gradients (plan --memory).
  const auto state = [](const Point& p) {
    if (p.get_int("seq") == 4096) throw Error("test: no estimate at seq 4096");
    double bytes = 1024.0 * 1024.0;
    if (p.get_string("strategy") == "full_shard") bytes /= double(p.get_int("world"));
    return bytes;
  };
  register_task({"train", nullptr, state, [state](const Point& p) {
                   const double half = state(p) / 2;
                   return std::vector<std::pair<std::string, double>>{{"param", half},
                                                                      {"grad", half}};
                 }});
  KeySpec lr{"lr", KeyType::Float, 1e-3, "", "learning rate"};
  lr.tasks = {"train"};  // as the train workload registers it
  register_key(lr);
  register_key({"compress.grad.ratio", KeyType::Float, 0.01, "", "top-k fraction of gradients"});
  register_key({"data", KeyType::String, std::string("markov"), "", "corpus"});
  register_key({"flag", KeyType::Bool, false, "", "a test switch"});
  register_key({"shard_group", KeyType::Int, std::int64_t{0}, "", "ranks per shard group"});
  // A buggy validator (throws instead of reporting) must not hide the other diagnostics.
  register_validator([](const Point& p, std::vector<Diagnostic>&) {
    if (p.get_int("seed") == 666) throw Error("seed 666 is cursed");
  });
  // A plan-time warning, as the train workload gives for a data file that does not exist
  // (yet: an earlier suite may write it).
  register_validator([](const Point& p, std::vector<Diagnostic>& out) {
    const std::string& data = p.get_string("data");
    if (data != "markov" && !std::filesystem::exists(data))
      out.push_back({"data", fmt::format("data file '{}' does not exist (yet)", data), true});
  });
  // A cross-key rule, as a workload would register it.
  register_validator([](const Point& p, std::vector<Diagnostic>& out) {
    std::int64_t g = p.get_int("shard_group"), w = p.get_int("world");
    if (g > 0 && w % g != 0)
      out.push_back({"shard_group", fmt::format("shard_group {} does not divide world {}; use a "
                                                "divisor of the world size", g, w)});
  });
});

}  // namespace sb::testing
