// Registries behind harness/workload.h (keys, name sets, validators, tasks) and the BASE
// keys every point has. Workloads add theirs at static-init time, so every registry is a
// function-local static (constructed on first use, whatever the static-init order).
#include "harness/workload.h"

#include <algorithm>
#include <map>

#include "harness/core/check.h"

namespace sb {
namespace {

// Kept sorted by key so `shardbench keys` and lookups do not depend on link order.
std::vector<KeySpec>& keys() {
  static std::vector<KeySpec> k;
  return k;
}
// set -> name -> doc; std::map keeps names sorted for "known names are ..." messages.
std::map<std::string, std::map<std::string, std::string>>& names() {
  static std::map<std::string, std::map<std::string, std::string>> n;
  return n;
}
std::vector<Validator>& validators() {
  static std::vector<Validator> v;
  return v;
}
std::map<std::string, TaskInfo>& tasks() {
  static std::map<std::string, TaskInfo> t;
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
  auto& k = keys();
  auto it = std::lower_bound(k.begin(), k.end(), spec.key,
                             [](const KeySpec& a, const std::string& b) { return a.key < b; });
  if (it != k.end() && it->key == spec.key) {
    // Two workloads may share a key (train and infer both read "data") if they agree on it.
    SB_CHECK(it->type == spec.type && it->default_value == spec.default_value &&
                 it->name_set == spec.name_set,
             "register_key '{}': registered twice with a different type, default or name set; "
             "use one registration (or a different key)", spec.key);
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
  names()[set].emplace(name, doc);  // first registration's doc wins
}

std::vector<std::pair<std::string, std::string>> registered_names(const std::string& set) {
  auto it = names().find(set);
  if (it == names().end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::vector<std::string> registered_name_sets() {
  std::vector<std::string> out;
  for (const auto& [set, n] : names()) out.push_back(set);
  return out;
}

void register_validator(Validator v) { validators().push_back(std::move(v)); }
const std::vector<Validator>& registered_validators() { return validators(); }

void register_task(TaskInfo info) {
  SB_CHECK(!info.task.empty(), "register_task: empty task name");
  SB_CHECK(tasks().count(info.task) == 0, "register_task '{}': registered twice", info.task);
  register_name("task", info.task, "a registered workload");
  std::string t = info.task;
  tasks().emplace(t, std::move(info));
}

const TaskInfo* find_task(const std::string& task) {
  auto it = tasks().find(task);
  return it == tasks().end() ? nullptr : &it->second;
}

namespace {
// The BASE keys: what every workload has. Workload-specific keys live with the workloads.
Registrar base_keys([] {
  using I = std::int64_t;
  auto name = [](const char* k, const char* set, const char* def, const char* doc) {
    register_key({k, KeyType::Name, std::string(def), set, doc});
  };
  auto integer = [](const char* k, I def, const char* doc) {
    register_key({k, KeyType::Int, def, "", doc});
  };
  name("task", "task", "train", "what runs: train, infer or micro (registered workloads)");
  name("model", "model", "gpt2-tiny", "model architecture and size");
  name("strategy", "strategy", "no_shard", "sharding strategy (ZeRO stage)");
  name("compression", "compression", "none", "communication compression policy");
  name("quantization", "quantization", "none", "inference quantization");
  name("attention", "attention", "naive", "attention kernel");
  name("dtype", "dtype", "fp32", "parameter and compute dtype");
  integer("world", 1, "number of MPI ranks (>= 1)");
  integer("threads", 0, "intra-op threads per rank; 0 = the node's cores / ranks on the node");
  integer("batch", 8, "GLOBAL samples per optimizer step or per inference batch; divisible by world");
  integer("seq", 64, "sequence length in tokens (>= 1)");
  integer("steps", 10, "optimizer steps (train) or batches (infer), warm-up included (>= 1)");
  integer("warmup", 2, "first steps excluded from statistics (0 <= warmup < steps)");
  integer("seed", 1, "seed of every random stream of the point");
  integer("repetitions", 1, "expand each point into this many repetitions (>= 1)");
  integer("repetition", 0, "which repetition this point is; set by expansion, not by suites");
  register_key({"time_limit", KeyType::Float, 600.0, "",
                "seconds the point may run before it is stopped and marked failed (> 0)"});
  name("launcher", "launcher", "mpirun", "how ranks are started: mpirun or srun");
  // The harness owns the launchers, so their names are registered here (harness/launch).
  register_name("launcher", "mpirun", "Open MPI's mpirun -np WORLD");
  register_name("launcher", "srun", "Slurm's srun inside an allocation");
});
}  // namespace

}  // namespace sb
