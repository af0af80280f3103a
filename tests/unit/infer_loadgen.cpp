// LoadGen scenarios with a synthetic system under test whose batch time is known exactly:
// issue times, latencies (server: queueing included), batching limits, quantiles.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/core/check.h"
#include "workloads/infer/loadgen.h"

using namespace sb::infer;

namespace {
// 10 ms per call + 1 ms per sample; remembers the calls.
struct FakeSut {
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;  // (first, samples)
  double operator()(std::int64_t first, std::int64_t n) {
    calls.emplace_back(first, n);
    return 0.010 + 0.001 * static_cast<double>(n);
  }
};
LoadgenConfig cfg(const std::string& scenario) {
  LoadgenConfig c;
  c.scenario = scenario;
  c.queries = 20;
  c.samples_per_query = 4;
  c.max_batch = 6;
  return c;
}
}  // namespace

TEST(Loadgen, SingleStreamIsBackToBackOneSampleQueries) {
  FakeSut sut;
  auto r = run_scenario(cfg("single-stream"), std::ref(sut));
  ASSERT_EQ(r.queries.size(), 20u);
  for (std::size_t i = 0; i < r.queries.size(); ++i) {
    EXPECT_EQ(r.queries[i].samples, 1);
    EXPECT_DOUBLE_EQ(r.queries[i].latency_s, 0.011);
    EXPECT_NEAR(r.queries[i].issue_s, 0.011 * static_cast<double>(i), 1e-12);
    EXPECT_EQ(sut.calls[i], std::make_pair(std::int64_t(i), std::int64_t(1)));
  }
  EXPECT_NEAR(r.duration_s, 20 * 0.011, 1e-12);
}

TEST(Loadgen, MultiStreamSendsSamplesPerQuery) {
  FakeSut sut;
  auto r = run_scenario(cfg("multi-stream"), std::ref(sut));
  ASSERT_EQ(r.queries.size(), 20u);
  EXPECT_EQ(r.samples, 80);
  EXPECT_DOUBLE_EQ(r.queries[3].latency_s, 0.014);
  EXPECT_EQ(sut.calls[3], std::make_pair(std::int64_t(12), std::int64_t(4)));
}

TEST(Loadgen, OfflineBatchesEverySampleOnce) {
  FakeSut sut;
  auto r = run_scenario(cfg("offline"), std::ref(sut));
  ASSERT_EQ(r.queries.size(), 1u);
  EXPECT_EQ(r.samples, 80);
  ASSERT_EQ(sut.calls.size(), 14u);  // 13 x 6 + 2
  std::int64_t next = 0;
  for (const auto& [first, n] : sut.calls) {
    EXPECT_EQ(first, next);
    EXPECT_LE(n, 6);
    next += n;
  }
  EXPECT_EQ(next, 80);
  EXPECT_NEAR(r.duration_s, 14 * 0.010 + 80 * 0.001, 1e-12);
}

TEST(Loadgen, ServerQueuesAndBatchesUnderLoad) {
  // Overloaded: 1000 qps against >= 11 ms per call: queries wait and are batched (<= 6).
  auto c = cfg("server");
  c.target_qps = 1000;
  c.queries = 200;
  FakeSut sut;
  auto r = run_scenario(c, std::ref(sut));
  ASSERT_EQ(r.queries.size(), 200u);
  bool batched = false;
  double prev_issue = 0;
  for (const auto& call : sut.calls) {
    batched |= call.second > 1;
    EXPECT_LE(call.second, 6);
  }
  EXPECT_TRUE(batched);
  for (const auto& q : r.queries) {
    EXPECT_GE(q.issue_s, prev_issue);  // Poisson arrivals in order
    prev_issue = q.issue_s;
    EXPECT_GE(q.latency_s, 0.011 - 1e-12);
  }
  // Queueing grows: the last query waited far longer than one service time.
  EXPECT_GT(r.queries.back().latency_s, 10 * 0.016);
  // Seeded: the same seed gives the same arrivals.
  FakeSut again;
  auto r2 = run_scenario(c, std::ref(again));
  EXPECT_EQ(r2.queries.back().issue_s, r.queries.back().issue_s);
}

TEST(Loadgen, ServerUnderLightLoadHasNoQueueing) {
  auto c = cfg("server");
  c.target_qps = 0.5;  // mean gap 2 s >> 11 ms service
  FakeSut sut;
  auto r = run_scenario(c, std::ref(sut));
  int waited = 0;
  for (const auto& q : r.queries) waited += q.latency_s > 0.011 + 1e-9;
  EXPECT_LE(waited, 1);  // a gap below 11 ms has probability ~ 0.5% per query
  // Mean inter-arrival is about 1 / qps.
  EXPECT_NEAR(r.queries.back().issue_s / 20, 2.0, 1.0);
}

TEST(Loadgen, QuantilesInterpolateLikeNumpy) {
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_NEAR(quantile({1, 2, 3, 4}, 0.9), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 1.0), 5);
}

TEST(Loadgen, UnknownScenarioListsKnownOnes) {
  FakeSut sut;
  std::string msg;
  try {
    run_scenario(cfg("batch"), std::ref(sut));
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("unknown scenario \"batch\"; known: multi-stream, offline, server, single-stream"),
            std::string::npos) << msg;
}
