// Model folders a point reads that do not exist yet (folder_check.h), and the `model` key's
// folder check: a folder that exists is read by the same function that later builds the model.
#include "workloads/models/folder_check.h"

#include <filesystem>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "workloads/models/hf_config.h"

namespace sb::models {

std::optional<Diagnostic> missing_model_folder(const std::vector<Point>& points, std::size_t i,
                                               const std::string& key, const char* what) {
  const Point& p = points[i];
  const std::string dir = p.get_string(key);
  if (!is_model_path(dir) || std::filesystem::exists(dir + "/config.json")) return std::nullopt;
  const std::optional<PathWriter> w = point_writing(points, dir);
  if (w && w->position < i) return std::nullopt;  // it runs first and writes the folder
  if (w && w->position == i)
    return Diagnostic{key, fmt::format("{} '{}' is written by this same point ({}), after it has "
                                       "read it: let an earlier point write it, or name a folder "
                                       "that exists", what, dir, w->key)};
  if (w) {
    const Point& writer = points[w->position];
    return Diagnostic{key, fmt::format("{} '{}' is written by point '{}' ({} at {}), which runs "
                                       "after this one: put the point that writes it first "
                                       "(earlier in its [[zip]] list or axis)",
                                       what, dir, writer.name, w->key,
                                       writer.where(w->key).str())};
  }
  return Diagnostic{key, fmt::format("{} '{}' does not exist (yet) and no point of this suite "
                                     "writes it (export_folder): the point will fail unless "
                                     "another suite writes it first; check the path, or give a "
                                     "preset name (`shardbench models`)", what, dir),
                    true};
}

namespace {

const sb::Registrar kRegister([] {
  sb::register_suite_validator([](const std::vector<Point>& points, std::size_t i,
                                  std::vector<Diagnostic>& out) {
    const std::string& m = sb::config<sb::ModelKeys>(points[i]).model;
    if (!is_model_path(m)) return;
    if (auto d = missing_model_folder(points, i, "model", "model folder")) {
      out.push_back(*d);
      return;
    }
    if (!std::filesystem::exists(m + "/config.json")) return;  // an earlier point writes it
    try {
      hf_folder_config(m);
    } catch (const sb::Error& e) {
      out.push_back({"model", e.message()});
    }
  });
});

}  // namespace
}  // namespace sb::models
