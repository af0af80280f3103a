// Measured GEMM peaks kept between runs, so that a sweep measures each machine's peak once:
// one small JSON file, keyed by what the figure depends on (CPU model, threads per rank, ranks
// measuring at once on the node, dtype, GEMM path, LibTorch version). The file: $SB_PEAK_CACHE,
// else $XDG_CACHE_HOME/shardbench/gemm_peaks.json, else ~/.cache/shardbench/gemm_peaks.json;
// SB_PEAK_CACHE=off measures every run and keeps nothing. Only a peak measured on a quiet node
// is written (train/peak.cpp): a loaded machine's would stay too low.
#pragma once
#include <optional>
#include <string>

#include "workloads/train/gemm_peak.h"

namespace sb::train {

std::string peak_cache_file();  // "" when SB_PEAK_CACHE=off
std::string peak_cache_key(const std::string& cpu_model, int threads, int ranks_on_node,
                           const std::string& dtype, const std::string& path);
// The entry for key, and when it was measured (ISO 8601); none when the file or key is absent
// or unreadable.
std::optional<GemmCurve> peak_cache_lookup(const std::string& file, const std::string& key,
                                           std::string* measured_at = nullptr);
// Adds or replaces key's entry, written to a temporary file and renamed; failures are reported
// on stderr, never thrown (the run goes on without a cache).
void peak_cache_store(const std::string& file, const std::string& key, const GemmCurve& c);

}  // namespace sb::train
