// Text for `shardbench plan` (the expanded points as a table) and `shardbench keys` (every
// registered key and name set). Functions of data so tests compare them as text.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "harness/core/format.h"  // format_bytes: plan prints with it
#include "harness/spec/suite.h"

namespace sb {

// A column a workload adds to the plan's table, between baseline and state/rank (the models
// library adds each point's parameter counts): its header and each point's cell ("-" where
// it does not apply). A cell that throws prints "?" and a note, as a failing estimate does.
struct PlanColumn {
  std::string header;
  std::function<std::string(const Point&)> cell;
};
// Registered by header (a header given twice fails at start-up); listed in header order.
void register_plan_column(PlanColumn c);
std::vector<PlanColumn> plan_columns();

// Header, one row per point (index, id, name, task, world, baseline index, the registered
// columns, estimated model-state bytes per rank from the task's TaskInfo, "-" when the task
// is not linked in), a note per cell or estimate that threw ("?" in its cell; one per point
// and message), and the point count. `columns`: the registered ones unless given (tests).
std::string format_plan(const Suite& suite);
std::string format_plan(const Suite& suite, const std::vector<PlanColumn>& columns);

// `plan --memory`: one row per point with the terms of its task's memory model per rank
// (TaskInfo::memory_terms_per_rank; columns in first-seen order, "-" where a point's task has
// no such term), and a note per estimate that threw.
std::string format_memory(const Suite& suite);

// Every registered key (type, default, doc), then every name set with its names.
std::string format_keys();

// "512 B", "1.50 KiB", "3.20 GiB": binary units, two decimals.

}  // namespace sb
