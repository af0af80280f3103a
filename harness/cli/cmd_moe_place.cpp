// `shardbench moe-place RESULTS --ep N [--out FILE] [--point ID] [--network NAME] [--d-model D]`:
// ExFlow's expert placement from a gpt2-moe run's routing traces (analysis.exflow: the
// affinity between consecutive MoE layers, an integer program solved by HiGHS, round robin and
// greedy beside it); writes the placement file (default RESULTS/placement-ep<N>.json) and
// prints each placement's cross-rank tokens, and ExFlow at 8 to 64 ranks modelled on a network.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/analysis_module.h"
#include "harness/command.h"

namespace sb::cli {
namespace {

struct Args {
  std::string results, out, point, network;
  int ep = 0, d_model = 0;
};

const bool registered = [] {
  register_command({"moe-place", "place a mixture of experts' experts on ep ranks from its routing traces (ExFlow)",
                    [](CLI::App& sub) {
                      auto a = std::make_shared<Args>();
                      sub.add_option("results", a->results, "results folder with routing traces (moe.trace_every)")->required();
                      sub.add_option("--ep", a->ep, "expert-parallel ranks (dividing the experts)")->required();
                      sub.add_option("--out", a->out, "placement file (default RESULTS/placement-ep<N>.json)");
                      sub.add_option("--point", a->point, "point id (default: the last with routing traces)");
                      sub.add_option("--network", a->network, "the modelled scale's network: a preset (lassen) or a "
                                                              "TOML file with a [network] table (docs/METRICS.md)");
                      sub.add_option("--d-model", a->d_model, "the model's width for the modelled scale (default: "
                                                              "the point's moe_d_model)");
                      sub.callback([a] {
                        std::vector<std::string> args{"place", a->results, "--ep", std::to_string(a->ep)};
                        if (!a->out.empty()) args.insert(args.end(), {"--out", a->out});
                        if (!a->point.empty()) args.insert(args.end(), {"--point", a->point});
                        if (!a->network.empty()) args.insert(args.end(), {"--network", a->network});
                        if (a->d_model > 0) args.insert(args.end(), {"--d-model", std::to_string(a->d_model)});
                        run_analysis_module("analysis.exflow", args);
                      });
                    }});
  return true;
}();

}  // namespace
}  // namespace sb::cli
