// Registry of shardbench subcommands. In the core harness library (not the CLI one), so that
// workloads register theirs (models, export-checkpoint) wherever they are linked.
#include <vector>

#include "harness/command.h"

namespace sb::cli {
namespace {
std::vector<Command>& all() {
  static std::vector<Command> c;
  return c;
}
}  // namespace
void register_command(Command c) { all().push_back(std::move(c)); }
const std::vector<Command>& commands() { return all(); }
}  // namespace sb::cli
