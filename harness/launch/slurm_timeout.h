// What an array task does after Slurm's pre-timeout signal stopped its point: requeue the task
// only when the rerun continues from the point's checkpoint. A point that would start again at
// step 0 is stopped at the same place on every rerun (a requeue loop that never ends), so it
// is recorded failed instead, keeping its partial trace, with how to fix it.
#pragma once
#include <string>

#include "harness/trace/result.h"

namespace sb {

class Point;
struct Suite;

// The folder a rerun of `p` continues from, "" when it starts again at step 0: its task's
// record says (TaskInfo::resume_dir; train: checkpoint_dir with resume = true).
std::string point_resume_dir(const Point& p);

struct TimeoutDecision {
  enum Action { Requeue, Fail, Finished } action = Fail;
  std::string reason;  // one line: why (for Fail, the point's failure reason with the fix)
};

// Pure: what to do with point `p` whose result is `last` after the pre-timeout signal of a job
// with --time=job_time. Finished when the point ended on its own (done, or failed for its own
// reason); Requeue when it resumes and did steps in this run (else a rerun makes no progress).
TimeoutDecision decide_after_timeout(const Point& p, const ResultSummary& last,
                                     const std::string& job_time);

// Records a Fail decision: the point's incomplete result becomes failed with `reason` (its
// partial trace kept; rewritten through a temporary copy and rename, like every result file).
// Without a readable result, writes a failed one without records (record_point_failure).
void record_timeout_failure(const std::string& results_dir, const Suite& suite, const Point& p,
                            const std::string& reason, const std::string& log_file);

}  // namespace sb
