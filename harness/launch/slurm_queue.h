// What Slurm says about submitted points: RESULTS/submissions.json (written by submit) and
// squeue. Used by `status` (running / queued) and by `submit` (do not submit twice).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct Submission {
  std::string job_id;      // array job id from sbatch --parsable
  std::int64_t world = 1;
  std::vector<std::int64_t> points;
  std::string script, submitted_at;
};

std::vector<Submission> read_submissions(const std::string& results_dir);  // [] when absent
void append_submission(const std::string& results_dir, const Submission& s);

// Point index -> Slurm state ("PENDING", "RUNNING", "REQUEUED", ...) for the array tasks of
// our submissions that squeue still lists. {} without Slurm or submissions.
// `error` (optional) gets why squeue could not be asked.
std::map<std::int64_t, std::string> queued_points(const std::string& results_dir,
                                                  std::string* error = nullptr);

// Parses `squeue -h -r -o %i|%T` output into (array job id, task id) -> state. Pure (tested).
std::map<std::pair<std::string, std::int64_t>, std::string> parse_squeue(const std::string& text);

// Whether a program is on PATH.
bool have_program(const std::string& name);

}  // namespace sb
