// shardbench: the one binary. Subcommands live in harness/cli/cmd_*.cpp; workloads are
// linked in whole and register their tasks, keys and names at static-init time.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/core/check.h"

int main(int argc, char** argv) {
  CLI::App app{"shardbench: benchmark MPI-FSDP training and inference of GPT-2 and BERT"};
  app.require_subcommand(1);
  for (const auto& c : sb::cli::commands()) c.setup(*app.add_subcommand(c.name, c.help));
  try {
    if (argc > 1) sb::cli::check_command(argv[1]);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sb::cli::Exit& e) {
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardbench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
