// sbatch job-array scripts rendered from jobscripts/sbatch-array.sh.in: a pure function of
// its inputs, so the text can be compared with expected files without a cluster.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct JobScriptSpec {
  std::string suite_name, suite_file, results_dir, exe;  // paths as they will be used
  int world = 1, threads = 1;
  std::vector<std::int64_t> indices;     // point indices = array task ids
  int max_parallel = 0;                  // %K (0 = none)
  int time_min = 60;                     // --time
  int signal_s = 60;                     // --signal=B:USR1@signal_s
  std::string job_tag;                   // job name after "sb-SUITE-" ("" = "w" + world)
  // #SBATCH options (the suite's [slurm] table, --partition): "" / 0 = no line.
  std::string partition, account, qos, gres, constraint;
  int nodes = 0;
  std::vector<std::string> extra;        // whole "#SBATCH ..." lines, written as they are
  std::string launcher;                  // name (mpirun, srun)
  std::vector<std::string> launch_prefix;  // from the launcher
};

// "0-3,5,7-8" (+ "%K"): Slurm's --array syntax for sorted, unique indices.
std::string array_spec(const std::vector<std::int64_t>& indices, int max_parallel);
// "H:MM:00" for Slurm's --time.
std::string slurm_time(int minutes);
// The job script's text. template_text is the contents of jobscripts/sbatch-array.sh.in.
std::string render_job_script(const std::string& template_text, const JobScriptSpec& spec);
// Reads jobscripts/<name> ($SHARDBENCH_JOBSCRIPTS, else the source tree's jobscripts/).
std::string read_job_template(const std::string& name);

}  // namespace sb
