// BERT requests (the Serving issue): padded and packed batches give each request the logits
// it gets alone (block-diagonal attention keeps packed prompts apart, under every attention
// variant); every policy serves each request the label it gets alone; packing computes fewer
// positions than padding; first-fit decreasing packs as stated.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <numeric>
#include <set>

#include "harness/core/check.h"
#include "workloads/models/bert.h"
#include "workloads/models/params.h"
#include "workloads/serve/bert_executor.h"
#include "workloads/serve/policy.h"
#include "workloads/serve/server.h"

using namespace sb;
using namespace sb::serve;
using I = std::int64_t;

namespace {

models::UnitTensors noisy(const models::Model& m) {  // logits that differ visibly
  auto p = models::init_params(m.units(), 13);
  for (auto& u : p)
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(5);
  return p;
}

std::vector<std::vector<I>> random_prompts(const std::vector<I>& lens, I vocab) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  std::vector<std::vector<I>> out;
  for (I len : lens) {
    auto t = torch::randint(104, vocab, {len}, gen);
    std::vector<I> p(t.data_ptr<I>(), t.data_ptr<I>() + len);
    p.front() = 101;  // [CLS]
    out.push_back(p);
  }
  return out;
}

TEST(ServeBert, PackRowsIsFirstFitDecreasing) {
  // cap 10: 9 | 7 3 | 6 4 | 5 2 2 (lengths by index: 3 5 9 2 7 4 6 2)
  const std::vector<I> lens{3, 5, 9, 2, 7, 4, 6, 2};
  const auto rows = pack_rows(lens, 10);
  const std::vector<std::vector<I>> want{{2}, {4, 0}, {6, 5}, {1, 3, 7}};
  EXPECT_EQ(rows, want);
  EXPECT_THROW(pack_rows({11}, 10), sb::Error);
}

TEST(ServeBert, PackedAndPaddedEqualEachAloneUnderEveryAttention) {
  const std::vector<I> lens{3, 17, 9, 30, 5, 12, 30, 1, 8};
  for (const char* attn : {"naive", "chunked", "online", "sdpa"}) {
    auto cfg = models::preset_config("bert-tiny");
    cfg.attention = attn, cfg.attention_chunk = 4;  // chunk bounds fall inside segments
    models::Bert model(cfg);
    models::PersistentParams params(noisy(model), false);
    const auto prompts = random_prompts(lens, cfg.vocab);
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> alone;
    for (const auto& p : prompts) {
      models::Batch b;
      b.input_ids = torch::tensor(p, torch::kLong).view({1, -1});
      alone.push_back(model.classify(params, b)[0]);
    }
    for (bool packed : {false, true}) {
      auto b = bert_batch(prompts, packed);
      EXPECT_EQ(b.input_ids.size(0), packed ? 4 : 9) << attn;  // 30 | 30 | 17 12 1 | 9 8 5 3
      auto logits = model.classify(params, b);
      ASSERT_EQ(logits.size(0), 9);
      for (std::size_t i = 0; i < prompts.size(); ++i)
        EXPECT_TRUE(torch::allclose(logits[static_cast<I>(i)], alone[i], 1e-5, 1e-5))
            << attn << (packed ? " packed" : " padded") << " request " << i << ": "
            << logits[static_cast<I>(i)] << " vs " << alone[i];
    }
  }
}

TEST(ServeBert, EveryPolicyServesEachRequestItsLabelAlone) {
  auto cfg = models::preset_config("bert-tiny");
  models::Bert model(cfg);
  models::PersistentParams params(noisy(model), false);
  ArrivalConfig a;
  a.arrival = "poisson", a.request_rate = 2000, a.requests = 24;
  a.prompt_min = 2, a.prompt_max = 60, a.output_min = a.output_max = 1;
  auto requests = draw_requests(a);
  std::vector<I> lens;
  for (const auto& r : requests) lens.push_back(r.prompt_len);
  const auto prompts = random_prompts(lens, cfg.vocab);
  torch::NoGradGuard ng;
  std::vector<I> want;
  for (const auto& p : prompts) {
    models::Batch b;
    b.input_ids = torch::tensor(p, torch::kLong).view({1, -1});
    want.push_back(std::get<1>(model.classify(params, b).max(-1))[0].item<I>());
  }
  EXPECT_GT(std::set<I>(want.begin(), want.end()).size(), 1u) << "labels all alike: a weak test";
  std::map<std::string, std::pair<I, I>> cost;  // policy -> (prompt tokens, computed positions)
  for (const char* policy : {"sequential", "static", "continuous"}) {
    const I rows = std::string(policy) == "sequential" ? 1 : 8;
    const bool packed = std::string(policy) == "continuous";
    BertExecutor ex(model, [&](const auto& f) { return f(params); }, [&](I r) { return prompts.at(r); },
                    rows, packed);
    PolicyConfig pc;
    pc.max_batch = rows, pc.max_prefill_tokens = 200, pc.max_queue_delay_s = 0.002;
    auto out = run_server(requests, *make_policy(policy, pc), ex, ServerConfig{cfg.max_pos, -1});
    for (std::size_t i = 0; i < requests.size(); ++i) {
      ASSERT_EQ(out.requests[i].tokens.size(), 1u) << policy << " request " << i;
      EXPECT_EQ(out.requests[i].tokens[0], want[i]) << policy << " request " << i;
    }
    for (const auto& s : out.steps) {
      EXPECT_EQ(s.decode_rows, 0) << policy;  // BERT requests end at their prefill
      cost[policy].first += s.prompt_tokens, cost[policy].second += s.prefill_tokens;
    }
  }
  for (const auto& [policy, c] : cost) EXPECT_EQ(c.first, std::accumulate(lens.begin(), lens.end(), I{0})) << policy;
  EXPECT_EQ(cost["sequential"].second, cost["sequential"].first);  // one request: no padding
  EXPECT_LT(cost["continuous"].second, cost["static"].second);     // packing pads less
}

}  // namespace
