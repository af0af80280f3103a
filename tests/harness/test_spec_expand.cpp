// Suite expansion: product order, zip, exclude, baselines, repetitions, references, flattened
// keys, and ids that are stable across runs and machines (a literal id is asserted).
#include <set>

#include <gtest/gtest.h>

#include "harness/spec/suite.h"
#include "tests/harness/test_spec_registry.h"

namespace sb {
namespace {

std::vector<std::string> names(const Suite& s) {
  std::vector<std::string> out;
  for (const auto& p : s.points) out.push_back(p.name);
  return out;
}

TEST(Expand, ProductFirstAxisSlowestInFileOrder) {
  // "strategy" sorts after "compression" but is written first: file order decides.
  Suite s = load_suite_text(R"(
[base]
world = 2
[axes]
strategy = ["no_shard", "full_shard"]
compression = ["none", "naive-int8", "hybrid"]
)", "dir/product.toml");
  EXPECT_EQ(s.name, "product");  // the file stem
  EXPECT_EQ(names(s), (std::vector<std::string>{"no_shard/none", "no_shard/naive-int8",
                                                "no_shard/hybrid", "full_shard/none",
                                                "full_shard/naive-int8", "full_shard/hybrid"}));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(s.points[i].index, i);
    EXPECT_EQ(s.points[i].suite, "product");
    EXPECT_EQ(s.points[i].get_int("world"), 2);
    EXPECT_EQ(s.points[i].id.size(), 12u);
  }
  EXPECT_EQ(s.points[4].get_string("strategy"), "full_shard");
  EXPECT_EQ(s.points[4].get_string("compression"), "naive-int8");
  EXPECT_EQ(s.points[4].where("compression").str(), "dir/product.toml:6:24");
}

TEST(Expand, EveryRegisteredKeyIsFilled) {
  Suite s = load_suite_text("[base]\nseed = 7\n", "one.toml");
  ASSERT_EQ(s.points.size(), 1u);
  const Point& p = s.points[0];
  for (const auto& k : registered_keys()) EXPECT_TRUE(p.has(k.key)) << k.key;
  EXPECT_EQ(p.values().size(), registered_keys().size());
  EXPECT_EQ(p.get_int("seed"), 7);
  EXPECT_EQ(p.get_double("time_limit"), 600.0);
  EXPECT_EQ(p.get_string("launcher"), "mpirun");
  EXPECT_EQ(p.name, "one");  // nothing varied: the suite name
  EXPECT_EQ(p.baseline_id, "");
}

TEST(Expand, ZipVariesTogetherThenProductWithAxes) {
  Suite s = load_suite_text(R"(
[[zip]]
model = ["gpt2-tiny", "bert-tiny"]
batch = [8, 4]
[axes]
strategy = ["no_shard", "full_shard"]
)", "zip.toml");
  EXPECT_EQ(names(s), (std::vector<std::string>{
                          "gpt2-tiny/batch=8/no_shard", "gpt2-tiny/batch=8/full_shard",
                          "bert-tiny/batch=4/no_shard", "bert-tiny/batch=4/full_shard"}));
  EXPECT_EQ(s.points[2].get_string("model"), "bert-tiny");
  EXPECT_EQ(s.points[2].get_int("batch"), 4);
}

TEST(Expand, ExcludeDropsPointsMatchingAllKeys) {
  Suite s = load_suite_text(R"(
[axes]
strategy = ["no_shard", "zero1", "full_shard"]
compression = ["none", "hybrid"]
[[exclude]]
strategy = ["no_shard", "zero1"]
compression = "hybrid"
)", "ex.toml");
  EXPECT_EQ(names(s), (std::vector<std::string>{"no_shard/none", "zero1/none", "full_shard/none",
                                                "full_shard/hybrid"}));
  EXPECT_EQ(s.points[3].index, 3);
}

TEST(Expand, BaselineIsThePointWithTheKeysReplaced) {
  Suite s = load_suite_text(R"(
[axes]
strategy = ["no_shard", "full_shard"]
compression = ["none", "hybrid"]
[baseline]
compression = "none"
)", "bl.toml");
  ASSERT_EQ(s.points.size(), 4u);
  EXPECT_EQ(s.points[0].baseline_id, "");  // is its own baseline
  EXPECT_EQ(s.points[1].baseline_id, s.points[0].id);
  EXPECT_EQ(s.points[2].baseline_id, "");
  EXPECT_EQ(s.points[3].baseline_id, s.points[2].id);
}

// Two configurations, two repetitions each, "none" the baseline.
const char* const kTwoByTwo = R"(
[base]
repetitions = 2
[axes]
compression = ["none", "hybrid"]
[baseline]
compression = "none"
)";

TEST(Expand, RepetitionsExpandFastestWithTheirOwnIds) {
  Suite s = load_suite_text(kTwoByTwo, "rep.toml");
  EXPECT_EQ(names(s), (std::vector<std::string>{"none/r0", "none/r1", "hybrid/r0", "hybrid/r1"}));
  std::set<std::string> ids;
  for (const auto& p : s.points) {
    ids.insert(p.id);
    EXPECT_EQ(p.get_int("repetition"), p.index % 2);
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(s.points[2].baseline_id, s.points[0].id);  // repetition r vs repetition r
  EXPECT_EQ(s.points[3].baseline_id, s.points[1].id);
}

// repetition_order = "interleaved": repetition 0 of every point, then repetition 1; the same
// ids as grouped (a point's identity does not depend on when it runs), baselines r vs r.
TEST(Expand, InterleavedRepetitionsRunEveryPointOncePerRound) {
  const std::string body = kTwoByTwo;
  Suite g = load_suite_text(body, "rep.toml");
  Suite s = load_suite_text("[suite]\nrepetition_order = \"interleaved\"\n" + body, "rep.toml");
  EXPECT_EQ(names(s), (std::vector<std::string>{"none/r0", "hybrid/r0", "none/r1", "hybrid/r1"}));
  for (const auto& p : s.points) {
    EXPECT_EQ(p.index, &p - &s.points[0]);
    EXPECT_EQ(p.get_int("repetition"), p.index / 2);
  }
  EXPECT_EQ(s.points[0].id, g.points[0].id);
  EXPECT_EQ(s.points[1].id, g.points[2].id);
  EXPECT_EQ(s.points[2].id, g.points[1].id);
  EXPECT_EQ(s.points[1].baseline_id, s.points[0].id);
  EXPECT_EQ(s.points[3].baseline_id, s.points[2].id);
  try {
    load_suite_text("[suite]\nrepetition_order = \"random\"\n" + body, "bad.toml");
    ADD_FAILURE() << "repetition_order = random loaded";
  } catch (const sb::SuiteError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:2:20: repetition_order: repetition_order \"random\" is not grouped"),
              std::string::npos) << e.what();
  }
}

TEST(Expand, ReferenceFiguresAttachToMatchingPoints) {
  Suite s = load_suite_text(R"(
[base]
task = "infer"
model = "bert-large"
[axes]
quantization = ["none", "int8-dynamic"]
[[reference]]
match = { model = "bert-large", quantization = "none" }
latency_ms = 185.0
memory_gb = 3.2
[[reference]]
match = { quantization = "int8-dynamic" }
latency_ms = 42
)", "ref.toml");
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.points[0].reference, (std::map<std::string, double>{{"latency_ms", 185.0},
                                                                  {"memory_gb", 3.2}}));
  EXPECT_EQ(s.points[1].reference, (std::map<std::string, double>{{"latency_ms", 42.0}}));
}

TEST(Expand, DottedKeysAndNestedTablesAreTheSameKey) {
  Suite a = load_suite_text("[base]\ncompress.grad.ratio = 0.5\n", "a.toml");
  Suite b = load_suite_text("[base.compress.grad]\nratio = 0.5\n", "b.toml");
  Suite c = load_suite_text("[base]\ncompress = { grad = { ratio = 0.5 } }\n", "c.toml");
  EXPECT_EQ(a.points[0].get_double("compress.grad.ratio"), 0.5);
  EXPECT_EQ(a.points[0].id, b.points[0].id);
  EXPECT_EQ(a.points[0].id, c.points[0].id);
}

TEST(Expand, IntLiteralForAFloatKeyIsTheSameFloat) {
  Suite a = load_suite_text("[base]\ntime_limit = 600\n", "a.toml");
  Suite b = load_suite_text("[base]\ntask = \"train\"\n", "b.toml");  // every key at its default
  EXPECT_TRUE(std::holds_alternative<double>(a.points[0].get("time_limit")));
  EXPECT_EQ(a.points[0].id, b.points[0].id);
}

TEST(Expand, IdsAreStableLiterals) {
  // The id hashes the canonical config: sha256 of the JSON below, first 12 hex digits
  // (checked independently with Python's hashlib). If this changes, every stored result's
  // id changes: only change it on purpose (new base key, new canonical format).
  Suite s = load_suite_text(R"(
[base]
model = "gpt2-tiny"
world = 2
[axes]
strategy = ["no_shard", "full_shard"]
)", "stable.toml");
  EXPECT_EQ(s.points[0].canonical(),
            R"({"attention":"naive","batch":8,"compress.grad.ratio":0.01,"compression":"none",)"
            R"("data":"markov","dtype":"fp32","flag":false,"launcher":"mpirun","lr":0.001,)"
            R"("mesh.dp_replicate":1,"mesh.dp_shard":2,"mesh.ep":1,"mesh.pp":1,"mesh.sp":1,)"
            R"("mesh.tp":1,"model":"gpt2-tiny","quantization":"none","repetition":0,"repetitions":1,)"
            R"("seed":1,"seq":64,"shard_group":0,"stall_timeout":-1.0,"steps":10,"strategy":"no_shard",)"
            R"("task":"train","threads":0,"time_limit":600.0,"warmup":2,"world":2})");
  EXPECT_EQ(s.points[0].id, "ae3ca29a447a");
  EXPECT_EQ(s.points[1].id, "0ca39a9ef1b7");
  // And the same on a second expansion, from a differently formatted but equal file.
  Suite again = load_suite_text(
      "[axes]\nstrategy=['no_shard','full_shard']\n[base]\nworld=2\n", "other-name.toml");
  EXPECT_EQ(again.points[0].id, s.points[0].id);
  EXPECT_EQ(again.points[1].id, s.points[1].id);
}

TEST(Expand, CanonicalRoundTripOfExpandedPoints) {
  Suite s = load_suite_text(R"(
[base]
lr = 3e-4
flag = true
data = "/tmp/corpus with spaces.txt"
[axes]
world = [1, 2]
)", "rt.toml");
  for (const auto& p : s.points) {
    Point q = Point::from_canonical(p.canonical());
    EXPECT_EQ(q.values(), p.values());
  }
  EXPECT_EQ(s.points[1].name, "world=2");
}

TEST(FindPoint, ByIndexOrId) {
  Suite s = load_suite_text("[axes]\nstrategy = [\"no_shard\", \"full_shard\"]\n", "fp.toml");
  EXPECT_EQ(&find_point(s, "1"), &s.points[1]);
  EXPECT_EQ(&find_point(s, s.points[0].id), &s.points[0]);
  try {
    find_point(s, "7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no point '7' in suite 'fp' (fp.toml): give an index "
                                         "0..1 or a 12-digit id (see `shardbench plan fp.toml`)"),
              std::string::npos) << e.what();
    // A user's mistake: the message alone, not the source line that found it.
    EXPECT_EQ(std::string(e.what()).rfind("no point '7'", 0), 0u) << e.what();
    EXPECT_NE(dynamic_cast<const UserError*>(&e), nullptr);
  }
}

}  // namespace
}  // namespace sb
