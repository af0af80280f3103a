// `shardbench schema`: the result file's root attributes and record columns (name, type, unit,
// meaning), from their one table each (Table<ResultMeta> in harness/trace/result.h, the records'
// in harness/trace/records.h). --json for programs, --markdown for docs/HDF5_SCHEMA.md and
// --python for analysis/root_attributes.py (tests/harness/check_schema_doc.sh keeps both equal).
#include <cstdio>
#include <map>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/trace/schema.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

struct SchemaArgs {
  bool json = false, markdown = false, python = false;
  std::string only;
};

const std::map<std::string, SchemaPart> kParts = {{"attributes", SchemaPart::attributes},
                                                  {"columns", SchemaPart::columns}};

Registrar reg([] {
  register_command({"schema", "Print the result file's root attributes and record columns "
                              "(type, unit, meaning)",
                    [](CLI::App& sub) {
    auto a = std::make_shared<SchemaArgs>();
    auto* json = sub.add_flag("--json", a->json, "as JSON, for programs (both tables)");
    auto* md = sub.add_flag("--markdown", a->markdown, "as the markdown tables of "
                            "docs/HDF5_SCHEMA.md")->excludes(json);
    sub.add_flag("--python", a->python, "the root attributes as analysis/root_attributes.py")
        ->excludes(json)->excludes(md);
    sub.add_option("--only", a->only, "one table: attributes (root) or columns (records)")
        ->check(CLI::IsMember({"attributes", "columns"}));
    sub.callback([a] {
      const SchemaPart part = a->only.empty() ? SchemaPart::all : kParts.at(a->only);
      const std::string s = a->json       ? schema_json()
                            : a->python   ? schema_python()
                            : a->markdown ? schema_markdown(part)
                                          : schema_text(part);
      std::fputs(s.c_str(), stdout);
    });
  }});
});

}  // namespace
}  // namespace sb::cli
