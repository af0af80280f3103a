// Registries behind harness/workload.h (keys, name sets, validators, tasks) and the BASE
// keys every point has. Workloads add theirs at static-init time, so every registry is a
// function-local static (constructed on first use, whatever the static-init order). Name sets
// and tasks are Registry<Info>s (harness/core/registry.h): a name registered twice fails at
// start-up.
#include "harness/workload.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "harness/core/registry.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/expand.h"
#include "harness/core/mpi_context.h"

namespace sb {
namespace {

// Kept sorted by key so `shardbench keys` and lookups do not depend on link order.
std::vector<KeySpec>& keys() {
  static std::vector<KeySpec> k;
  return k;
}
// A name of a set is its doc alone (the Registry keeps it).
struct NameEntry {};
// set -> its names; Registry keeps them sorted for "known names are ..." messages.
std::map<std::string, Registry<NameEntry>>& names() {
  static std::map<std::string, Registry<NameEntry>> n;
  return n;
}
std::vector<Validator>& validators() {
  static std::vector<Validator> v;
  return v;
}
std::vector<SuiteValidator>& suite_validators() {
  static std::vector<SuiteValidator> v;
  return v;
}
// The names join the "task" name set (the `task` key's).
Registry<TaskInfo>& tasks() {
  static Registry<TaskInfo> t("task", "task");
  return t;
}

bool value_matches_type(const Value& v, KeyType t) {
  switch (t) {
    case KeyType::Bool: return std::holds_alternative<bool>(v);
    case KeyType::Int: return std::holds_alternative<std::int64_t>(v);
    case KeyType::Float: return std::holds_alternative<double>(v);
    case KeyType::String:
    case KeyType::Name: return std::holds_alternative<std::string>(v);
  }
  return false;
}

}  // namespace

void register_key(KeySpec spec) {
  SB_CHECK(!spec.key.empty(), "register_key: empty key");
  SB_CHECK(value_matches_type(spec.default_value, spec.type),
           "register_key '{}': the default value {} does not have the key's type; write the "
           "default as the C++ type of the key (bool, std::int64_t, double, std::string)",
           spec.key, value_to_string(spec.default_value));
  SB_CHECK(spec.type != KeyType::Name || !spec.name_set.empty(),
           "register_key '{}': a Name key needs a name_set", spec.key);
  const std::string bad_default = range_problem(spec, spec.default_value);
  SB_CHECK(bad_default.empty(), "register_key '{}': the default is outside the key's range: {}",
           spec.key, bad_default);
  auto& k = keys();
  auto it = std::lower_bound(k.begin(), k.end(), spec.key,
                             [](const KeySpec& a, const std::string& b) { return a.key < b; });
  if (it != k.end() && it->key == spec.key) {
    // Two workloads may share a key (train and infer both read "data") if they agree on it;
    // then both tasks read it (an empty list, every task, absorbs any other).
    SB_CHECK(it->type == spec.type && it->default_value == spec.default_value &&
                 it->name_set == spec.name_set && it->accepts_path == spec.accepts_path &&
                 it->min_int == spec.min_int &&
                 it->max_int == spec.max_int && it->min_float == spec.min_float &&
                 it->max_float == spec.max_float,
             "register_key '{}': registered twice with a different type, default, name set or "
             "range; use one registration (or a different key)", spec.key);
    if (it->tasks.empty() || spec.tasks.empty()) it->tasks.clear();
    for (const auto& t : spec.tasks)
      if (!it->tasks.empty() && std::find(it->tasks.begin(), it->tasks.end(), t) == it->tasks.end())
        it->tasks.push_back(t);
    return;
  }
  k.insert(it, std::move(spec));
}

const std::vector<KeySpec>& registered_keys() { return keys(); }

const KeySpec* find_key(const std::string& key) {
  const auto& k = keys();
  auto it = std::lower_bound(k.begin(), k.end(), key,
                             [](const KeySpec& a, const std::string& b) { return a.key < b; });
  return (it != k.end() && it->key == key) ? &*it : nullptr;
}

void register_name(const std::string& set, const std::string& name, const std::string& doc) {
  SB_CHECK(!set.empty() && !name.empty(), "register_name: empty set or name ('{}', '{}')", set,
           name);
  names().try_emplace(set, fmt::format("'{}' name", set)).first->second.add(name, doc, {});
}

std::vector<std::pair<std::string, std::string>> registered_names(const std::string& set) {
  auto it = names().find(set);
  if (it == names().end()) return {};
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : it->second.names()) out.emplace_back(n, it->second.doc(n));
  return out;
}

std::vector<std::string> registered_name_sets() {
  std::vector<std::string> out;
  for (const auto& [set, n] : names()) out.push_back(set);
  return out;
}

namespace {
std::vector<Canonicalizer>& canonicalizers() {
  static std::vector<Canonicalizer> c;
  return c;
}
}  // namespace
void register_canonicalizer(Canonicalizer c) { canonicalizers().push_back(std::move(c)); }
void canonicalize(Point& p) {
  canonicalize_mesh(p);
  for (const auto& c : canonicalizers()) c(p);
}

void register_validator(Validator v) { validators().push_back(std::move(v)); }
const std::vector<Validator>& registered_validators() { return validators(); }

void register_suite_validator(SuiteValidator v) { suite_validators().push_back(std::move(v)); }
const std::vector<SuiteValidator>& registered_suite_validators() { return suite_validators(); }

std::optional<PathWriter> point_writing(const std::vector<Point>& points, const std::string& path) {
  if (path.empty()) return std::nullopt;
  const auto norm = [](const std::string& s) {
    std::string n = std::filesystem::path(s).lexically_normal().generic_string();
    while (n.size() > 1 && n.back() == '/') n.pop_back();  // "a/b/" names the folder "a/b"
    return n;
  };
  const std::string want = norm(path);
  for (std::size_t i = 0; i < points.size(); ++i)
    for (const KeySpec& ks : registered_keys())
      if (ks.writes_path && points[i].has(ks.key) && ks.type == KeyType::String) {
        const std::string& v = points[i].get_string(ks.key);
        if (!v.empty() && norm(v) == want) return PathWriter{i, ks.key};
      }
  return std::nullopt;
}

void register_task(TaskInfo info) {
  const std::string name = info.task;
  tasks().add(name, "a registered workload", std::move(info));
}

const TaskInfo* find_task(const std::string& task) { return tasks().find(task); }

// The BASE keys: what every point has, whatever its task.
void BaseConfig::declare(Fields<BaseConfig>& f) {
  using I = std::int64_t;
  const I int_max = std::numeric_limits<std::int32_t>::max();
  // Ranges are generous sanity bounds: they keep a typo (world = 4294967296) from being
  // narrowed into nonsense (-np 0), not policy.
  f.name("task", &BaseConfig::task, "task", "train",
         "what runs: train, infer, serve or micro (registered workloads)");
  f.add("world", &BaseConfig::world, 1, "number of MPI ranks").range(1, I{1} << 20);
  f.add("threads", &BaseConfig::threads, 0,
        "intra-op threads per rank; 0 = the node's cores / ranks on the node").range(0, 4096);
  f.add("steps", &BaseConfig::steps, 10,
        "optimizer steps (train) or batches (infer), warm-up included").range(I{1}, int_max);
  f.add("warmup", &BaseConfig::warmup, 2, "first steps excluded from statistics (warmup < steps)")
      .range(I{0}, int_max);
  f.add("seed", &BaseConfig::seed, 1, "seed of every random stream of the point").range(I{0}, int_max);
  f.add("repetitions", &BaseConfig::repetitions, 1, "expand each point into this many repetitions")
      .range(1, 1000);
  f.add("repetition", &BaseConfig::repetition, 0,
        "which repetition this point is; set by expansion, not by suites").range(0, 999);
  // At most a year: the time reaches Slurm as whole minutes in an int (`submit`).
  f.add("time_limit", &BaseConfig::time_limit_s, 600.0,
        "seconds the point may run before it is stopped and marked failed (> 0)")
      .range(0.0, 365.0 * 24 * 3600);
  // -1 rather than a name: a Float key holds "automatic" only as a number (core/watchdog.h).
  f.add("stall_timeout", &BaseConfig::stall_timeout_s, -1.0,
        "seconds a rank may stall (no heartbeat, or no progress while others wait for it) "
        "before every rank is ended; -1 = 10x the median step time so far, at least 60 s; "
        "0 = no stall watchdog")
      .range(-1.0, 365.0 * 24 * 3600);
  f.validate([](const BaseConfig& c, const Point& p, std::vector<Diagnostic>& out) {
    if (c.stall_timeout_s < 0 && c.stall_timeout_s != -1)
      out.push_back({"stall_timeout",
                     fmt::format("stall_timeout must be -1 (automatic: 10x the median step time, "
                                 "at least 60 s), 0 (no watchdog) or seconds > 0, got {}",
                                 value_to_string(p.get("stall_timeout")))});
  });
  // The launcher names are registered by the launchers themselves (harness/launch/).
  f.name("launcher", &BaseConfig::launcher, "launcher", "mpirun",
         "how ranks are started: mpirun or srun");
}
SB_CONFIG_SECTION(BaseConfig);

bool RunContext::stop_agreed() const {
  int any = stop.stop() ? 1 : 0;
  heartbeat::Waiting w(heartbeat::issued({"MPI_Allreduce", "world", "mpi", "stop agreement"}));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, world),
            "MPI_Allreduce (agreeing whether to stop)");
  return any != 0;
}

}  // namespace sb
