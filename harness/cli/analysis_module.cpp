#include "harness/cli/analysis_module.h"

#include <cstdlib>

#include "harness/command.h"
#include "harness/core/subprocess.h"

#ifndef SHARDBENCH_SOURCE_DIR
#define SHARDBENCH_SOURCE_DIR "."
#endif

namespace sb::cli {

void run_analysis_module(const std::string& module, const std::vector<std::string>& args) {
  constexpr const char* kPython = "/usr/bin/python3";
  const char* old = std::getenv("PYTHONPATH");
  ProcessOptions po;
  po.env["PYTHONPATH"] =
      std::string(SHARDBENCH_SOURCE_DIR) + (old && *old ? std::string(":") + old : "");
  std::vector<std::string> argv{kPython, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, po);
  if (!r.ok()) throw Exit{r.exit_code > 0 ? r.exit_code : 1};
}

}  // namespace sb::cli
