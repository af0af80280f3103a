// BaseConfig from a point, and the rules of the suite's [slurm] table (base_config.h).
#include "harness/spec/base_config.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "harness/spec/config.h"
#include "harness/spec/expand.h"
#include "harness/spec/point.h"

namespace sb {

const BaseConfig& base_config(const Point& p) { return config<BaseConfig>(p); }

const std::vector<std::string>& slurm_keys() {
  static const std::vector<std::string> k = {"account", "qos",  "partition", "gres",
                                             "nodes",   "constraint", "time", "extra"};
  return k;
}

std::string set_slurm_string(SlurmTable& t, const std::string& key, const std::string& value) {
  if (key == "time") {
    t.time = value;
    t.time_s = slurm_time_seconds(value);
    if (t.time_s > 0) return "";
    return fmt::format("\"{}\" is not a Slurm time limit: write \"MM\", \"MM:SS\", \"HH:MM:SS\", "
                       "\"D-HH\", \"D-HH:MM\" or \"D-HH:MM:SS\", more than 0 and at most 365 days",
                       printable(value));
  }
  // Besides letters and digits: names (account, qos) take - _ .; a partition list adds ",";
  // GRES adds ":" ("gpu:a100:4,nvme:1"); a constraint is an expression ("a100&(ib|roce)").
  const std::string extra = key == "partition"    ? "-_.,"
                            : key == "gres"       ? "-_.,:"
                            : key == "constraint" ? "-_.,:&|*[]()!"
                                                  : "-_.";
  if (value.empty()) return "empty value: give one, or remove the key for the cluster's default";
  for (char c : value)
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == std::string::npos)
      return fmt::format("\"{}\" may use only letters, digits and any of \"{}\" (it becomes the "
                         "job script line #SBATCH --{}=..., which sbatch reads without quoting)",
                         printable(value), extra, key);
  (key == "account" ? t.account : key == "qos" ? t.qos : key == "partition" ? t.partition
   : key == "gres" ? t.gres : t.constraint) = value;
  return "";
}

std::string slurm_nodes_problem(const SlurmTable& t, const std::vector<Point>& points) {
  for (const Point& p : points) {
    const int world = base_config(p).world;
    if (world < t.nodes)
      return fmt::format("nodes = {} but point {} ({}) runs {} rank{}: each node needs at least "
                         "one; lower nodes, or put the points with fewer ranks in another suite",
                         t.nodes, p.index, p.name, world, world == 1 ? "" : "s");
  }
  return "";
}

namespace {
// Options shardbench writes itself, with their short forms and the setting that decides them:
// a second line would contradict it (sbatch takes the later one, but `status` and the
// pre-timeout requeue rely on ours).
struct Owned {
  const char *option, *short_form, *instead;
};
constexpr Owned kOwned[] = {
    {"job-name", "-J", "the suite name"},
    {"array", "-a", "the points to submit"},
    {"ntasks", "-n", "the points' world"},
    {"cpus-per-task", "-c", "the points' threads"},
    {"time", "-t", "the time key of [slurm] (or `submit --time-min`)"},
    {"output", "-o", "`submit --results`"},
    {"open-mode", "", "shardbench (logs are appended across requeues)"},
    {"signal", "", "shardbench (the pre-timeout signal drives requeue)"},
    {"requeue", "", "shardbench (the pre-timeout signal drives requeue)"},
    {"no-requeue", "", "shardbench (the pre-timeout signal drives requeue)"},
    {"partition", "-p", "the partition key of [slurm]"},
    {"account", "-A", "the account key of [slurm]"},
    {"qos", "-q", "the qos key of [slurm]"},
    {"gres", "", "the gres key of [slurm]"},
    {"nodes", "-N", "the nodes key of [slurm]"},
    {"constraint", "-C", "the constraint key of [slurm]"},
};
}  // namespace

std::string slurm_extra_problem(const std::string& line) {
  const std::string head = "#SBATCH ";
  for (char c : line)
    if (std::iscntrl(static_cast<unsigned char>(c)))
      return fmt::format("\"{}\" contains a control character: give one #SBATCH option per "
                         "string of the array", printable(line));
  if (line.rfind(head, 0) != 0 || line.size() == head.size() || line[head.size()] != '-')
    return fmt::format("\"{}\" is not an #SBATCH line: each string must start with \"#SBATCH "
                       "-\", e.g. \"#SBATCH --mail-type=END\"", printable(line));
  const std::size_t end = line.find_first_of("= ", head.size());
  const std::string opt = line.substr(head.size(), end - head.size());
  for (const Owned& o : kOwned) {
    const std::string s = o.short_form;
    const bool is_long = opt == std::string("--") + o.option;
    if (is_long || (!s.empty() && opt.rfind(s, 0) == 0 && opt.rfind("--", 0) != 0))
      return fmt::format("\"{}\" sets --{}, which shardbench writes itself from {}",
                         printable(line), o.option, o.instead);
  }
  return "";
}

std::int64_t slurm_time_seconds(const std::string& text) {
  // [D-]parts: with days, parts are H[:M[:S]]; without, M, M:S or H:M:S.
  const std::size_t dash = text.find('-');
  const bool days = dash != std::string::npos;
  std::vector<std::int64_t> n;
  std::size_t at = days ? dash + 1 : 0;
  std::int64_t d = 0;
  auto number = [](const std::string& s, std::int64_t* out) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *out = std::stoll(s);
    return true;
  };
  if (days && !number(text.substr(0, dash), &d)) return -1;
  for (;;) {
    const std::size_t colon = text.find(':', at);
    std::int64_t v = 0;
    if (!number(text.substr(at, colon - at), &v)) return -1;
    n.push_back(v);
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (n.size() > 3) return -1;
  // The leading field may be large ("90" minutes); the ones after it are clock fields.
  for (std::size_t i = 1; i < n.size(); ++i)
    if (n[i] > 59) return -1;
  std::int64_t s = 0;
  if (days)
    s = d * 86400 + n[0] * 3600 + (n.size() > 1 ? n[1] * 60 : 0) + (n.size() > 2 ? n[2] : 0);
  else if (n.size() == 1) s = n[0] * 60;
  else if (n.size() == 2) s = n[0] * 60 + n[1];
  else s = n[0] * 3600 + n[1] * 60 + n[2];
  if (days && n[0] > 23) return -1;
  constexpr std::int64_t kYear = 365 * 86400;  // as time_limit: a longer job is a typo
  return s > 0 && s <= kYear ? s : -1;
}

}  // namespace sb
