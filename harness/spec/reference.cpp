// [[reference]] figures and tolerance checks (reference.h).
#include "harness/spec/reference.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/spec/expand.h"

namespace sb {

const std::vector<std::pair<std::string, std::string>>& reference_checks() {
  static const std::vector<std::pair<std::string, std::string>> checks{
      {"step_time_s", "median step (or batch) time, s"},
      {"samples_per_s", "median samples/s"},
      {"tokens_per_s", "median tokens/s"},
      {"mfu", "median model FLOPs utilisation"},
      {"tflops_per_worker", "median model TFLOP/s per rank"},
      {"final_loss", "final evaluation loss"},
      {"accuracy", "accuracy (mlm_accuracy or top1_agreement)"},
      {"model_state_bytes", "model-state bytes of the fullest rank between steps"},
      {"peak_model_state_bytes", "peak model-state bytes of the fullest rank"},
      {"peak_rss_bytes", "peak resident memory of the fullest rank"},
      {"memory_bytes", "model bytes (inference) or peak model-state bytes"},
      {"wire_bytes_per_step", "bytes on the wire per step, all ranks"},
      {"logical_bytes_per_step", "uncompressed fp32 bytes of the same collectives per step"},
      {"compression_ratio", "logical / wire bytes per step"},
  };
  return checks;
}

namespace {
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string names(const std::vector<std::pair<std::string, std::string>>& list,
                  std::vector<std::string>* known) {
  std::string out;
  for (const auto& [n, doc] : list) {
    known->push_back(n);
    out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

std::string unknown_name(const std::string& key, bool check) {
  std::vector<std::string> known;
  const std::string list = names(check ? reference_checks() : reference_figures(), &known);
  const std::string best = closest(key, known);
  const std::string hint = best.empty() ? "" : "did you mean '" + best + "'? ";
  if (check)
    return fmt::format("unknown metric for a tolerance check; {}the metrics are {}", hint, list);
  return fmt::format("unknown reference figure: no report reads it; {}the figures are {} "
                     "(docs/REPORTS.md)", hint, list);
}

// [value, lower, upper]: three finite numbers, lower <= 0 <= upper.
std::string read_check(const std::string& key, const toml::array& a,
                       std::map<std::string, double>* figures) {
  double v[3];
  bool numbers = a.size() == 3;
  for (std::size_t i = 0; numbers && i < 3; ++i) {
    const auto d = a[i].value<double>();
    numbers = d.has_value() && std::isfinite(*d) && (a[i].is_integer() || a[i].is_floating_point());
    if (numbers) v[i] = *d;
  }
  if (!numbers || v[1] > 0 || v[2] < 0)
    return fmt::format("a tolerance check is [value, lower, upper] with finite numbers and "
                       "lower <= 0 <= upper as fractions of value, e.g. {} = [12000.0, -0.10, "
                       "0.10] (within -10% .. +10%)", key);
  (*figures)[key] = v[0];
  (*figures)[key + ".lower"] = v[1];
  (*figures)[key + ".upper"] = v[2];
  return "";
}
}  // namespace

std::string closest(const std::string& word, const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  std::size_t best_d = 0;
  for (const auto& k : known) {
    std::size_t d = distance(word, k);
    if (!best || d < best_d) best = &k, best_d = d;
  }
  if (!best || best_d > std::max<std::size_t>(2, word.size() / 3)) return "";
  return *best;
}

std::string read_reference_figure(const std::string& key, const toml::node& node,
                                  std::map<std::string, double>* figures, bool* key_problem) {
  *key_problem = false;
  if (const auto* a = node.as_array()) {
    const auto& checks = reference_checks();
    if (std::none_of(checks.begin(), checks.end(), [&](const auto& c) { return c.first == key; })) {
      *key_problem = true;
      return unknown_name(key, true);
    }
    return read_check(key, *a, figures);
  }
  const auto& figs = reference_figures();
  if (std::none_of(figs.begin(), figs.end(), [&](const auto& f) { return f.first == key; })) {
    *key_problem = true;
    return unknown_name(key, false);
  }
  const double v = node.value<double>().value();
  if (!std::isfinite(v))
    return fmt::format("reference figure {} is {}: give the paper's figure as a finite number",
                       key, v);
  (*figures)[key] = v;
  return "";
}

}  // namespace sb
