// The plan-time check of a model folder a point reads (model, teacher) that is not there yet:
// fine when an earlier point of the suite writes it, an error when only a later one does, a
// warning when none does (another suite may write it first).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/workload.h"

namespace sb::models {

// For points[i]'s `key` (a model folder value: it holds a '/'): nullopt when the value is a
// preset, the folder has its config.json, or an earlier point writes it (a writes_path key
// such as export_folder); else the diagnostic, on `key`. `what` names the role in the
// message ("model folder", "teacher folder").
std::optional<Diagnostic> missing_model_folder(const std::vector<Point>& points, std::size_t i,
                                               const std::string& key, const char* what);

}  // namespace sb::models
