// Suite input that cannot hurt (issue 14, section 2): integer ranges before narrowing, points
// counted before they are built, the file stem held to the suite-name rule, plan-time warnings
// for missing input files, and the one list of reference figures kept in step with the reports.
// The error texts themselves are in the bad-suite corpus (tests/harness/data/bad).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "harness/command.h"
#include "harness/spec/expand.h"
#include "harness/spec/suite.h"
#include "tests/harness/test_spec_registry.h"

namespace sb {
namespace {

std::string axis(const char* key, int from, int n) {
  std::string s = fmt::format("{} = [", key);
  for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", from + i);
  return s + "]\n";
}

std::string error_of(const std::string& text, const std::string& path) {
  try {
    load_suite_text(text, path);
  } catch (const SuiteError& e) {
    return e.what();
  }
  return "(loaded)";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Ranges, TheBoundsThemselvesAreAllowed) {
  Suite s = load_suite_text("[base]\nworld = 1048576\nbatch = 1048576\nthreads = 4096\n"
                            "repetitions = 1000\ntime_limit = 31536000\n", "bounds.toml");
  EXPECT_EQ(s.points.size(), 1000u);
  EXPECT_EQ(s.points[0].get_int("world"), 1048576);
}

TEST(Ranges, AnOutOfRangeValueNeverReachesAPoint) {
  EXPECT_EQ(error_of("[base]\nworld = 4294967296\n", "w.toml"),
            "w.toml:2:9: world: 4294967296 is out of range: world must be between 1 and 1048576 "
            "(`shardbench keys` lists each key's range)");
  EXPECT_EQ(error_of("[axes]\nlr = [1e-3, nan]\n", "lr.toml"),
            "lr.toml:2:13: lr: nan is not a number a run can use: lr must be a finite number "
            "(`shardbench keys` lists each key's range)");
}

TEST(Count, ProductMinusExcludesTimesRepetitions) {
  Suite s = load_suite_text(R"(
[axes]
strategy = ["no_shard", "zero1", "full_shard"]
compression = ["none", "naive-int8", "hybrid"]
repetitions = [1, 2]
[[exclude]]
strategy = ["no_shard", "zero1"]
compression = "hybrid"
[[exclude]]
strategy = "no_shard"
repetitions = 2
)", "count.toml");
  // 3 x 3 x (1 + 2) = 27, minus 2 x 1 x 3 = 6 (first), minus 2 x 2 not already gone (second).
  EXPECT_EQ(s.points.size(), 27u - 6u - 4u);
}

TEST(Count, AgreesWithExpansion) {
  // Overlapping excludes on keys of a zip, an axis and the base: the count is what expands.
  const std::string text = R"(
[base]
repetitions = 3
[[zip]]
model = ["gpt2-tiny", "bert-tiny", "bert-large"]
batch = [8, 4, 2]
[axes]
strategy = ["no_shard", "zero1", "full_shard"]
seed = [1, 2, 3, 4]
[[exclude]]
model = ["bert-tiny", "bert-large"]
strategy = "zero1"
[[exclude]]
batch = 2
seed = [3, 4]
[[exclude]]
strategy = ["zero1", "full_shard"]
seed = 4
[[exclude]]
world = 1
seed = 1
model = "gpt2-tiny"
)";
  // 3 x 3 x 4 = 36 combinations; the excludes drop 8, 6, 6 and 3, of which 2 + 2 + 2 are
  // dropped twice and 1 three times: 36 - (23 - 6 + 1) = 18, times 3 repetitions.
  Suite s = load_suite_text(text, "agree.toml");
  EXPECT_EQ(s.points.size(), 54u);
}

TEST(Count, ExcludesCountBeforeTheLimit) {
  // 200 x 100 = 20000 combinations, 10000 of them excluded: exactly the limit, accepted.
  std::string text = "[axes]\n" + axis("seed", 1, 200) + axis("threads", 0, 100) +
                     "[[exclude]]\nseed = [" ;
  for (int i = 101; i <= 200; ++i) text += fmt::format("{}{}", i > 101 ? ", " : "", i);
  text += "]\n";
  EXPECT_EQ(load_suite_text(text, "ex.toml").points.size(), kMaxSuitePoints);
}

TEST(Count, AHugeProductIsRefusedWithoutBuildingIt) {
  // 1000^3 = 10^9 points used to grow memory until std::bad_alloc.
  const std::string text = "[axes]\n" + axis("seed", 1, 1000) + axis("threads", 0, 1000) +
                           axis("steps", 1, 1000);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = error_of(text, "huge.toml");
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(err, "huge.toml:2:1: seed: the suite expands to 1000000000 points (seed 1000 x "
                 "threads 1000 x steps 1000), more than the limit of 10000 (docs/SUITES.md): "
                 "split it into suite files of at most 10000 points each (e.g. one per group of "
                 "values of seed), or drop values");
}

TEST(Count, AnAxisOf100000ValuesIsRefusedQuickly) {
  // It used to expand in 7.9 s and 1.4 GB here (34 s and 4.6 GB with every workload's keys).
  const std::string text = "[axes]\n" + axis("seed", 1, 100000);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of(text, "axis.toml").find("the suite expands to 100000 points"),
            std::string::npos);
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(Count, SaturatesInsteadOfOverflowing) {
  std::string text = "[axes]\n";
  for (const char* k : {"seed", "threads", "steps", "warmup", "batch", "seq", "world"})
    text += axis(k, 1, 800);  // 800^7 > 2^64
  EXPECT_NE(error_of(text, "sat.toml").find("expands to more than 4611686018427387904 points"),
            std::string::npos);
}

TEST(Count, ExcludesTooIntricateToCountFallBackToTheProduct) {
  // 18 two-valued axes and an exclude per axis: the walk would visit 2^19 states, more than its
  // budget, so the count is the product before excludes (and says so).
  const std::vector<std::pair<const char*, const char*>> axes{
      {"world", "1, 2"}, {"threads", "1, 2"}, {"batch", "2, 4"}, {"seq", "1, 2"},
      {"steps", "5, 6"}, {"warmup", "0, 1"}, {"seed", "1, 2"}, {"shard_group", "0, 1"},
      {"lr", "0.1, 0.2"}, {"compress.grad.ratio", "0.1, 0.2"}, {"time_limit", "10, 20"},
      {"flag", "true, false"}, {"strategy", "'no_shard', 'zero1'"},
      {"compression", "'none', 'hybrid'"}, {"attention", "'naive', 'chunked'"},
      {"model", "'gpt2-tiny', 'bert-tiny'"}, {"data", "'a', 'b'"},
      {"quantization", "'none', 'int8-dynamic'"}};
  std::string text = "[axes]\n", excludes;
  for (const auto& [key, values] : axes) {
    text += fmt::format("\"{}\" = [{}]\n", key, values);
    const std::string first(values, std::string(values).find(','));
    excludes += fmt::format("[[exclude]]\n\"{}\" = {}\n", key, first);
  }
  EXPECT_NE(error_of(text + excludes, "intricate.toml")
                .find("the suite expands to 262144 points before [[exclude]] ("),
            std::string::npos);
}

TEST(SuiteName, TheFileStemFollowsTheNameRule) {
  EXPECT_EQ(error_of("[base]\nseed = 2\n", "dir/a\nb.toml"),
            "dir/a\\nb.toml: suite: the suite is named after the file, \"a\\nb\", but a suite "
            "name may use only letters, digits, '-', '_' and '.' (it names the results folder "
            "and the Slurm job): set name = \"...\" under [suite], or rename the file");
  EXPECT_NE(error_of("[base]\nseed = 2\n", "x;rm -rf ~.toml").find("suite: the suite is named "
                                                                   "after the file, \"x;rm -rf ~\""),
            std::string::npos);
  EXPECT_NE(error_of("", "$(reboot).toml").find("set name = \"...\" under [suite]"),
            std::string::npos);
  // A [suite] name makes the file name irrelevant; a plain stem is the name.
  EXPECT_EQ(load_suite_text("[suite]\nname = \"ok\"\n[base]\nseed = 2\n", "dir/a\nb.toml").name, "ok");
  EXPECT_EQ(load_suite_text("[base]\nseed = 2\n", "dir/quant-accuracy_2.v1.toml").name,
            "quant-accuracy_2.v1");
}

TEST(Warnings, AMissingInputFileIsAWarningNotAnError) {
  Suite s = load_suite_text("[axes]\ndata = [\"markov\", \"/nonexistent/corpus.bin\"]\n",
                            "warn.toml");
  EXPECT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.warnings, (std::vector<std::string>{
                            "warn.toml:2:19: data: warning: data file '/nonexistent/corpus.bin' "
                            "does not exist (yet)"}));
}

int run_cli(std::vector<std::string> args) {
  CLI::App app{"shardbench"};
  app.require_subcommand(1);
  for (const auto& c : cli::commands()) c.setup(*app.add_subcommand(c.name, c.help));
  std::vector<const char*> argv{"shardbench"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(int(argv.size()), const_cast<char**>(argv.data()));
  } catch (const cli::Exit& e) {
    return e.code;
  }
  return 0;
}

TEST(Warnings, PlanPrintsThemAndSucceeds) {
  auto path = (std::filesystem::temp_directory_path() / "sb_plan_warn.toml").string();
  std::ofstream(path) << "[base]\ndata = \"/nonexistent/corpus.bin\"\n";
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = run_cli({"plan", path});
  std::string err = ::testing::internal::GetCapturedStderr();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(err, path + ":2:8: data: warning: data file '/nonexistent/corpus.bin' does not "
                        "exist (yet)\n");
  EXPECT_NE(out.find("1 point\n"), std::string::npos) << out;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReferenceFigures, TheListIsTheOneTheReportsRead) {
  // docs/REPORTS.md lists the keys the analysis reads; analysis/paper.py reads each of them.
  const std::string doc = read(std::filesystem::path(SB_SOURCE_DIR) / "docs/REPORTS.md");
  const std::string paper = read(std::filesystem::path(SB_SOURCE_DIR) / "analysis/paper.py");
  const auto at = doc.find("Reference keys the analysis reads:");
  ASSERT_NE(at, std::string::npos);
  const std::string sentence = doc.substr(at, doc.find('.', at) - at);
  std::set<std::string> documented;
  std::regex tick("`([a-z_]+)`");
  for (auto it = std::sregex_iterator(sentence.begin(), sentence.end(), tick);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  std::set<std::string> ours;
  for (const auto& [name, what] : reference_figures()) {
    ours.insert(name);
    EXPECT_NE(paper.find("\"" + name + "\""), std::string::npos) << name << " not in paper.py";
  }
  EXPECT_EQ(ours, documented);
}

}  // namespace
}  // namespace sb
