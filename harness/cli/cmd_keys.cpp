// `shardbench keys`: every config key a suite may set (type, default, doc) and every name
// set (models, strategies, compressors, ...) with the names the linked workloads provide.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/spec/plan.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

Registrar reg([] {
  register_command({"keys", "List every suite key and every registered name", [](CLI::App& sub) {
    sub.callback([] { std::fputs(format_keys().c_str(), stdout); });
  }});
});

}  // namespace
}  // namespace sb::cli
