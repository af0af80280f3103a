// Registry of shardbench subcommands.
#include <vector>

#include "harness/cli/command.h"

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
