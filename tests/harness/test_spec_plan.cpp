// `shardbench plan` and `shardbench keys`: the exact table, the state column from the task's
// TaskInfo ("-" when the task is not linked in), and exit code 2 with every diagnostic.
#include <filesystem>
#include <fstream>
#include <regex>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "harness/command.h"
#include "harness/core/sha256.h"
#include "harness/spec/plan.h"
#include "tests/harness/test_spec_registry.h"

namespace sb {
namespace {

const char* kSuite = R"([suite]
description = "plan test"
[base]
world = 2
[axes]
task = ["train", "infer"]
strategy = ["no_shard", "full_shard"]
[baseline]
strategy = "no_shard"
)";

TEST(Plan, TableWithStateBytesPerRank) {
  Suite s = load_suite_text(kSuite, "plan.toml");
  ASSERT_EQ(s.points.size(), 4u);
  // The train points have the ids of Expand.IdsAreStableLiterals: same configuration.
  std::string expected = fmt::format(
      "suite plan (plan.toml, sha256 {})\n"
      "plan test\n"
      "index  id            name              task   world  baseline  state/rank\n"
      "    0  ae3ca29a447a  train/no_shard    train      2         -    1.00 MiB\n"
      "    1  0ca39a9ef1b7  train/full_shard  train      2         0  512.00 KiB\n"
      "    2  d6facdc0b776  infer/no_shard    infer      2         -           -\n"
      "    3  9fb8dbd0ca44  infer/full_shard  infer      2         2           -\n"
      "4 points\n",
      sha256_hex(kSuite).substr(0, 12));
  EXPECT_EQ(format_plan(s), expected);
}

// plan --memory: the task's memory terms per point, "-" for a task without them, and an
// estimate that throws is a note.
TEST(Plan, MemoryTermsPerPoint) {
  EXPECT_EQ(format_memory(load_suite_text(kSuite, "plan.toml")),
            "memory per rank (bytes; docs/METRICS.md \"Memory model\")\n"
            "index  name                   param        grad\n"
            "    0  train/no_shard    512.00 KiB  512.00 KiB\n"
            "    1  train/full_shard  256.00 KiB  256.00 KiB\n"
            "    2  infer/no_shard             -           -\n"
            "    3  infer/full_shard           -           -\n");
  Suite s = load_suite_text("[axes]\nseq = [64, 4096]\n", "est.toml");
  EXPECT_EQ(format_memory(s), "memory per rank (bytes; docs/METRICS.md \"Memory model\")\n"
                              "index  name           param        grad\n"
                              "    0  seq=64    512.00 KiB  512.00 KiB\n"
                              "    1  seq=4096           -           -\n"
                              "memory of point 1: test: no estimate at seq 4096\n");
}

TEST(Plan, AFailingEstimateIsANoteNotAFailure) {
  Suite s = load_suite_text("[axes]\nseq = [64, 4096]\n", "est.toml");
  EXPECT_EQ(format_plan(s),
            fmt::format("suite est (est.toml, sha256 {})\n"
                        "index  id            name      task   world  baseline  state/rank\n"
                        "    0  {}  seq=64    train      1         -    1.00 MiB\n"
                        "    1  {}  seq=4096  train      1         -           ?\n"
                        "state/rank of point 1: test: no estimate at seq 4096\n"
                        "2 points\n",
                        sha256_hex("[axes]\nseq = [64, 4096]\n").substr(0, 12), s.points[0].id,
                        s.points[1].id));
}

// Columns a workload registers (the models library's parameter counts) sit between baseline
// and state/rank; a cell that throws is "?" with one note per point and message, even when
// several cells of the point fail the same way; an sb::Error's note is its message, without
// the source location it was raised at.
TEST(Plan, RegisteredColumnsAndTheirFailures) {
  Suite s = load_suite_text("[axes]\nseq = [64, 4096]\n", "cols.toml");
  auto cell = [](const Point& p) -> std::string {
    if (p.get_int("seq") > 1024)  // the note shows the message, not where it was raised
      throw Error("m.cpp:9: check failed: seq <= 1024: no count at seq 4096", "no count at seq 4096");
    return std::to_string(p.get_int("seq") * 2);
  };
  EXPECT_EQ(format_plan(s, {{"double", cell}, {"again", cell}}),
            fmt::format("suite cols (cols.toml, sha256 {})\n"
                        "index  id            name      task   world  baseline  double  again  state/rank\n"
                        "    0  {}  seq=64    train      1         -     128    128    1.00 MiB\n"
                        "    1  {}  seq=4096  train      1         -       ?      ?           ?\n"
                        "double of point 1: no count at seq 4096\n"
                        "state/rank of point 1: test: no estimate at seq 4096\n"
                        "2 points\n",
                        sha256_hex("[axes]\nseq = [64, 4096]\n").substr(0, 12), s.points[0].id,
                        s.points[1].id));
  // Nothing registered in this binary (no models library): the table of Plan.TableWith...
  EXPECT_TRUE(plan_columns().empty());
  EXPECT_EQ(format_plan(s), format_plan(s, {}));
}

TEST(Plan, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(3.2 * 1024 * 1024 * 1024), "3.20 GiB");
}

// Runs `shardbench ARGS...` through the registered commands; returns the exit code.
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

std::string write_temp(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(PlanCommand, PrintsThePlan) {
  std::string path = write_temp("sb_plan_ok.toml", kSuite);
  ::testing::internal::CaptureStdout();
  int rc = run_cli({"plan", path});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, format_plan(load_suite(path)));
}

TEST(PlanCommand, InvalidSuiteExits2WithEveryDiagnostic) {
  std::string path = write_temp("sb_plan_bad.toml", "[base]\nworld = 0\nstratgy = \"x\"\n");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = run_cli({"plan", path});
  std::string err = ::testing::internal::GetCapturedStderr();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, path + ":2:9: world: 0 is out of range: world must be between 1 and 1048576 "
                     "(`shardbench keys` lists each key's range)\n" + path +
                     ":3:1: stratgy: unknown key; did you mean 'strategy'? (`shardbench keys` "
                     "lists every key)\n" +
                     path + ": 2 errors; the suite was not expanded\n");
}

// The line of `shardbench keys` for `key`, its columns (separated by 2+ spaces) joined by " | ".
std::string row(const std::string& out, const std::string& key) {
  const auto at = out.find("\n" + key + " ");
  if (at == std::string::npos) return "(no row for " + key + ")";
  const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  return std::regex_replace(line, std::regex(" {2,}"), " | ");
}

TEST(KeysCommand, ListsKeysAndNameSets) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_cli({"keys"}), 0);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, format_keys());
  // One line per key, aligned; base keys and the test's workload keys alike.
  EXPECT_NE(out.find(fmt::format("{} keys\n", registered_keys().size())), std::string::npos);
  // Ranges and the tasks that read a key (empty: every task); columns joined by " | ".
  EXPECT_EQ(row(out, "batch"), "batch | int | 8 | 1 .. 16777216 | train,infer,serve,shapes | GLOBAL samples "
                               "per optimizer step or per inference batch; divisible by world");
  EXPECT_EQ(row(out, "time_limit"), "time_limit | float | 600.0 | 0.0 .. 31536000.0 | all | "
                                    "seconds the point may run before it is stopped and marked "
                                    "failed (> 0)");
  EXPECT_EQ(row(out, "lr"), "lr | float | 0.001 | finite | train | learning rate");
  EXPECT_EQ(row(out, "shard_group"), "shard_group | int | 0 | -2147483648 .. 2147483647 | all | "
                                     "ranks per shard group");
  EXPECT_NE(out.find("\nstrategy             name(strategy)      \"no_shard\""), std::string::npos);
  EXPECT_NE(out.find("\nreference figures ([[reference]] in a suite; read by the reports)\n"
                     "  latency_ms             inference latency per batch (ms)\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("\nlauncher:\n  mpirun  Open MPI's mpirun -np WORLD\n  srun    Slurm's srun "
                     "inside an allocation\n"),
            std::string::npos) << out;
}

}  // namespace
}  // namespace sb
