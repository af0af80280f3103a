// Serving (the Serving issue): every batching policy produces exactly the tokens of running
// each request alone with models::generate (greedy, fp32), on a mixed-length request list;
// sampled tokens do not depend on the batch either; KV rows bound the batch; a request
// longer than the context is refused and counted while the others are served.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <map>

#include "harness/core/check.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/params.h"
#include "workloads/serve/gpt2_executor.h"
#include "workloads/serve/metrics.h"
#include "workloads/serve/policy.h"
#include "workloads/serve/server.h"

using namespace sb;
using namespace sb::serve;
using I = std::int64_t;

namespace {

struct Fixture {
  models::Gpt2 model{models::preset_config("gpt2-tiny")};  // vocab 256, 128 positions
  models::PersistentParams params{noisy(model), false};
  std::vector<RequestSpec> requests;
  std::map<I, std::vector<I>> prompts;

  // Larger weights than the 0.02 init so that logits differ visibly (no near-ties in argmax).
  static models::UnitTensors noisy(const models::Model& m) {
    auto p = models::init_params(m.units(), 11);
    for (auto& u : p)
      for (auto& t : u)
        if (t.dim() == 2) t.mul_(10);
    return p;
  }

  explicit Fixture(ArrivalConfig a) {
    requests = draw_requests(a);
    for (const auto& r : requests)
      prompts[r.id] = std::vector<I>(static_cast<std::size_t>(r.prompt_len));
    auto ids = torch::randint(0, 256, {static_cast<I>(requests.size()), 128},
                              at::make_generator<at::CPUGeneratorImpl>(5));
    for (auto& [id, p] : prompts)
      for (std::size_t k = 0; k < p.size(); ++k) p[k] = ids[id][static_cast<I>(k)].item<I>();
  }

  std::unique_ptr<Gpt2Executor> executor(I rows, SamplingConfig s = {}) {
    I capacity = 1;
    for (const auto& r : requests)
      if (r.prompt_len + r.output_len <= 128) capacity = std::max(capacity, r.prompt_len + r.output_len);
    return std::make_unique<Gpt2Executor>(
        model, [this](const auto& f) { return f(params); }, [this](I r) { return prompts.at(r); },
        rows, capacity, s);
  }

  ServeResult serve(const std::string& policy, I rows, PolicyConfig pc = {}, SamplingConfig s = {}) {
    pc.max_batch = rows;
    auto ex = executor(rows, s);
    torch::NoGradGuard ng;
    return run_server(requests, *make_policy(policy, pc), *ex, ServerConfig{128, -1});
  }

  // Request r alone, through the model's own generate().
  std::vector<I> alone(I r) {
    models::GenerateConfig g;
    g.max_new_tokens = requests[r].output_len;
    auto prompt = torch::tensor(prompts.at(r), torch::kLong).view({1, -1});
    auto out = models::generate(model, params, prompt, g).tokens[0].narrow(0, requests[r].prompt_len, g.max_new_tokens);
    return {out.data_ptr<I>(), out.data_ptr<I>() + out.numel()};
  }
};

ArrivalConfig mixed(const std::string& arrival = "offline", I n = 14) {
  ArrivalConfig a;
  a.arrival = arrival;
  a.request_rate = 3000;  // a few per tiny-model step: requests join a running batch
  a.requests = n;
  a.prompt_min = 1, a.prompt_max = 40, a.output_min = 1, a.output_max = 24;
  a.seed = 3;
  return a;
}

I max_decode_rows(const ServeResult& r) {
  I m = 0;
  for (const auto& s : r.steps) m = std::max(m, s.decode_rows);
  return m;
}

}  // namespace

TEST(Serve, EveryPolicyGivesTheTokensOfEachRequestAlone) {
  for (const std::string arrival : {"offline", "poisson"}) {
    Fixture f(mixed(arrival));
    PolicyConfig pc;
    pc.max_prefill_tokens = 30;  // continuous: admissions spread over steps
    pc.max_queue_delay_s = 1e-3;
    for (const std::string policy : {"sequential", "static", "continuous"}) {
      const auto r = f.serve(policy, 4, pc);
      bool joined_running = false;  // a prefill in a step that also decoded
      for (const auto& s : r.steps) joined_running |= s.prefill_requests > 0 && s.decode_rows > 0;
      if (policy == "continuous") EXPECT_TRUE(joined_running) << arrival;
      if (policy != "sequential") EXPECT_GT(max_decode_rows(r), 1) << policy << " " << arrival;
      for (const auto& q : f.requests) {
        const auto& res = r.requests[q.id];
        ASSERT_FALSE(res.refused);
        EXPECT_EQ(res.tokens, f.alone(q.id)) << policy << " " << arrival << " request " << q.id;
        ASSERT_EQ(static_cast<I>(res.token_s.size()), q.output_len);
        EXPECT_GE(res.start_s, q.arrival_s);
        for (std::size_t k = 1; k < res.token_s.size(); ++k) EXPECT_GT(res.token_s[k], res.token_s[k - 1]);
      }
    }
  }
}

TEST(Serve, SampledTokensDoNotDependOnTheBatch) {
  Fixture f(mixed());
  SamplingConfig s;
  s.temperature = 0.8, s.top_k = 20, s.seed = 9;
  const auto seq = f.serve("sequential", 1, {}, s);
  for (const std::string policy : {"static", "continuous"}) {
    const auto r = f.serve(policy, 5, {}, s);
    for (const auto& q : f.requests) EXPECT_EQ(r.requests[q.id].tokens, seq.requests[q.id].tokens) << policy;
  }
  const auto greedy = f.serve("sequential", 1);
  int differ = 0;
  for (const auto& q : f.requests) differ += greedy.requests[q.id].tokens != seq.requests[q.id].tokens;
  EXPECT_GT(differ, 0);  // sampling did sample
}

TEST(Serve, KvRowsBoundTheRunningBatch) {
  Fixture f(mixed("offline", 10));
  auto ex = f.executor(3);
  torch::NoGradGuard ng;
  PolicyConfig pc;
  pc.max_batch = 8;  // more than the rows: the KV cache is the bound
  const auto r = run_server(f.requests, *make_policy("continuous", pc), *ex, ServerConfig{128, -1});
  EXPECT_EQ(ex->cache_bytes(), 3 * ex->row_capacity() * ex->kv_bytes_per_token());
  EXPECT_EQ(ex->kv_bytes_per_token(), 2 * 2 * 64 * 4);  // K and V, 2 layers, d 64, fp32
  I peak = 0;
  for (const auto& s : r.steps) {
    EXPECT_LE(s.decode_rows, 3);
    EXPECT_LE(s.running, 3);
    EXPECT_LE(s.kv_in_use_bytes, ex->cache_bytes());
    peak = std::max(peak, s.kv_in_use_bytes);
  }
  EXPECT_EQ(max_decode_rows(r), 3);
  EXPECT_GT(peak, 0);
  for (const auto& q : f.requests) EXPECT_EQ(r.requests[q.id].tokens, f.alone(q.id));
}

TEST(Serve, ARequestLongerThanTheContextIsRefusedAndCounted) {
  Fixture f(mixed("offline", 6));
  f.requests[2].prompt_len = 120, f.requests[2].output_len = 9;  // 129 > 128 positions
  f.prompts[2].assign(120, 7);
  const auto r = f.serve("continuous", 4);
  EXPECT_TRUE(r.requests[2].refused);
  EXPECT_TRUE(r.requests[2].tokens.empty());
  const auto rows = request_records(f.requests, r, Slo{1e9, 1e9});
  const auto m = summarize(f.requests, r, rows);
  EXPECT_EQ(m.at("requests_refused"), 1);
  EXPECT_EQ(m.at("requests_served"), 5);
  EXPECT_NEAR(m.at("slo_attainment"), 5.0 / 6.0, 1e-12);  // a refused request misses its SLO
  for (const auto& q : f.requests)
    if (q.id != 2) EXPECT_EQ(r.requests[q.id].tokens, f.alone(q.id));
}

TEST(Serve, MetricsFollowTheirFormulas) {
  std::vector<RequestSpec> specs = {{0, 1.0, 5, 3}, {1, 2.0, 4, 1}};
  ServeResult r;
  r.requests.resize(2);
  r.requests[0].start_s = 1.5, r.requests[0].token_s = {2.0, 2.5, 3.5}, r.requests[0].tokens = {1, 2, 3};
  r.requests[1].start_s = 2.0, r.requests[1].token_s = {2.25}, r.requests[1].tokens = {4};
  const auto rows = request_records(specs, r, Slo{0.5, 1.0});
  EXPECT_DOUBLE_EQ(rows[0].queue_s, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].e2e_s, 2.5);
  EXPECT_DOUBLE_EQ(rows[0].tpot_s, 0.75);  // (2.5 - 1.0) / (3 - 1)
  EXPECT_FALSE(rows[0].slo_met);           // ttft 1.0 > 0.5
  EXPECT_DOUBLE_EQ(rows[1].tpot_s, 0.0);
  EXPECT_TRUE(rows[1].slo_met);
  EXPECT_EQ(inter_token_gaps(r), (std::vector<double>{0.5, 1.0}));
  const auto m = summarize(specs, r, rows);
  EXPECT_DOUBLE_EQ(m.at("slo_attainment"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("duration_s"), 2.5);               // first arrival 1.0 to last token 3.5
  EXPECT_DOUBLE_EQ(m.at("output_tokens_per_s"), 4 / 2.5);  // 3 + 1 tokens
}

TEST(ServePolicy, StaticWaitsForAFullerBatchUntilItsDelay) {
  PolicyConfig pc;
  pc.max_batch = 3, pc.max_queue_delay_s = 0.1;
  auto p = make_policy("static", pc);
  std::vector<RequestSpec> reqs = {{0, 1.0, 1, 1}, {1, 1.02, 1, 1}, {2, 1.05, 1, 1}, {3, 1.06, 1, 1}};
  std::deque<I> waiting = {0, 1};
  ServerView v;
  v.waiting = &waiting, v.requests = &reqs, v.free_rows = 3;
  v.now = 1.03, v.next_arrival_s = 1.05;
  auto d = p->decide(v);
  EXPECT_EQ(d.admit, 0);
  EXPECT_DOUBLE_EQ(d.wake_s, 1.1);  // the oldest's arrival + max_queue_delay
  v.now = 1.1;
  EXPECT_EQ(p->decide(v).admit, 2);  // out of time: the batch goes as it is
  waiting = {0, 1, 2, 3};
  v.now = 1.06;
  EXPECT_EQ(p->decide(v).admit, 3);  // full
  v.running = 1;
  EXPECT_EQ(p->decide(v).admit, 0);  // a batch runs to completion before the next
  EXPECT_THROW(make_policy("fifo", pc), sb::Error);
}

TEST(Serve, StaticPaddingRowsNeverOutgrowTheirKvRow) {
  // Row capacity is the longest request (102 tokens); the long prompt finishes first and is
  // decoded as padding while the long output runs 58 more steps.
  Fixture f(mixed("offline", 2));
  f.requests[0].prompt_len = 100, f.requests[0].output_len = 2;
  f.requests[1].prompt_len = 5, f.requests[1].output_len = 60;
  f.prompts[0].assign(100, 9), f.prompts[1].assign(5, 4);
  const auto r = f.serve("static", 2);
  for (const auto& q : f.requests) EXPECT_EQ(r.requests[q.id].tokens, f.alone(q.id));
  EXPECT_EQ(max_decode_rows(r), 2);  // the finished request was computed as padding
}
