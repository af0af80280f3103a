// submissions.json and squeue, for status and resubmission.
#include "harness/launch/slurm_queue.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/subprocess.h"
#include "harness/launch/results.h"

namespace sb {

static std::string submissions_path(const std::string& dir) { return dir + "/submissions.json"; }

std::vector<Submission> read_submissions(const std::string& dir) {
  std::ifstream in(submissions_path(dir));
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<Submission> out;
  try {
    const nlohmann::json all = nlohmann::json::parse(ss.str());  // named: outlives the loop
    for (const auto& j : all.at("submissions")) {
      Submission s;
      s.job_id = j.at("job_id").get<std::string>();
      s.world = j.at("world").get<std::int64_t>();
      s.points = j.at("points").get<std::vector<std::int64_t>>();
      s.script = j.at("script").get<std::string>();
      s.submitted_at = j.at("submitted_at").get<std::string>();
      out.push_back(s);
    }
  } catch (const nlohmann::json::exception& e) {
    SB_FAIL("{} is corrupt ({}); fix or delete it", submissions_path(dir), e.what());
  }
  return out;
}

void append_submission(const std::string& dir, const Submission& s) {
  nlohmann::json all = {{"submissions", nlohmann::json::array()}};
  for (const auto& o : read_submissions(dir)) {
    all["submissions"].push_back({{"job_id", o.job_id}, {"world", o.world}, {"points", o.points},
                                  {"script", o.script}, {"submitted_at", o.submitted_at}});
  }
  all["submissions"].push_back({{"job_id", s.job_id}, {"world", s.world}, {"points", s.points},
                                {"script", s.script}, {"submitted_at", s.submitted_at}});
  write_file_atomic(submissions_path(dir), all.dump(2) + "\n");
}

bool have_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string d;
  while (std::getline(ss, d, ':'))
    if (!d.empty() && access((d + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

std::map<std::pair<std::string, std::int64_t>, std::string> parse_squeue(const std::string& text) {
  // Lines "1234_5|RUNNING"; with -r every array task has its own line. A job that is not an
  // array ("1234|RUNNING") has no task id and is not ours.
  std::map<std::pair<std::string, std::int64_t>, std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t bar = line.find('|'), us = line.find('_');
    if (bar == std::string::npos || us == std::string::npos || us > bar) continue;
    const std::string task = line.substr(us + 1, bar - us - 1);
    if (task.empty() || task.find_first_not_of("0123456789") != std::string::npos) continue;
    out[{line.substr(0, us), std::stoll(task)}] = line.substr(bar + 1);
  }
  return out;
}

std::map<std::int64_t, std::string> queued_points(const std::string& dir, std::string* error) {
  std::map<std::int64_t, std::string> out;
  const auto subs = read_submissions(dir);
  if (subs.empty()) return out;
  if (!have_program("squeue")) {
    if (error) *error = "squeue not found on PATH";
    return out;
  }
  std::string ids;
  for (const auto& s : subs) ids += (ids.empty() ? "" : ",") + s.job_id;
  ProcessOptions po;
  po.capture_stdout = true;
  po.timeout_s = 30;
  const ProcessResult r = run_process({"squeue", "-h", "-r", "-o", "%i|%T", "-j", ids}, po);
  // squeue exits non-zero when none of the jobs is known any more: nothing is queued then.
  if (!r.ok() && !r.output.empty() && error) *error = "squeue: " + r.describe();
  const auto tasks = parse_squeue(r.output);
  // A later submission of a point wins over an earlier one.
  for (const auto& s : subs)
    for (std::int64_t p : s.points) {
      const auto it = tasks.find({s.job_id, p});
      if (it != tasks.end()) out[p] = it->second;
    }
  return out;
}

}  // namespace sb
