// Console sink: a short human summary of one point's result (medians over measured steps).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "harness/core/format.h"
#include "harness/trace/result.h"

namespace sb {
namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void print_summary(std::FILE* out, const ResultMeta& m, const Recorder& rec) {
  std::vector<double> wall, tok, mfu, mfu_isa;
  for (const auto& s : rec.steps()) {
    if (s.warmup) continue;
    wall.push_back(s.wall_s);
    tok.push_back(s.tokens_per_s);
    mfu.push_back(s.mfu);
    mfu_isa.push_back(s.mfu_isa);
  }
  std::string text = fmt::format("point {} {} ({}): {}", m.point_index, m.point_id,
                                 m.point_name, m.status);
  if (!m.failure_reason.empty()) text += fmt::format(" -- {}", m.failure_reason);
  text += fmt::format("\n  steps {} ({} measured), elapsed {:.2f} s", rec.steps().size(),
                      wall.size(), m.elapsed_s);
  // A NaN MFU: the peak cannot be this machine's (workloads/train/mfu.h says why, in the
  // `mfu_invalid` text); no number then.
  const bool mfu_ok = std::none_of(mfu.begin(), mfu.end(), [](double v) { return std::isnan(v); });
  if (!wall.empty())
    text += fmt::format("\n  median step {:.4f} s, {:.1f} tokens/s, MFU {}", median(wall),
                        median(tok), mfu_ok ? fmt::format("{:.2f}%", 100 * median(mfu))
                                            : std::string("n/a (texts/mfu_invalid)"));
  // Against the ISA's theoretical peak (train), when it is known (texts/mfu_isa_invalid).
  const bool isa_ok = std::all_of(mfu_isa.begin(), mfu_isa.end(), [](double v) { return v > 0; });
  if (!mfu_isa.empty() && isa_ok) text += fmt::format(" ({:.2f}% of the ISA peak)", 100 * median(mfu_isa));
  if (!rec.queries().empty()) {
    std::vector<double> lat;
    for (const auto& q : rec.queries()) lat.push_back(q.latency_s);
    text += fmt::format("\n  {} queries, median latency {:.4f} s", lat.size(), median(lat));
  }
  double state = 0, rss = 0;
  for (const auto& r : rec.memories()) {
    state = std::max(state, static_cast<double>(r.peak_model_state_bytes));
    rss = std::max(rss, static_cast<double>(r.peak_rss_bytes));
  }
  if (!rec.memories().empty())
    text += fmt::format("\n  memory (max over ranks): peak model state {}, peak RSS {}",
                        format_bytes(state), format_bytes(rss));
  std::fprintf(out, "%s\n", text.c_str());
  std::fflush(out);
}

}  // namespace sb
