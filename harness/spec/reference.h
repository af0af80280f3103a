// [[reference]] figures of a suite, two kinds in one table:
//  - a number: a figure of the paper the reports print beside ours (reference_figures(),
//    expand.h; e.g. latency_ms = 185.0);
//  - [value, lower, upper]: what this system is expected to measure, ReFrame-style: the
//    measured metric must lie within value x (1 + lower) .. value x (1 + upper), lower <= 0 <=
//    upper as fractions (tokens_per_s = [12000.0, -0.10, 0.10]); the report lists every point
//    outside (analysis/references.py). Stored as NAME, NAME.lower and NAME.upper.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace sb {

// Metrics a tolerance check can name: the report's per-point summary columns (analysis/
// metrics.py SUMMARY_COLUMNS; tests/analysis/test_references.py keeps the two lists equal).
const std::vector<std::pair<std::string, std::string>>& reference_checks();

// Reads one figure `key = node` (a number or an array) of a [[reference]] entry into `figures`. Returns "" or the
// error (what is wrong and how to write it); *key_problem says the error is the key's (an
// unknown name), not the value's, for the diagnostic position.
std::string read_reference_figure(const std::string& key, const toml::node& node,
                                  std::map<std::string, double>* figures, bool* key_problem);

// The closest of `known` to `word` when it is plausibly a typo of it, else "".
std::string closest(const std::string& word, const std::vector<std::string>& known);

}  // namespace sb
