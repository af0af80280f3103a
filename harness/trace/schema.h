// The result file's schema for `shardbench schema`, rendered from its Tables: the root
// attributes (Table<ResultMeta>, harness/trace/result.h) and the record columns (the records'
// Tables, harness/trace/records.h). JSON for programs (the analysis test fixtures), markdown
// for docs/HDF5_SCHEMA.md and Python for analysis/root_attributes.py (a test keeps both equal
// to this output), plain text for a terminal.
#pragma once
#include <string>

namespace sb {

// Which tables markdown and text render: both, or one (the doc has a region for each).
enum class SchemaPart { all, attributes, columns };

// {"schema_version": 1, "attributes": [{"name", "dtype", "unit", "always", "default", "doc"}],
//  "groups": [{"name", "doc", "from_every_rank", "columns": [{"name", "dtype", "unit",
//  "doc"}]}]}, attributes, groups and columns in file order.
std::string schema_json();
std::string schema_markdown(SchemaPart part = SchemaPart::all);
std::string schema_text(SchemaPart part = SchemaPart::all);
// analysis/root_attributes.py: SCHEMA_VERSION and ROOT_ATTRIBUTES.
std::string schema_python();

}  // namespace sb
