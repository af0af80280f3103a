// Renders the record Tables (harness/trace/records.h) as JSON, markdown and text.
#include "harness/trace/schema.h"

#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/trace/records.h"
#include "harness/trace/result.h"

namespace sb {
namespace {

struct Column {
  std::string name, dtype, unit, doc;
};
struct Group {
  std::string name, doc;
  bool from_every_rank = false;
  std::vector<Column> columns;
};

// The Tables as plain values, so each renderer is a loop rather than a template.
std::vector<Group> groups() {
  std::vector<Group> out;
  for_each_record(RecordTypes{}, [&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    Group& g = out.emplace_back();
    g.name = Table<Rec>::group;
    g.doc = Table<Rec>::doc;
    g.from_every_rank = Table<Rec>::from_every_rank;
    for_each_field<Rec>([&](const auto& f) {
      g.columns.push_back({f.name, column_type_name(f.type), f.unit, f.doc});
    });
  });
  return out;
}

const char* origin(const Group& g) {
  return g.from_every_rank ? "gathered from every rank" : "recorded on rank 0";
}

// A markdown table cell: a '|' in the text would end the cell.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string schema_json() {
  nlohmann::ordered_json doc;
  doc["schema_version"] = kSchemaVersion;
  doc["groups"] = nlohmann::ordered_json::array();
  for (const Group& g : groups()) {
    nlohmann::ordered_json jg;
    jg["name"] = g.name;
    jg["doc"] = g.doc;
    jg["from_every_rank"] = g.from_every_rank;
    jg["columns"] = nlohmann::ordered_json::array();
    for (const Column& c : g.columns)
      jg["columns"].push_back({{"name", c.name}, {"dtype", c.dtype}, {"unit", c.unit},
                               {"doc", c.doc}});
    doc["groups"].push_back(jg);
  }
  return doc.dump(2) + "\n";
}

std::string schema_markdown() {
  std::string out;
  for (const Group& g : groups()) {
    out += fmt::format("`/{}`: {} ({}).\n\n", g.name, g.doc, origin(g));
    out += "| column | type | unit | meaning |\n|---|---|---|---|\n";
    for (const Column& c : g.columns)
      out += fmt::format("| `{}` | {} | {} | {} |\n", c.name, c.dtype, cell(c.unit), cell(c.doc));
    out += "\n";
  }
  out.pop_back();  // no blank line after the last table
  return out;
}

std::string schema_text() {
  std::string out;
  for (const Group& g : groups()) {
    out += fmt::format("/{}: {} ({})\n", g.name, g.doc, origin(g));
    for (const Column& c : g.columns)
      out += fmt::format("  {:<24} {:<8} {:<10} {}\n", c.name, c.dtype, c.unit, c.doc);
  }
  return out;
}

}  // namespace sb
