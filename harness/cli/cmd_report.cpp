// `shardbench report RESULTS [--json] [--network NAME|FILE]`: the analysis package (Python) reads the HDF5 files
// and writes the report (analysis.report); --json also prints its summary as JSON.
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/cli/analysis_module.h"
#include "harness/command.h"

namespace sb::cli {
namespace {
struct ReportArgs {
  std::string results, out, network;
  bool json = false;
};

const bool registered = [] {
  register_command({"report", "write the report of a results folder (analysis.report)",
                    [](CLI::App& sub) {
                      auto a = std::make_shared<ReportArgs>();
                      sub.add_option("results", a->results, "results folder")->required();
                      sub.add_option("--out", a->out, "output folder (default RESULTS/report)");
                      sub.add_flag("--json", a->json, "print the summary as JSON on stdout");
                      sub.add_option("--network", a->network,
                                     "the network of the compression-vs-network section: a "
                                     "preset (lassen, the default) or a TOML file with a "
                                     "[network] table (analysis/network.py)");
                      sub.callback([a] {
                        std::vector<std::string> args{a->results};
                        if (!a->out.empty()) args.insert(args.end(), {"--out", a->out});
                        if (a->json) args.push_back("--json");
                        if (!a->network.empty()) args.insert(args.end(), {"--network", a->network});
                        run_analysis_module("analysis.report", args);
                      });
                    }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
