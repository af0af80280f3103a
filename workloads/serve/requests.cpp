// Request arrivals and lengths (requests.h).
#include "workloads/serve/requests.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/data/jsonl.h"
#include "workloads/data/rng.h"

namespace sb::serve {
namespace {

// Streams of one seed: arrivals, prompt lengths and output lengths are independent.
enum Stream : std::uint64_t { kArrivals = 1, kPrompt = 2, kOutput = 3 };

std::int64_t uniform_int(data::Rng& r, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(hi - lo + 1)));
}

std::int64_t length_field(const nlohmann::json& j, const char* key, const std::string& where) {
  SB_REQUIRE(j.contains(key) && j[key].is_number_integer() && j[key].get<std::int64_t>() >= 1,
             "{}: \"{}\" must be an integer >= 1", where, key);
  return j[key].get<std::int64_t>();
}

}  // namespace

std::vector<RequestSpec> draw_requests(const ArrivalConfig& c) {
  if (c.arrival == "trace") return read_request_trace(c.trace);
  SB_CHECK(c.arrival == "poisson" || c.arrival == "offline",
           "arrival '{}': use poisson, offline or trace", c.arrival);
  SB_CHECK(c.requests >= 1, "requests must be >= 1, got {}", c.requests);
  SB_CHECK(c.prompt_min >= 1 && c.prompt_min <= c.prompt_max, "prompt lengths [{}, {}] are not a range of lengths >= 1",
           c.prompt_min, c.prompt_max);
  SB_CHECK(c.output_min >= 1 && c.output_min <= c.output_max, "output lengths [{}, {}] are not a range of lengths >= 1",
           c.output_min, c.output_max);
  const bool poisson = c.arrival == "poisson";
  SB_CHECK(!poisson || c.request_rate > 0, "poisson arrivals need request_rate > 0, got {}", c.request_rate);
  data::Rng gaps(c.seed, kArrivals), prompts(c.seed, kPrompt), outputs(c.seed, kOutput);
  std::vector<RequestSpec> out;
  double t = 0;
  for (std::int64_t i = 0; i < c.requests; ++i) {
    // Exponential gap by the inverse CDF; 1 - u lies in (0, 1], so the log is finite.
    if (poisson) t += -std::log(1.0 - gaps.uniform()) / c.request_rate;
    out.push_back({i, t, uniform_int(prompts, c.prompt_min, c.prompt_max),
                   uniform_int(outputs, c.output_min, c.output_max)});
  }
  return out;
}

std::vector<RequestSpec> read_request_trace(const std::string& path) {
  std::ifstream f(path);
  SB_REQUIRE(f.good(), "request trace '{}' cannot be read (set request_trace to a JSONL file)", path);
  std::stringstream text;
  text << f.rdbuf();
  std::vector<RequestSpec> out;
  double last = 0;
  data::for_each_jsonl_line(path, text.str(), [&](const nlohmann::json& j, const std::string& where) {
    SB_REQUIRE(j.is_object(), "{}: a line must be a JSON object with arrival_s, prompt_len, output_len", where);
    SB_REQUIRE(j.contains("arrival_s") && j["arrival_s"].is_number() && j["arrival_s"].get<double>() >= 0,
               "{}: \"arrival_s\" must be a number of seconds >= 0", where);
    RequestSpec r{static_cast<std::int64_t>(out.size()), j["arrival_s"].get<double>(),
                  length_field(j, "prompt_len", where), length_field(j, "output_len", where)};
    SB_REQUIRE(r.arrival_s >= last, "{}: arrival_s {} is before the previous request's {} (sort the trace by arrival)",
               where, r.arrival_s, last);
    last = r.arrival_s;
    out.push_back(r);
  });
  SB_REQUIRE(!out.empty(), "request trace '{}' has no requests", path);
  return out;
}

}  // namespace sb::serve
