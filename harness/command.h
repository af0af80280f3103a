// Subcommands of the shardbench binary register themselves here (one file per command).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace CLI { class App; }

namespace sb::cli {

struct Command {
  std::string name;  // "plan", "run", ...
  std::string help;
  // Adds the subcommand's options to `sub` and sets sub.callback(...). The callback throws
  // sb::Error on failure, or sb::cli::Exit to leave with a specific code.
  std::function<void(CLI::App& sub)> setup;
};
// A name registered twice fails at start-up.
void register_command(Command c);
std::vector<Command> commands();  // in name order (`shardbench --help` lists them so)
// The first word of a command line: an option ("--help") or a registered command; anything else
// throws sb::Error listing the known commands (CLI11 would only say a subcommand is required).
void check_command(const std::string& word);

struct Exit {
  int code;
};

}  // namespace sb::cli
