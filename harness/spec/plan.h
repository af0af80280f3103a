// Text for `shardbench plan` (the expanded points as a table) and `shardbench keys` (every
// registered key and name set). Functions of data so tests compare them as text.
#pragma once
#include <string>

#include "harness/core/format.h"  // format_bytes: plan prints with it
#include "harness/spec/suite.h"

namespace sb {

// Header, one row per point (index, id, name, task, world, baseline index, estimated
// model-state bytes per rank from the task's TaskInfo, "-" when the task is not linked in),
// a note per estimate that threw ("?" in its cell), and the point count.
std::string format_plan(const Suite& suite);

// `plan --memory`: one row per point with the terms of its task's memory model per rank
// (TaskInfo::memory_terms_per_rank; columns in first-seen order, "-" where a point's task has
// no such term), and a note per estimate that threw.
std::string format_memory(const Suite& suite);

// Every registered key (type, default, doc), then every name set with its names.
std::string format_keys();

// "512 B", "1.50 KiB", "3.20 GiB": binary units, two decimals.

}  // namespace sb
