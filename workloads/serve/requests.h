// The requests a serving run receives: when each arrives and how many tokens it brings and
// asks for. Drawn from a seed (Poisson arrivals or all at once; fixed or uniform lengths) or
// read from a JSONL trace. Pure data: no model, no MPI (tests/unit/serve_requests.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb::serve {

struct RequestSpec {
  std::int64_t id = 0;
  double arrival_s = 0;  // since the run's start
  std::int64_t prompt_len = 0, output_len = 0;
};

struct ArrivalConfig {
  std::string arrival = "poisson";  // poisson | offline | trace
  double request_rate = 1;          // poisson: mean arrivals per second
  std::int64_t requests = 64;
  // Lengths uniform on [min, max] (fixed when equal).
  std::int64_t prompt_min = 32, prompt_max = 32, output_min = 16, output_max = 16;
  std::string trace;  // arrival = trace: JSONL path
  std::uint64_t seed = 1;
};

// poisson: gaps are exponential with mean 1/request_rate (inverse CDF of a uniform from a
// counter-based generator), the first request at the first gap; offline: every request at 0.
// Lengths: uniform integers on [min, max], independent of the arrivals (their own streams).
// trace: the file's requests, in file order (arrival times must not decrease).
std::vector<RequestSpec> draw_requests(const ArrivalConfig& c);

// JSONL, one request per line: {"arrival_s": 0.25, "prompt_len": 120, "output_len": 64}
// (blank lines skipped). Errors name file:line and the field.
std::vector<RequestSpec> read_request_trace(const std::string& path);

}  // namespace sb::serve
