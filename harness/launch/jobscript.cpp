// Rendering of sbatch job-array scripts from the template in jobscripts/.
#include "harness/launch/jobscript.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/core/subprocess.h"

#ifndef SHARDBENCH_SOURCE_DIR
#define SHARDBENCH_SOURCE_DIR "."
#endif

namespace sb {

std::string array_spec(const std::vector<std::int64_t>& idx, int max_parallel) {
  SB_CHECK(!idx.empty(), "a job array needs at least one point");
  std::string s;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += j == i ? fmt::format("{}", idx[i]) : fmt::format("{}-{}", idx[i], idx[j]);
    i = j + 1;
  }
  if (max_parallel > 0) s += fmt::format("%{}", max_parallel);
  return s;
}

std::string slurm_time(int minutes) {
  SB_CHECK(minutes > 0, "a Slurm time limit must be positive, got {} minutes", minutes);
  return fmt::format("{}:{:02d}:00", minutes / 60, minutes % 60);
}

std::string read_job_template(const std::string& name) {
  const char* env = std::getenv("SHARDBENCH_JOBSCRIPTS");
  const std::string dir = env && *env ? env : SHARDBENCH_SOURCE_DIR "/jobscripts";
  const std::string path = dir + "/" + name;
  std::ifstream in(path);
  SB_CHECK(in.good(), "job script template {} not found; set SHARDBENCH_JOBSCRIPTS to the "
                      "folder holding shardbench's jobscripts/", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
// The #SBATCH lines of the cluster settings, in a fixed order. The suite reader has checked the
// values; this refuses what would still break a line (a caller that did not go through it).
std::string slurm_lines(const JobScriptSpec& s) {
  std::string out;
  auto line = [&](const std::string& text) { out += (out.empty() ? "" : "\n") + text; };
  auto cntrl = [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0; };
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  const std::pair<const char*, std::string> options[] = {
      {"partition", s.partition}, {"account", s.account}, {"qos", s.qos},
      {"nodes", s.nodes > 0 ? std::to_string(s.nodes) : ""}, {"gres", s.gres},
      {"constraint", s.constraint}};
  for (const auto& [option, value] : options) {
    SB_CHECK(std::none_of(value.begin(), value.end(), space), "--{} '{}' contains whitespace, "
             "which an #SBATCH line cannot hold", option, value);
    if (!value.empty()) line(fmt::format("#SBATCH --{}={}", option, value));
  }
  for (const auto& x : s.extra) {
    SB_CHECK(x.rfind("#SBATCH ", 0) == 0 && std::none_of(x.begin(), x.end(), cntrl),
             "extra job script line '{}' is not one #SBATCH line", x);
    line(x);
  }
  return out;
}
}  // namespace

std::string render_job_script(const std::string& tmpl, const JobScriptSpec& s) {
  // #SBATCH lines are read by sbatch, not by a shell, so they cannot be quoted: refuse paths
  // that would need it rather than write a script that means something else.
  for (char c : s.results_dir)
    SB_CHECK(!std::isspace(static_cast<unsigned char>(c)) && c != '\'' && c != '"' && c != '\\',
             "results folder '{}' contains whitespace, a quote or a backslash, which #SBATCH "
             "--output cannot express; choose another --results folder", s.results_dir);
  std::string launch;
  for (const auto& a : s.launch_prefix) launch += (launch.empty() ? "" : " ") + shell_quote(a);
  const std::map<std::string, std::string> values = {
      {"SUITE_NAME", s.suite_name},
      {"JOB_NAME", fmt::format("sb-{}-{}", s.suite_name,
                               s.job_tag.empty() ? fmt::format("w{}", s.world) : s.job_tag)},
      {"ARRAY", array_spec(s.indices, s.max_parallel)},
      {"WORLD", std::to_string(s.world)},
      {"THREADS", std::to_string(s.threads)},
      {"TIME", slurm_time(s.time_min)},
      {"LOG_DIR_RAW", s.results_dir + "/logs"},
      {"LOG_DIR", shell_quote(s.results_dir + "/logs")},
      {"SIGNAL_S", std::to_string(s.signal_s)},
      {"SLURM_LINES", slurm_lines(s)},
      {"EXE", shell_quote(s.exe)},
      {"SUITE_FILE", shell_quote(s.suite_file)},
      {"RESULTS_DIR", shell_quote(s.results_dir)},
      {"LAUNCH", launch},
      {"LAUNCHER", s.launcher},
  };
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = tmpl.find("{{", pos);
    if (open == std::string::npos) break;
    const size_t close = tmpl.find("}}", open);
    SB_CHECK(close != std::string::npos, "job script template: unclosed '{{{{' at offset {}", open);
    const std::string key = tmpl.substr(open + 2, close - open - 2);
    const auto it = values.find(key);
    SB_CHECK(it != values.end(), "job script template: unknown placeholder {{{{{}}}}}", key);
    out += tmpl.substr(pos, open - pos) + it->second;
    pos = close + 2;
  }
  out += tmpl.substr(pos);
  return out;
}

}  // namespace sb
