// `shardbench report RESULTS`: the analysis package (Python) reads the HDF5 files and writes
// the report; this only runs it with the repository on PYTHONPATH.
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/core/subprocess.h"

#ifndef SHARDBENCH_SOURCE_DIR
#define SHARDBENCH_SOURCE_DIR "."
#endif

namespace sb::cli {
namespace {
// The system interpreter has h5py, pandas and matplotlib; the first python3 on PATH may not.
constexpr const char* kPython = "/usr/bin/python3";

const bool registered = [] {
  register_command({"report", "write the report of a results folder (analysis.report)",
                    [](CLI::App& sub) {
                      auto results = std::make_shared<std::string>();
                      sub.add_option("results", *results, "results folder")->required();
                      sub.callback([results] {
                        const char* old = std::getenv("PYTHONPATH");
                        ProcessOptions po;
                        po.env["PYTHONPATH"] = std::string(SHARDBENCH_SOURCE_DIR) +
                                               (old && *old ? std::string(":") + old : "");
                        const ProcessResult r =
                            run_process({kPython, "-m", "analysis.report", *results}, po);
                        if (!r.ok()) throw Exit{r.exit_code > 0 ? r.exit_code : 1};
                      });
                    }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
