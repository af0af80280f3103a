// Requeue or fail after Slurm's pre-timeout signal (`shardbench after-timeout`, called by the
// job script of jobscripts/sbatch-array.sh.in).
#include "harness/launch/slurm_timeout.h"

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/launch/results.h"
#include "harness/spec/base_config.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {
namespace {

// How to avoid the time-out, for every failure message below.
constexpr const char* kMoreTime =
    "give the job more time (a larger time_limit, or `shardbench submit --time-min`)";

}  // namespace

std::string point_resume_dir(const Point& p) {
  const TaskInfo* task = find_task(base_config(p).task);
  return task && task->resume_dir ? task->resume_dir(p) : "";
}

TimeoutDecision decide_after_timeout(const Point& p, const ResultSummary& last,
                                     const std::string& job_time) {
  if (last.exists && (last.status == "done" || last.status == "failed"))
    return {TimeoutDecision::Finished, "the point ended on its own: " + last.status};
  const std::int64_t done = last.exists && last.status == "incomplete" ? last.steps : 0;
  const std::string of = fmt::format(" of {}", base_config(p).steps);
  const std::string dir = point_resume_dir(p);
  if (dir.empty())
    return {TimeoutDecision::Fail,
            fmt::format("stopped by Slurm's pre-timeout signal after {} steps{}: the point needs "
                        "longer than the job's --time={} and does not resume, so a requeue "
                        "would start again at step 0; {}, or set checkpoint_dir and resume = "
                        "true so that a requeued task continues from its last checkpoint",
                        done, of, job_time, kMoreTime)};
  if (done == 0)
    return {TimeoutDecision::Fail,
            fmt::format("stopped by Slurm's pre-timeout signal before it completed a step since "
                        "its checkpoint in {}: within the job's --time={} a requeue would make "
                        "no progress; {}", dir, job_time, kMoreTime)};
  return {TimeoutDecision::Requeue,
          fmt::format("{} steps{} done in this run; the requeued task resumes from the "
                      "checkpoint in {}", done, of, dir)};
}

void record_timeout_failure(const std::string& dir, const Suite& suite, const Point& p,
                            const std::string& reason, const std::string& log_file) {
  const std::string path = result_path(dir, p.index, p.id);
  const ResultSummary s = read_result_summary(path);
  if (s.exists && s.status == "incomplete") {
    // The first line is what `status` shows; where to read more follows.
    mark_result_failed(path, log_file.empty() ? reason : reason + "\n(log: " + log_file + ")");
    return;
  }
  record_point_failure(dir, suite, p, reason, log_file);
}

}  // namespace sb
