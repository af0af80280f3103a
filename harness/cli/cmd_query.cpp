// `shardbench query ROOT [SQL]`: SQL over every done point of every sweep under ROOT, through
// the SQLite index the analysis keeps beside the results (analysis.index).
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/cli/analysis_module.h"
#include "harness/command.h"

namespace sb::cli {
namespace {
struct QueryArgs {
  std::string root, sql;
  bool rebuild = false, csv = false;
};

const bool registered = [] {
  register_command(
      {"query", "SQL over the results index of every sweep under a folder (analysis.index)",
       [](CLI::App& sub) {
         auto a = std::make_shared<QueryArgs>();
         sub.add_option("root", a->root, "folder holding results folders (e.g. results)")->required();
         sub.add_option("sql", a->sql, "query over table `points` (default: a listing)");
         sub.add_flag("--rebuild", a->rebuild, "rebuild the index from every HDF5 file");
         sub.add_flag("--csv", a->csv, "print CSV");
         sub.callback([a] {
           std::vector<std::string> args{a->root};
           if (!a->sql.empty()) args.push_back(a->sql);
           if (a->rebuild) args.push_back("--rebuild");
           if (a->csv) args.push_back("--csv");
           run_analysis_module("analysis.index", args);
         });
       }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
