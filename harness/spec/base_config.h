// The base keys every point has (registered, with their defaults and ranges, in
// harness/workload.cpp; expansion fills the defaults in), read once and typed: the one place
// the harness reads them, so no caller keeps a fallback of its own that could disagree.
// Also the suite's [slurm] table, typed the same way: where a real cluster runs the points.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb {

class Point;

template <class S> class Fields;

struct BaseConfig {
  std::string task, launcher;
  int world = 1;
  int threads = 0;  // per rank; 0 = the node's cores shared by the ranks on it
  std::int64_t steps = 0, warmup = 0, seed = 0;
  std::int64_t repetitions = 1, repetition = 0;
  double time_limit_s = 0;  // seconds; 0 = none
  double stall_timeout_s = -1;  // seconds; -1 = automatic, 0 = no watchdog (core/watchdog.h)
  static void declare(Fields<BaseConfig>& f);  // harness/workload.cpp
};

// config<BaseConfig>(p). Throws sb::Error naming the key when the point lacks one (a point not
// made by expansion).
const BaseConfig& base_config(const Point& p);

// [slurm]: what `shardbench submit` writes as #SBATCH lines (docs/SUITES.md). Suite-wide, not
// per point: a cluster's account or partition is not a dimension of the benchmark, and the
// point ids stay the same on every cluster. Empty / 0 = not set (the cluster's default).
struct SlurmTable {
  std::string account, qos, partition, gres, constraint;
  int nodes = 0;
  std::string time;                // as written ("1-12:00:00"); time_s is its value
  std::int64_t time_s = 0;
  std::vector<std::string> extra;  // whole lines, each "#SBATCH ..."
};

// The keys of [slurm], in the order the job script writes them.
const std::vector<std::string>& slurm_keys();
// Sets the string key `key` of [slurm] (account, qos, partition, gres, constraint, time) and
// returns "", or returns what is wrong with `value` and how to fix it. The values reach #SBATCH
// lines, which sbatch reads without shell quoting: each key allows only the characters its
// Slurm option needs.
std::string set_slurm_string(SlurmTable& t, const std::string& key, const std::string& value);
// "" when every point has at least t.nodes ranks (sbatch refuses more nodes than tasks), else
// the message naming the first point that has fewer.
std::string slurm_nodes_problem(const SlurmTable& t, const std::vector<Point>& points);
// "" when `line` may be an `extra` line, else why not: one "#SBATCH --option" line without
// control characters, and not an option shardbench writes itself (the key to use instead).
std::string slurm_extra_problem(const std::string& line);
// Seconds of a Slurm time ("M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"); -1 when `text`
// is not one of those or is not positive (0 would mean "no limit", and the pre-timeout
// signal needs a limit).
std::int64_t slurm_time_seconds(const std::string& text);

}  // namespace sb
