// The GEMM peak cache file (peak_cache.h).
#include "workloads/train/peak_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "harness/trace/result.h"

namespace sb::train {
namespace {

nlohmann::json read_all(const std::string& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();  // unreadable: start afresh
}

}  // namespace

std::string peak_cache_file() {
  if (const char* f = std::getenv("SB_PEAK_CACHE"); f && *f) return std::string(f) == "off" ? "" : f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/shardbench/gemm_peaks.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/shardbench/gemm_peaks.json";
  return "";
}

std::string peak_cache_key(const std::string& cpu_model, int threads, int ranks_on_node,
                           const std::string& dtype, const std::string& path) {
  return fmt::format("{} | threads {} | ranks on the node {} | {} | {} | torch {}", cpu_model, threads,
                     ranks_on_node, dtype, path, TORCH_VERSION);
}

std::optional<GemmCurve> peak_cache_lookup(const std::string& file, const std::string& key,
                                           std::string* measured_at) {
  if (file.empty()) return std::nullopt;
  const auto all = read_all(file);
  const auto it = all.find(key);
  if (it == all.end() || !it->is_object()) return std::nullopt;
  try {
    GemmCurve c;
    c.path = it->at("path").get<std::string>();
    for (const auto& s : it->at("sizes"))  // [n, reps, seconds, gflops]
      c.sizes.push_back({s.at(0).get<std::int64_t>(), s.at(1).get<int>(), s.at(2).get<double>(), s.at(3).get<double>()});
    if (c.sizes.empty()) return std::nullopt;
    if (measured_at) *measured_at = it->value("measured", std::string());
    return c;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // an entry of another layout: measured again and replaced
  }
}

void peak_cache_store(const std::string& file, const std::string& key, const GemmCurve& c) {
  if (file.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  auto all = read_all(file);
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& s : c.sizes) sizes.push_back({s.n, s.reps, s.seconds, s.gflops});
  all[key] = {{"path", c.path}, {"sizes", sizes}, {"measured", sb::iso_time_now()}};
  const std::string tmp = fmt::format("{}.tmp.{}", file, ::getpid());
  {
    std::ofstream out(tmp);
    out << all.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "warning: could not write the GEMM peak cache %s; the next run measures again\n", tmp.c_str());
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec)
    std::fprintf(stderr, "warning: could not write the GEMM peak cache %s (%s); the next run measures again\n",
                 file.c_str(), ec.message().c_str());
}

}  // namespace sb::train
