// Requeue or fail after Slurm's pre-timeout signal (`shardbench after-timeout`, called by the
// job script of jobscripts/sbatch-array.sh.in).
#include "harness/launch/slurm_timeout.h"

#include <hdf5.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/launch/results.h"
#include "harness/spec/suite.h"

namespace sb {
namespace {

// How to avoid the time-out, for every failure message below.
constexpr const char* kMoreTime =
    "give the job more time (a larger time_limit, or `shardbench submit --time-min`)";

// Replaces string attribute `name` of the open file `f` (a variable-length UTF-8 string, as
// the HDF5 sink writes them).
void replace_attr_string(hid_t f, const char* name, const std::string& v) {
  if (H5Aexists(f, name) > 0)
    SB_CHECK(H5Adelete(f, name) >= 0, "HDF5: cannot delete attribute {}", name);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = v.c_str();
  const bool ok = a >= 0 && H5Awrite(a, type, &p) >= 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  SB_CHECK(ok, "HDF5: cannot write attribute {}", name);
}

// The result at `path` with status failed and `reason`; everything else (the partial trace)
// as it was. A copy is changed and renamed over the original: never a half-written file.
void mark_result_failed(const std::string& path, const std::string& reason) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  fs::copy_file(path, tmp, fs::copy_options::overwrite_existing);
  const hid_t f = H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  SB_CHECK(f >= 0, "HDF5: cannot open {} to record the time-out", tmp);
  try {
    replace_attr_string(f, "status", "failed");
    replace_attr_string(f, "failure_reason", reason);
  } catch (...) {
    H5Fclose(f);
    fs::remove(tmp);
    throw;
  }
  SB_CHECK(H5Fclose(f) >= 0, "HDF5: cannot close {}", tmp);
  fs::rename(tmp, path);
}

}  // namespace

bool point_resumes(const Point& p) {
  return p.has("checkpoint_dir") && !p.get_string("checkpoint_dir").empty() &&
         p.has("resume") && p.get_bool("resume");
}

TimeoutDecision decide_after_timeout(const Point& p, const ResultSummary& last,
                                     const std::string& job_time) {
  if (last.exists && (last.status == "done" || last.status == "failed"))
    return {TimeoutDecision::Finished, "the point ended on its own: " + last.status};
  const std::int64_t done = last.exists && last.status == "incomplete" ? last.steps : 0;
  const std::string of = p.has("steps") ? fmt::format(" of {}", p.get_int("steps")) : "";
  if (!point_resumes(p))
    return {TimeoutDecision::Fail,
            fmt::format("stopped by Slurm's pre-timeout signal after {} steps{}: the point needs "
                        "longer than the job's --time={} and does not resume, so a requeue "
                        "would start again at step 0; {}, or set checkpoint_dir and resume = "
                        "true so that a requeued task continues from its last checkpoint",
                        done, of, job_time, kMoreTime)};
  const std::string dir = p.get_string("checkpoint_dir");
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
