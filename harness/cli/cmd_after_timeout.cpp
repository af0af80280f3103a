// `shardbench after-timeout SUITE --point I --results DIR --job-time H:MM:SS`: asked by the
// Slurm job script after the pre-timeout signal stopped a point. Exit 0: requeue the task
// (the point resumes from its checkpoint). Exit 1: do not; the point ended on its own or is
// now recorded failed with how to fix it (harness/launch/slurm_timeout.h says why).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/launch/results.h"
#include "harness/launch/slurm_timeout.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"

namespace sb::cli {
namespace {

struct AfterTimeoutArgs {
  std::string suite, point, results, job_time, log;
};

int after_timeout(const AfterTimeoutArgs& a) {
  const Suite suite = load_suite(a.suite);
  const Point& p = find_point(suite, a.point);
  const std::string dir = a.results.empty() ? default_results_dir(suite) : a.results;
  const ResultSummary last = read_result_summary(result_path(dir, p.index, p.id));
  const TimeoutDecision d = decide_after_timeout(p, last, a.job_time);
  switch (d.action) {
    case TimeoutDecision::Requeue:
      std::printf("point %d %s: requeue: %s\n", p.index, p.id.c_str(), d.reason.c_str());
      return 0;
    case TimeoutDecision::Finished:
      std::printf("point %d %s: not requeued, %s\n", p.index, p.id.c_str(), d.reason.c_str());
      return 1;
    case TimeoutDecision::Fail:
      record_timeout_failure(dir, suite, p, d.reason, a.log);
      std::printf("point %d %s: recorded as failed: %s\n", p.index, p.id.c_str(),
                  d.reason.c_str());
      return 1;
  }
  return 1;
}

const bool registered = [] {
  register_command(
      {"after-timeout",
       "after Slurm's pre-timeout signal: exit 0 if the point resumes (requeue it), else "
       "record it failed with the fix",
       [](CLI::App& sub) {
         auto a = std::make_shared<AfterTimeoutArgs>();
         sub.add_option("suite", a->suite, "suite file")->required();
         sub.add_option("--point", a->point, "point index or id")->required();
         sub.add_option("--results", a->results, "results folder (default results/<suite name>)");
         sub.add_option("--job-time", a->job_time, "the job's --time, for the message")
             ->required();
         sub.add_option("--log", a->log, "the task's log, named in the failure reason");
         sub.callback([a] {
           const int code = after_timeout(*a);
           if (code != 0) throw Exit{code};
         });
       }});
  return true;
}();

}  // namespace
}  // namespace sb::cli
