// Commands whose work is done by the analysis package (Python: report, compare, query) run
// it through here: Debian's interpreter (it has h5py, pandas, matplotlib; the first python3
// on PATH may not), with the repository on PYTHONPATH.
#pragma once
#include <string>
#include <vector>

namespace sb::cli {

// Runs `python3 -m <module> <args...>` and throws Exit with its exit code when not 0.
void run_analysis_module(const std::string& module, const std::vector<std::string>& args);

}  // namespace sb::cli
