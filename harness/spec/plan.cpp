// Formatting of `shardbench plan` and `shardbench keys`: aligned plain-text tables.
#include "harness/spec/plan.h"

#include "harness/spec/base_config.h"

#include "harness/core/format.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/core/registry.h"
#include "harness/spec/expand.h"
#include "harness/spec/reference.h"
#include "harness/workload.h"

namespace sb {

namespace {

// Columns are padded to their widest cell; `right` columns (numbers) are right-aligned.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> w(right.size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (c) line += "  ";
      line += right[c] ? fmt::format("{:>{}}", r[c], w[c]) : fmt::format("{:<{}}", r[c], w[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

const char* type_label(KeyType t) {
  switch (t) {
    case KeyType::Bool: return "bool";
    case KeyType::Int: return "int";
    case KeyType::Float: return "float";
    case KeyType::String: return "string";
    case KeyType::Name: return "name";
  }
  return "?";
}

Registry<PlanColumn>& column_registry() {
  static Registry<PlanColumn> r("plan column");
  return r;
}

}  // namespace

void register_plan_column(PlanColumn c) {
  const std::string header = c.header;
  column_registry().add(header, "", std::move(c));
}
std::vector<PlanColumn> plan_columns() {
  std::vector<PlanColumn> out;
  column_registry().each([&](const std::string&, const PlanColumn& c) { out.push_back(c); });
  return out;
}

std::string format_plan(const Suite& suite) { return format_plan(suite, plan_columns()); }

std::string format_plan(const Suite& suite, const std::vector<PlanColumn>& columns) {
  std::string out = fmt::format("suite {} ({}, sha256 {})\n", suite.name, suite.file,
                                suite.sha256.substr(0, 12));
  if (!suite.description.empty()) out += suite.description + "\n";
  std::unordered_map<std::string, int> index_of;
  for (const auto& p : suite.points) index_of[p.id] = p.index;
  std::vector<std::string> header{"index", "id", "name", "task", "world", "baseline"};
  std::vector<bool> right{true, false, false, false, true, true};
  for (const auto& c : columns) header.push_back(c.header), right.push_back(true);
  header.push_back("state/rank"), right.push_back(true);
  std::vector<std::vector<std::string>> rows{header};
  std::string notes;  // cells that failed: the plan is still worth printing
  for (const auto& p : suite.points) {
    std::vector<std::string> said;  // one note per point and message
    auto cell = [&](const std::string& what, const auto& f) -> std::string {
      try {
        return f();
      } catch (const std::exception& e) {
        // A user's error without the source location it was raised at (sb::Error::message).
        const auto* sb_error = dynamic_cast<const Error*>(&e);
        const std::string msg = sb_error ? sb_error->message() : e.what();
        if (std::find(said.begin(), said.end(), msg) == said.end()) {
          said.push_back(msg);
          notes += fmt::format("{} of point {}: {}\n", what, p.index, msg);
        }
        return "?";
      }
    };
    std::string base = p.baseline_id.empty() ? "-" : std::to_string(index_of.at(p.baseline_id));
    const BaseConfig& b = base_config(p);
    std::vector<std::string> row{std::to_string(p.index), p.id, p.name, b.task,
                                 std::to_string(b.world), base};
    for (const auto& c : columns) row.push_back(cell(c.header, [&] { return c.cell(p); }));
    const TaskInfo* task = find_task(b.task);
    row.push_back(!task || !task->model_state_bytes_per_rank
                      ? "-"
                      : cell("state/rank", [&] {
                          return format_bytes(task->model_state_bytes_per_rank(p));
                        }));
    rows.push_back(std::move(row));
  }
  out += table(rows, right);
  out += notes;
  out += fmt::format("{} point{}\n", suite.points.size(), suite.points.size() == 1 ? "" : "s");
  return out;
}

std::string format_memory(const Suite& suite) {
  std::vector<std::string> names;  // term columns, first seen first
  std::vector<std::map<std::string, std::string>> cells(suite.points.size());
  std::string notes;
  for (std::size_t i = 0; i < suite.points.size(); ++i) {
    const Point& p = suite.points[i];
    const TaskInfo* task = find_task(base_config(p).task);
    if (!task || !task->memory_terms_per_rank) continue;
    try {
      for (const auto& [term, bytes] : task->memory_terms_per_rank(p)) {
        if (std::find(names.begin(), names.end(), term) == names.end()) names.push_back(term);
        cells[i][term] = format_bytes(bytes);
      }
    } catch (const std::exception& e) {
      notes += fmt::format("memory of point {}: {}\n", p.index, e.what());
    }
  }
  std::vector<std::vector<std::string>> rows{{"index", "name"}};
  rows[0].insert(rows[0].end(), names.begin(), names.end());
  for (std::size_t i = 0; i < suite.points.size(); ++i) {
    std::vector<std::string> row{std::to_string(suite.points[i].index), suite.points[i].name};
    for (const auto& n : names) row.push_back(cells[i].count(n) ? cells[i][n] : "-");
    rows.push_back(std::move(row));
  }
  std::vector<bool> right(rows[0].size(), true);
  right[1] = false;
  return "memory per rank (bytes; docs/METRICS.md \"Memory model\")\n" + table(rows, right) + notes;
}

std::string format_keys() {
  std::vector<std::vector<std::string>> rows{{"key", "type", "default", "range", "tasks", "doc"}};
  for (const auto& k : registered_keys()) {
    std::string type = type_label(k.type);
    if (k.type == KeyType::Name) type += "(" + k.name_set + ")";
    std::string def = value_to_string(k.default_value);
    if (k.type == KeyType::String || k.type == KeyType::Name) def = "\"" + def + "\"";
    std::string tasks;
    for (const auto& t : k.tasks) tasks += (tasks.empty() ? "" : ",") + t;
    std::string range = range_text(k);
    if (!k.unit.empty()) range += (range.empty() ? "" : " ") + k.unit;
    rows.push_back({k.key, type, def, range, tasks.empty() ? "all" : tasks, k.doc});
  }
  std::string out = fmt::format("{} keys\n", registered_keys().size());
  out += table(rows, {false, false, false, false, false, false});
  out += "\nreference figures ([[reference]] in a suite; read by the reports)\n";
  std::vector<std::vector<std::string>> figures;
  for (const auto& [name, doc] : reference_figures()) figures.push_back({"  " + name, doc});
  out += table(figures, {false, false});
  out += "\ntolerance checks ([[reference]] NAME = [value, lower, upper]; the report lists points "
         "outside)\n";
  std::vector<std::vector<std::string>> checks;
  for (const auto& [name, doc] : reference_checks()) checks.push_back({"  " + name, doc});
  out += table(checks, {false, false});
  out += "\nname sets\n";
  for (const auto& set : registered_name_sets()) {
    out += set + ":\n";
    std::vector<std::vector<std::string>> names;
    for (const auto& [n, doc] : registered_names(set)) names.push_back({"  " + n, doc});
    out += table(names, {false, false});
  }
  return out;
}

}  // namespace sb
