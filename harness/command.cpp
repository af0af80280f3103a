// Registry of shardbench subcommands. In the core harness library (not the CLI one), so that
// workloads register theirs (models, export-checkpoint) wherever they are linked. A name
// registered twice fails at start-up (CLI11 would otherwise refuse it only when parsing).
#include <vector>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/core/registry.h"

namespace sb::cli {
namespace {
Registry<Command>& all() {
  static Registry<Command> r("command");
  return r;
}
}  // namespace
void register_command(Command c) {
  const std::string name = c.name, help = c.help;
  all().add(name, help, std::move(c));
}
void check_command(const std::string& word) {
  if (word.empty() || word[0] == '-' || all().has(word)) return;
  // A user's typo, not a bug: no file:line of ours in the message.
  throw Error(fmt::format("unknown command '{}'; known commands: {}", word, all().known()));
}
std::vector<Command> commands() {
  std::vector<Command> out;
  all().each([&](const std::string&, const Command& c) { out.push_back(c); });
  return out;
}
}  // namespace sb::cli
