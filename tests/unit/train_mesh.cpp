// The train task's process mesh at plan time (workloads/train/train_mesh.cpp): shard_group is
// mesh.dp_shard's old name; hybrid sharding's default shard group is a node's ranks (both
// data-parallel sizes 0 until launch); every other strategy shards over all data-parallel
// ranks; replicas are refused for a strategy without them, and the alias disagreeing with the
// key; a [baseline] of another strategy does not inherit the replicas.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "harness/spec/suite.h"

namespace {

std::string suite(const std::string& base) {
  return fmt::format(R"([suite]
name = "mesh"
[base]
task = "train"
model = "gpt2-tiny"
batch = 8
seq = 16
steps = 3
{}
)",
                     base);
}

const sb::Point& only(const sb::Suite& s) {
  EXPECT_EQ(s.points.size(), 1u);
  return s.points.at(0);
}

std::string errors_of(const std::string& base) {
  try {
    sb::load_suite_text(suite(base), "mesh.toml");
  } catch (const sb::SuiteError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainMesh, ShardingOverEveryRankIsTheDefault) {
  const auto s = sb::load_suite_text(suite("strategy = \"full_shard\"\nworld = 4"), "mesh.toml");
  EXPECT_EQ(only(s).get_int("mesh.dp_shard"), 4);
  EXPECT_EQ(only(s).get_int("mesh.dp_replicate"), 1);
}

TEST(TrainMesh, HybridShardsWithinANodeByDefault) {
  const auto s = sb::load_suite_text(suite("strategy = \"hybrid_shard\"\nworld = 4"), "mesh.toml");
  EXPECT_EQ(only(s).get_int("mesh.dp_shard"), 0);  // resolved at launch: a node's ranks
  EXPECT_EQ(only(s).get_int("mesh.dp_replicate"), 0);
}

TEST(TrainMesh, ShardGroupIsTheShardDimension) {
  const auto a = sb::load_suite_text(suite("strategy = \"hybrid_shard\"\nworld = 4\nshard_group = 2"),
                                     "mesh.toml");
  EXPECT_EQ(only(a).get_int("mesh.dp_shard"), 2);
  EXPECT_EQ(only(a).get_int("mesh.dp_replicate"), 2);
  const auto b = sb::load_suite_text(suite("strategy = \"hybrid_shard\"\nworld = 4\nmesh.dp_shard = 2"),
                                     "mesh.toml");
  EXPECT_EQ(only(b).get_int("mesh.dp_shard"), 2);
  EXPECT_EQ(only(b).get_int("mesh.dp_replicate"), 2);
  // Only hybrid sharding reads shard_group: a matrix over strategies sets it once.
  const auto c = sb::load_suite_text(suite("strategy = \"full_shard\"\nworld = 4\nshard_group = 2"),
                                     "mesh.toml");
  EXPECT_EQ(only(c).get_int("mesh.dp_shard"), 4);
  EXPECT_EQ(only(c).get_int("mesh.dp_replicate"), 1);
}

TEST(TrainMesh, ReplicasAreRefusedWithoutAStrategyThatKeepsThem) {
  EXPECT_NE(errors_of("strategy = \"full_shard\"\nworld = 4\nmesh = { dp_replicate = 2 }")
                .find("mesh.dp_replicate: mesh.dp_replicate = 2: strategy 'full_shard' keeps no "
                      "replicas (it shards over every data-parallel rank); set "
                      "mesh.dp_replicate = 1, or use a strategy that replicates shard groups: "
                      "hybrid_shard"),
            std::string::npos)
      << errors_of("strategy = \"full_shard\"\nworld = 4\nmesh = { dp_replicate = 2 }");
}

TEST(TrainMesh, TheAliasDisagreeingWithTheKeyIsRefused) {
  const std::string e = errors_of("strategy = \"hybrid_shard\"\nworld = 4\nshard_group = 2\nmesh.dp_shard = 4");
  EXPECT_NE(e.find("mesh.dp_shard: shard_group = 2 and mesh.dp_shard = 4 disagree: shard_group is "
                   "the old name of mesh.dp_shard; set only mesh.dp_shard"),
            std::string::npos)
      << e;
}

TEST(TrainMesh, ABaselineOfAnotherStrategyKeepsNoReplicas) {
  const auto s = sb::load_suite_text(suite("world = 4\nshard_group = 2\n[axes]\nstrategy = "
                                           "[\"no_shard\", \"hybrid_shard\"]\n[baseline]\nstrategy = \"no_shard\""),
                                     "mesh.toml");
  ASSERT_EQ(s.points.size(), 2u);  // the baseline and the point
  for (const auto& p : s.points) {
    const bool hybrid = p.get_string("strategy") == "hybrid_shard";
    EXPECT_EQ(p.get_int("mesh.dp_shard"), hybrid ? 2 : 4) << p.get_string("strategy");
    EXPECT_EQ(p.get_int("mesh.dp_replicate"), hybrid ? 2 : 1) << p.get_string("strategy");
  }
}

}  // namespace
