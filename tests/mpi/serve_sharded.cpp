// Sharded serving (the Serving issue): the model under full_shard on every rank, one
// scheduler on rank 0 deciding each step for all (serve::Leader / serve::follow). Every
// request's tokens equal those of the one-process server on the same weights, greedy and
// sampled, under static and continuous batching; BERT requests likewise (padded and packed).
#include <ATen/CPUGeneratorImpl.h>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/bert.h"
#include "workloads/serve/bert_executor.h"
#include "workloads/serve/gpt2_executor.h"
#include "workloads/serve/sharded.h"

using namespace sbtest;
using namespace sb::serve;
using I = std::int64_t;

namespace {

std::vector<RequestSpec> requests() {
  ArrivalConfig a;
  a.arrival = "poisson", a.request_rate = 3000, a.requests = 12;
  a.prompt_min = 1, a.prompt_max = 30, a.output_min = 1, a.output_max = 20;
  a.seed = 4;
  return draw_requests(a);
}

// 30 seeded tokens per request (the longest prompt); a request uses the first prompt_len.
std::vector<I> prompt_of(I r) {
  auto t = torch::randint(0, 256, {30}, at::make_generator<at::CPUGeneratorImpl>(100 + r));
  return {t.data_ptr<I>(), t.data_ptr<I>() + t.numel()};
}

}  // namespace

TEST(ServeSharded, EveryRankFollowsRankZerosScheduleAndTheTokensEqualOneProcess) {
  auto model = sb::models::Gpt2(sb::models::preset_config("gpt2-tiny"));
  auto weights = sb::models::init_params(model.units(), 11);
  for (auto& u : weights)
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(10);  // visible logit gaps (no near-ties in argmax)
  const auto reqs = requests();
  I capacity = 1;
  for (const auto& r : reqs) capacity = std::max(capacity, r.prompt_len + r.output_len);
  // Prompts of each request's drawn length.
  auto prompt = [&](I r) {
    auto p = prompt_of(r);
    p.resize(static_cast<std::size_t>(reqs[r].prompt_len));
    return p;
  };
  sb::comm::Communicator comm(MPI_COMM_WORLD, 0);
  sb::fsdp::Engine engine(model, comm, engine_config("full_shard"), weights);
  sb::models::PersistentParams whole(weights, false);
  torch::NoGradGuard ng;
  for (const std::string policy : {"static", "continuous"}) {
    for (const double temperature : {0.0, 0.7}) {
      SamplingConfig s;
      s.temperature = temperature, s.top_k = 16, s.seed = 2;
      PolicyConfig pc;
      pc.max_batch = 4, pc.max_prefill_tokens = 24;
      auto pol = make_policy(policy, pc);
      Gpt2Executor sharded(model, [&](const auto& f) { return engine.forward_with(f); }, prompt, 4,
                           capacity, s);
      if (world_rank() != 0) {
        follow(sharded, MPI_COMM_WORLD, {});
        continue;
      }
      Leader leader(sharded, MPI_COMM_WORLD);
      const auto got = run_server(reqs, *pol, leader, ServerConfig{128, -1});
      leader.finish();
      Gpt2Executor alone(model, [&](const auto& f) { return f(whole); }, prompt, 4, capacity, s);
      const auto want = run_server(reqs, *pol, alone, ServerConfig{128, -1});
      for (const auto& r : reqs)
        EXPECT_EQ(got.requests[r.id].tokens, want.requests[r.id].tokens)
            << policy << " temperature " << temperature << " request " << r.id;
    }
  }
}

// BERT requests sharded (full_shard): static (padded) and continuous (packed) give every
// request the label of the one-process server, and the logits behind it agree within 1e-5.
TEST(ServeSharded, BertRequestsEqualOneProcess) {
  auto model = sb::models::Bert(sb::models::preset_config("bert-tiny"));
  auto weights = sb::models::init_params(model.units(), 12);
  for (auto& u : weights)
    for (auto& t : u)
      if (t.dim() == 2) t.mul_(5);
  auto reqs = requests();
  for (auto& r : reqs) r.output_len = 1;
  auto prompt = [&](I r) {
    auto p = prompt_of(r);
    p.resize(static_cast<std::size_t>(reqs[r].prompt_len));
    for (auto& t : p) t = 104 + t % 24;  // bert-tiny's vocab is 128
    return p;
  };
  sb::comm::Communicator comm(MPI_COMM_WORLD, 0);
  sb::fsdp::Engine engine(model, comm, engine_config("full_shard"), weights);
  sb::models::PersistentParams whole(weights, false);
  torch::NoGradGuard ng;
  for (const std::string policy : {"static", "continuous"}) {
    PolicyConfig pc;
    pc.max_batch = 4, pc.max_prefill_tokens = 60;
    auto pol = make_policy(policy, pc);
    const bool packed = policy == "continuous";
    BertExecutor sharded(model, [&](const auto& f) { return engine.forward_with(f); }, prompt, 4, packed);
    if (world_rank() != 0) {
      follow(sharded, MPI_COMM_WORLD, {});
      continue;
    }
    Leader leader(sharded, MPI_COMM_WORLD);
    const auto got = run_server(reqs, *pol, leader, ServerConfig{128, -1});
    leader.finish();
    BertExecutor alone(model, [&](const auto& f) { return f(whole); }, prompt, 4, packed);
    const auto want = run_server(reqs, *pol, alone, ServerConfig{128, -1});
    for (const auto& r : reqs)
      EXPECT_EQ(got.requests[r.id].tokens, want.requests[r.id].tokens) << policy << " request " << r.id;
  }
}
