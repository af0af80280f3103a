// `shardbench schema`: the columns of the result file's record groups (name, type, unit,
// meaning), from the one table per record (harness/trace/records.h). --json for programs,
// --markdown for docs/HDF5_SCHEMA.md (tests/harness/check_schema_doc.sh keeps it equal).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/trace/schema.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

struct SchemaArgs {
  bool json = false, markdown = false;
};

Registrar reg([] {
  register_command({"schema", "Print the result file's record columns (type, unit, meaning)",
                    [](CLI::App& sub) {
    auto a = std::make_shared<SchemaArgs>();
    auto* json = sub.add_flag("--json", a->json, "as JSON, for programs");
    sub.add_flag("--markdown", a->markdown, "as the markdown tables of docs/HDF5_SCHEMA.md")
        ->excludes(json);
    sub.callback([a] {
      const std::string s = a->json ? schema_json() : a->markdown ? schema_markdown()
                                                                  : schema_text();
      std::fputs(s.c_str(), stdout);
    });
  }});
});

}  // namespace
}  // namespace sb::cli
