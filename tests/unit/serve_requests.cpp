// Request arrivals and lengths (workloads/serve/requests.h): the Poisson process's rate and
// exponential gaps, the uniform lengths' range and mean, over many samples, within stated
// bounds; fixed lengths and offline arrivals exactly; the JSONL trace and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/serve/requests.h"

using namespace sb::serve;

TEST(ServeRequests, PoissonRateAndLengthsMatchTheirParameters) {
  ArrivalConfig c;
  c.request_rate = 5, c.requests = 40000;
  c.prompt_min = 32, c.prompt_max = 256, c.output_min = 16, c.output_max = 256;
  const auto r = draw_requests(c);
  ASSERT_EQ(r.size(), 40000u);
  double sum = 0, sq = 0, prompt = 0, output = 0;
  std::int64_t pmin = 1 << 30, pmax = 0, omin = 1 << 30, omax = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double gap = r[i].arrival_s - (i ? r[i - 1].arrival_s : 0.0);
    ASSERT_GE(gap, 0);
    sum += gap, sq += gap * gap;
    prompt += static_cast<double>(r[i].prompt_len), output += static_cast<double>(r[i].output_len);
    pmin = std::min(pmin, r[i].prompt_len), pmax = std::max(pmax, r[i].prompt_len);
    omin = std::min(omin, r[i].output_len), omax = std::max(omax, r[i].output_len);
  }
  const double n = 40000, mean = sum / n, var = sq / n - mean * mean;
  // Exponential gaps: mean 1/rate (standard error 1/(rate sqrt n) = 0.5%: bound 4 s.e. = 2%),
  // coefficient of variation 1 (bound 3%).
  EXPECT_NEAR(mean, 0.2, 0.2 * 0.02);
  EXPECT_NEAR(std::sqrt(var) / mean, 1.0, 0.03);
  // Uniform integers: the whole range appears, means (lo + hi) / 2 within 1%.
  EXPECT_EQ(pmin, 32);
  EXPECT_EQ(pmax, 256);
  EXPECT_EQ(omin, 16);
  EXPECT_EQ(omax, 256);
  EXPECT_NEAR(prompt / n, 144.0, 1.44);
  EXPECT_NEAR(output / n, 136.0, 1.36);
  EXPECT_EQ(draw_requests(c)[777].arrival_s, r[777].arrival_s);  // a seed repeats
  c.seed = 2;
  EXPECT_NE(draw_requests(c)[777].arrival_s, r[777].arrival_s);
}

TEST(ServeRequests, OfflineAndFixedLengthsAreExact) {
  ArrivalConfig c;
  c.arrival = "offline", c.requests = 50, c.prompt_min = c.prompt_max = 64, c.output_min = c.output_max = 7;
  for (const auto& r : draw_requests(c)) {
    EXPECT_EQ(r.arrival_s, 0.0);
    EXPECT_EQ(r.prompt_len, 64);
    EXPECT_EQ(r.output_len, 7);
  }
}

TEST(ServeRequests, TraceIsReadAndItsErrorsNamed) {
  const std::string p = sb::test::tmp() + "trace.jsonl";
  std::ofstream(p) << "{\"arrival_s\": 0.5, \"prompt_len\": 12, \"output_len\": 3}\n\n"
                      "{\"arrival_s\": 1.25, \"prompt_len\": 40, \"output_len\": 9}\n";
  ArrivalConfig c;
  c.arrival = "trace", c.trace = p;
  const auto r = draw_requests(c);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].id, 1);
  EXPECT_EQ(r[1].arrival_s, 1.25);
  EXPECT_EQ(r[1].prompt_len, 40);
  EXPECT_EQ(r[1].output_len, 9);
  auto error = [&](const std::string& text) {
    std::ofstream(p) << text;
    try {
      read_request_trace(p);
    } catch (const sb::Error& e) {
      return e.message();
    }
    return std::string();
  };
  EXPECT_EQ(error("{\"arrival_s\": 1, \"prompt_len\": 2, \"output_len\": 3}\n{\"arrival_s\": 0.5, "
                  "\"prompt_len\": 2, \"output_len\": 3}\n"),
            p + ":2: arrival_s 0.5 is before the previous request's 1 (sort the trace by arrival)");
  EXPECT_EQ(error("{\"arrival_s\": 1, \"prompt_len\": 0, \"output_len\": 3}\n"),
            p + ":1: \"prompt_len\" must be an integer >= 1");
  EXPECT_EQ(error("{\"arrival_s\": 1, \"prompt_len\": 2}\n"), p + ":1: \"output_len\" must be an integer >= 1");
  EXPECT_NE(error("arrival 1\n").find(p + ":1: not a JSON object"), std::string::npos);
  EXPECT_EQ(error(""), "request trace '" + p + "' has no requests");
}
