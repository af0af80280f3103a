// Typed configuration (harness/spec/config.h) and the one Registry (harness/core/registry.h):
// a declaration registers its keys with their types, defaults, ranges and tasks; config<S>
// reads a point once into S; a section's validator runs on its tasks' points only; a registry
// refuses a duplicate and lists the known names for an unknown one.
#include <gtest/gtest.h>

#include "harness/core/registry.h"
#include "harness/spec/config.h"
#include "harness/spec/point.h"

namespace sb {
namespace {

struct TestSection {
  std::int64_t steps_left = 0;
  int width = 0;
  double rate = 0;
  bool on = false;
  std::string label;
  static void declare(Fields<TestSection>& f) {
    f.tasks({"test_task"});
    f.add("cfgtest.steps_left", &TestSection::steps_left, 7, "steps to go").range(0, 100).unit("steps");
    f.add("cfgtest.width", &TestSection::width, 3, "a width").range(1, 64);
    f.add("cfgtest.rate", &TestSection::rate, 0.5, "a rate").range(0.0, 1.0);
    f.add("cfgtest.on", &TestSection::on, true, "a switch");
    f.add("cfgtest.label", &TestSection::label, "x", "a label");
    f.validate([](const TestSection& c, const Point&, std::vector<Diagnostic>& out) {
      if (c.width > c.steps_left) out.push_back({"cfgtest.width", "wider than steps_left"});
    });
  }
};
SB_CONFIG_SECTION(TestSection);

TEST(ConfigSection, RegistersEveryKeyWithTypeDefaultRangeUnitAndTasks) {
  const KeySpec* s = find_key("cfgtest.steps_left");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->type, KeyType::Int);
  EXPECT_EQ(s->default_value, Value{std::int64_t{7}});
  EXPECT_EQ(s->min_int, 0);
  EXPECT_EQ(s->max_int, 100);
  EXPECT_EQ(s->unit, "steps");
  EXPECT_EQ(s->tasks, std::vector<std::string>{"test_task"});
  EXPECT_EQ(find_key("cfgtest.width")->type, KeyType::Int);
  EXPECT_EQ(find_key("cfgtest.rate")->type, KeyType::Float);
  EXPECT_EQ(find_key("cfgtest.rate")->max_float, 1.0);
  EXPECT_EQ(find_key("cfgtest.on")->type, KeyType::Bool);
  EXPECT_EQ(find_key("cfgtest.label")->default_value, Value{std::string("x")});
}

Point point_with(std::int64_t steps, std::int64_t width, const std::string& task = "test_task") {
  Point p;
  for (const KeySpec& k : registered_keys()) p.set(k.key, k.default_value);  // a full point
  p.set("task", task);
  p.set("cfgtest.steps_left", steps);
  p.set("cfgtest.width", width);
  p.set("cfgtest.rate", std::int64_t{1});  // an int where a float is declared widens
  p.set("cfgtest.on", false);
  p.set("cfgtest.label", std::string("y"));
  return p;
}

TEST(ConfigSection, ReadsEachFieldOnceAndRereadsAfterAChange) {
  Point p = point_with(9, 4);
  const TestSection& c = config<TestSection>(p);
  EXPECT_EQ(c.steps_left, 9);
  EXPECT_EQ(c.width, 4);
  EXPECT_EQ(c.rate, 1.0);
  EXPECT_FALSE(c.on);
  EXPECT_EQ(c.label, "y");
  EXPECT_EQ(&config<TestSection>(p), &c);  // cached: the same object
  Point q = p;                              // a copy shares the cache ...
  EXPECT_EQ(&config<TestSection>(q), &c);
  q.set("cfgtest.width", std::int64_t{5});  // ... until it changes
  EXPECT_EQ(config<TestSection>(q).width, 5);
  EXPECT_EQ(config<TestSection>(p).width, 4);
}

std::vector<Diagnostic> validate(const Point& p) {
  std::vector<Diagnostic> out;
  for (const auto& v : registered_validators()) v(p, out);
  return out;
}

bool has_key(const std::vector<Diagnostic>& d, const std::string& key) {
  for (const auto& x : d)
    if (x.key == key) return true;
  return false;
}

TEST(ConfigSection, ValidatesOnlyThePointsOfItsTasks) {
  EXPECT_TRUE(has_key(validate(point_with(2, 5)), "cfgtest.width"));
  EXPECT_FALSE(has_key(validate(point_with(9, 5)), "cfgtest.width"));
  EXPECT_FALSE(has_key(validate(point_with(2, 5, "other_task")), "cfgtest.width"));
}

TEST(Registry, RefusesADuplicateAndListsTheKnownNamesForAnUnknownOne) {
  Registry<int> r("test variant");
  r.add("b", "second", 2);
  r.add("a", "first", 1);
  EXPECT_EQ(r.get("a"), 1);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"a", "b"}));
  try {
    r.add("a", "again", 3);
    FAIL() << "a duplicate name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test variant 'a' is registered twice"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(r.get("a"), 1);
  try {
    r.get("c");
    FAIL() << "an unknown name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown test variant 'c'; known: a, b"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sb
