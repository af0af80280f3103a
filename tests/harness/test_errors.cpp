// Errors a user reads: user errors (SB_REQUIRE) say what and where without our source
// location, internal ones (SB_CHECK) keep file:line and the condition; out of memory says
// what ran out, where, the plan's estimate beside the limits and the keys that lower it; the
// cgroup's OOM-kill count read before and after a point; inputs an earlier point writes.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <regex>

#include <gtest/gtest.h>

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/memory_limits.h"
#include "harness/launch/out_of_memory.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// A task whose plan estimate and memory keys the messages quote.
Registrar reg([] {
  for (const char* m : {"gpt2-tiny"}) register_name("model", m, "test model");
  for (const char* s : {"no_shard", "full_shard"}) register_name("strategy", s, "test strategy");
  for (const char* c : {"none"}) register_name("compression", c, "test policy");
  for (const char* q : {"none"}) register_name("quantization", q, "test quantizer");
  for (const char* a : {"naive"}) register_name("attention", a, "test kernel");
  register_name("dtype", "fp32", "test dtype");
  register_task({"train", nullptr, [](const Point& p) { return 1024.0 * p.get_int("batch"); },
                 {},
                 {{"batch", "lower it: fewer rows per step"},
                  {"strategy", "full_shard shards the state"},
                  {"not_a_key", "never shown: the point has no such key"}}});
  KeySpec out{"out_folder", KeyType::String, std::string(""), "", "a folder the point writes"};
  out.writes_path = true;
  register_key(out);
  register_key({"in_folder", KeyType::String, std::string(""), "", "a folder the point reads"});
  // As models/folder_check.cpp does for model folders.
  register_suite_validator([](const std::vector<Point>& points, std::size_t i,
                              std::vector<Diagnostic>& found) {
    const std::string in = points[i].get_string("in_folder");
    if (in.empty()) return;
    const auto w = point_writing(points, in);
    if (!w) found.push_back({"in_folder", "nobody writes " + in, true});
    else if (w->position >= i)
      found.push_back({"in_folder", fmt::format("written by '{}' ({}), later", points[w->position].name, w->key)});
  });
});

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("sb-errors-{}-{}", name, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// ---- User and internal errors ---------------------------------------------------------

TEST(Check, AUserErrorIsItsMessageAndKeepsItsOriginApart) {
  try {
    SB_REQUIRE(1 + 1 == 3, "{}: kv_cache_bytes 10 holds no KV row; raise it", "s.toml:3:1");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "s.toml:3:1: kv_cache_bytes 10 holds no KV row; raise it");
    EXPECT_EQ(e.message(), "s.toml:3:1: kv_cache_bytes 10 holds no KV row; raise it");
    EXPECT_TRUE(std::regex_match(e.origin(), std::regex(".*test_errors\\.cpp:[0-9]+")))
        << e.origin();
    EXPECT_EQ(last_error(), e.what());
  }
  try {
    SB_USER_FAIL("results folder {} is in use", "r");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "results folder r is in use");
  }
}

TEST(Check, AnInternalErrorKeepsFileLineAndTheCondition) {
  try {
    SB_CHECK(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL();
  } catch (const UserError&) {
    FAIL() << "an internal error is no user error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::regex_match(std::string(e.what()),
                                 std::regex(".*test_errors\\.cpp:[0-9]+: check failed: 1 \\+ 1 == 3: "
                                            "arithmetic is broken")))
        << e.what();
    EXPECT_EQ(e.message(), "arithmetic is broken");
  }
}

TEST(Check, KeyAtNamesTheSuiteLineOrTheDefault) {
  Suite s = load_suite_text("[base]\ntask = \"train\"\nbatch = 16\n", "k.toml");
  EXPECT_EQ(s.points[0].key_at("batch"), "k.toml:3:9: batch");
  EXPECT_EQ(s.points[0].key_at("seq"), "k.toml: seq (default)");
}

// ---- Phase and step -------------------------------------------------------------------

TEST(Activity, SaysThePhaseAndStep) {
  set_phase(nullptr);
  set_phase_step(-1);
  EXPECT_EQ(current_activity(), "");
  set_phase("build");
  EXPECT_EQ(current_activity(), "build");
  set_phase_step(3);
  set_phase("step");
  EXPECT_EQ(current_activity(), "step 3");
  set_phase("evaluation");
  EXPECT_EQ(current_activity(), "evaluation after step 3");
}

// ---- Out of memory --------------------------------------------------------------------

TEST(OutOfMemory, TellsHostFromGpuByTheAllocatorsWords) {
  EXPECT_EQ(out_of_memory_kind(std::bad_alloc()), MemoryKind::Host);
  EXPECT_EQ(out_of_memory_kind(std::runtime_error(
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                "139.81 GiB of which 1.19 GiB is free.")),
            MemoryKind::Device);
  EXPECT_EQ(out_of_memory_kind(std::runtime_error(
                "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough "
                "memory: you tried to allocate 68719476736 bytes.")),
            MemoryKind::Host);
  EXPECT_FALSE(out_of_memory_kind(std::runtime_error("shape mismatch")).has_value());
}

TEST(OutOfMemory, SaysWhatRanOutWhereTheEstimateTheLimitsAndTheKeys) {
  Suite s = load_suite_text("[base]\ntask = \"train\"\nbatch = 4096\nseq = 128\n", "oom.toml");
  MemoryLimits lim;
  lim.address_space = std::uint64_t{4} << 30;
  lim.cgroup = std::uint64_t{8} << 30;
  lim.cgroup_dir = "/sys/fs/cgroup/job_7";
  lim.machine = std::uint64_t{64} << 30;
  EXPECT_EQ(lim.describe(), "ulimit -v 4.00 GiB, memory cgroup 8.00 GiB (/sys/fs/cgroup/job_7), "
                            "machine 64.00 GiB");
  EXPECT_EQ(out_of_memory_message(s.points[0], MemoryKind::Host, "", "in step 3", "std::bad_alloc", lim),
            "out of host memory in point 0 (oom), in step 3: std::bad_alloc. For this point the "
            "plan estimates 4.00 MiB of model state per rank (`shardbench plan`'s state/rank: "
            "weights, gradients and optimizer state; activations and buffers come on top); the "
            "limits here: ulimit -v 4.00 GiB, memory cgroup 8.00 GiB (/sys/fs/cgroup/job_7), "
            "machine 64.00 GiB. Keys that lower it: batch = 4096 (lower it: fewer rows per "
            "step); strategy = no_shard (full_shard shards the state).");
  EXPECT_EQ(out_of_memory_message(s.points[0], MemoryKind::Device, "", "",
                                  "CUDA out of memory. Tried to allocate 2.00 GiB", MemoryLimits{}),
            "out of GPU memory in point 0 (oom): CUDA out of memory. Tried to allocate 2.00 GiB. "
            "For this point the plan estimates 4.00 MiB of model state per rank (`shardbench "
            "plan`'s state/rank: weights, gradients and optimizer state; activations and buffers "
            "come on top); the limit is the GPU's own memory (the allocator's words above say how "
            "much it has and holds). Keys that lower it: batch = 4096 (lower it: fewer rows per "
            "step); strategy = no_shard (full_shard shards the state).");
  EXPECT_EQ(MemoryLimits{}.describe(), "none known");
}

TEST(MemoryLimits, FindsTheCgroupOfV1AndV2) {
  const std::string root = temp_dir("cgroup");
  fs::create_directories(root + "/memory/slurm/job_7");
  fs::create_directories(root + "/user.slice/job_8");
  write(root + "/user.slice/job_8/memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n");
  // v1: the memory controller's line names the folder under ROOT/memory.
  EXPECT_EQ(memory_cgroup_dir("12:pids:/slurm\n4:memory:/slurm/job_7\n0::/user.slice/job_8\n", root),
            root + "/memory/slurm/job_7");
  // v2: the unified line, where its folder has memory.events.
  EXPECT_EQ(memory_cgroup_dir("0::/user.slice/job_8\n", root), root + "/user.slice/job_8");
  EXPECT_EQ(memory_cgroup_dir("0::/nowhere\n", root), "");
  EXPECT_EQ(cgroup_oom_kills(root + "/user.slice/job_8"), 2);
  write(root + "/memory/slurm/job_7/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
  EXPECT_EQ(cgroup_oom_kills(root + "/memory/slurm/job_7"), 5);
  EXPECT_EQ(cgroup_oom_kills(root + "/missing"), -1);
  EXPECT_EQ(cgroup_oom_kills(""), -1);
  write(root + "/user.slice/job_8/memory.max", "max\n");
  EXPECT_EQ(cgroup_memory_limit(root + "/user.slice/job_8"), 0u);
  write(root + "/user.slice/job_8/memory.max", "8589934592\n");
  EXPECT_EQ(cgroup_memory_limit(root + "/user.slice/job_8"), std::uint64_t{8} << 30);
  write(root + "/memory/slurm/job_7/memory.limit_in_bytes", "9223372036854771712\n");  // v1's none
  EXPECT_EQ(cgroup_memory_limit(root + "/memory/slurm/job_7"), 0u);
  fs::remove_all(root);
}

TEST(MemoryLimits, TheWatchSeesAnOomKillWhileThePointRan) {
  const std::string dir = temp_dir("watch");
  write(dir + "/memory.events", "oom 0\noom_kill 1\n");
  ASSERT_EQ(setenv("SB_MEMORY_CGROUP", dir.c_str(), 1), 0);
  const OomKillWatch quiet;
  EXPECT_EQ(quiet.killed(), "");
  const OomKillWatch watch;
  write(dir + "/memory.events", "oom 1\noom_kill 2\n");
  EXPECT_EQ(watch.killed(), "the kernel's OOM killer ended 1 process in the memory cgroup " + dir +
                                " while the point ran (oom_kill 1 -> 2)");
  unsetenv("SB_MEMORY_CGROUP");
  fs::remove_all(dir);
}

// ---- Inputs an earlier point writes ---------------------------------------------------

TEST(SuiteValidators, SeeWhichPointWritesAPath) {
  Suite s = load_suite_text(R"([base]
task = "train"
[[zip]]
out_folder = ["./w/a/", "", ""]
in_folder = ["", "w//a", ""]
seed = [1, 2, 3]
)", "order.toml");
  EXPECT_TRUE(s.warnings.empty());
  const auto w = point_writing(s.points, "w/./a");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->position, 0u);
  EXPECT_EQ(w->key, "out_folder");
  EXPECT_FALSE(point_writing(s.points, "w/b").has_value());
  EXPECT_FALSE(point_writing(s.points, "").has_value());
  try {
    load_suite_text("[base]\ntask = \"train\"\n[[zip]]\nout_folder = [\"\", \"w/a\"]\n"
                    "in_folder = [\"w/a\", \"\"]\n", "late.toml");
    FAIL();
  } catch (const SuiteError& e) {
    EXPECT_EQ(std::string(e.what()),
              "late.toml:5:14: in_folder: written by 'out_folder=w/a/in_folder=' (out_folder), later");
  }
  Suite alone = load_suite_text("[base]\ntask = \"train\"\nin_folder = \"w/z\"\n", "alone.toml");
  ASSERT_EQ(alone.warnings.size(), 1u);
  EXPECT_EQ(alone.warnings[0], "alone.toml:3:13: in_folder: warning: nobody writes w/z");
}

}  // namespace
}  // namespace sb
