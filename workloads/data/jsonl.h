// JSON Lines, as labelled datasets and request traces use them: one JSON value per line,
// blank lines skipped, a line that is not JSON an error naming file:line.
#pragma once
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"

namespace sb::data {

// Calls f(value, "path:line") for each non-blank line of `text` (the contents of `path`).
template <class F>
void for_each_jsonl_line(const std::string& path, const std::string& text, F&& f) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      SB_USER_FAIL("{}: not a JSON object ({})", where, e.what());  // the file is the user's
    }
    f(j, where);
  }
}

}  // namespace sb::data
