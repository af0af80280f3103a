// The result file's record columns, rendered from the records' Tables (harness/trace/records.h)
// for `shardbench schema`: JSON for programs (the analysis test fixtures), markdown for
// docs/HDF5_SCHEMA.md (a test keeps the two equal), plain text for a terminal.
#pragma once
#include <string>

namespace sb {

// {"schema_version": 1, "groups": [{"name", "doc", "from_every_rank", "columns":
//   [{"name", "dtype", "unit", "doc"}]}]}, groups and columns in file order.
std::string schema_json();
std::string schema_markdown();
std::string schema_text();

}  // namespace sb
