// Expert-parallel inference in ExFlow's two forms (models/ep_inference.h): on gpt2-moe-tiny
// (4 experts in blocks 1 and 3, top-1, eval capacity factor 1.0 so tokens are dropped), each
// rank's 8 / n sequences of 16 tokens, at ep 2 (2 and 4 ranks) and ep 4 (4 ranks):
// - the context-coherent form's logits equal the dispatch/combine form's bit for bit, with
//   the same tokens routed, received and dropped per layer;
// - both equal the ordinary forward (moe.h's expert-parallel training form, under no grad)
//   within 1e-5, with the same dropped tokens; top-2 in the dispatch_combine form too, and
//   a placement leaves its logits bitwise unchanged; the coherent form refuses top-2;
// - the trace counts each form's collectives: dispatch_combine one ep_dispatch and one
//   ep_combine per MoE layer; coherent one ep_route per MoE layer, one ep_context (the keys
//   and values all-gathered) per block after the first MoE block, and one ep_home.
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/models/gpt2.h"
#include "workloads/parallel/ep_layers.h"

#include <map>
#include <mutex>

using namespace sbtest;
using sb::comm::Communicator;
using sb::models::EpForm;

namespace {

constexpr std::int64_t kB = 8, kT = 16;

sb::models::ModelConfig config(std::int64_t top_k = 1) {
  auto cfg = sb::models::preset_config("gpt2-moe-tiny");
  cfg.moe.top_k = top_k;
  cfg.moe.eval_capacity_factor = 1.0;
  return cfg;
}

sb::models::Batch my_batch(const sb::models::ModelConfig& cfg) {
  auto c = cfg;
  c.family = "gpt2";
  return slice(global_batch(c, kB, kT, 3), world_rank(), world_size());
}

using Placement = std::vector<std::vector<std::int64_t>>;

// The seeded weights of the whole model, each experts unit reordered by the placement of its
// MoE layer and sliced to this rank's block.
sb::models::UnitTensors placed_weights(const sb::models::Model& m, const Placement& placement, int ep) {
  auto whole = sb::models::make_model(config());
  return sb::models::ep_rank_weights(m.units(), sb::models::init_params(whole->units(), 1234), placement, ep);
}

struct Traced {
  sb::models::EpInference r;
  std::map<std::string, int> events;
  std::map<std::string, std::uint64_t> bytes;
};

struct EpModel {
  sb::Mesh mesh;
  Communicator comm;
  std::unique_ptr<sb::models::Model> model;
  sb::models::PersistentParams params;
  std::mutex mu;
  std::map<std::string, int> events;
  std::map<std::string, std::uint64_t> bytes;
  explicit EpModel(int ep, const Placement& placement = {}, std::int64_t top_k = 1)
      : mesh(make_mesh(ep)), comm(MPI_COMM_WORLD, mesh), model(make(comm, placement, top_k)),
        params(placed_weights(*model, placement, ep), false) {
    comm.set_trace_hook([this](const sb::CommEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      ++events[e.kind];
      bytes[e.kind] += e.logical_bytes;
    }, MPI_Wtime());
  }
  static sb::Mesh make_mesh(int ep) {
    sb::Mesh m;
    m.dp_shard = world_size(), m.ep = ep;
    return m;
  }
  static std::unique_ptr<sb::models::Model> make(Communicator& c, const Placement& placement, std::int64_t top_k) {
    auto m = sb::models::make_model(config(top_k));
    auto ep = sb::parallel::expert_parallel(c);
    ep.placement = placement;
    m->set_expert_parallel(ep);
    return m;
  }
  sb::models::Gpt2& gpt2() { return dynamic_cast<sb::models::Gpt2&>(*model); }
  Traced run(EpForm f, const torch::Tensor& ids) {
    events.clear(), bytes.clear();
    Traced t;
    t.r = gpt2().ep_inference(params, ids, f);
    t.events = events, t.bytes = bytes;
    return t;
  }
};

std::int64_t sum_over_ranks(std::int64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

std::vector<int> eps(int n) { return n == 4 ? std::vector<int>{2, 4} : std::vector<int>{2}; }

TEST(EpInference, CoherentFormEqualsDispatchCombineBitForBit) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  const auto cfg = config();
  const auto ids = my_batch(cfg).input_ids;
  const int moe_layers = static_cast<int>(cfg.moe.layers(cfg.n_layer));
  const int after_first = static_cast<int>(cfg.n_layer - cfg.moe.every);  // blocks after block every - 1
  for (const int ep : eps(n)) {
    const std::string what = fmt::format("{} ranks, ep {}", n, ep);
    EpModel m(ep);
    auto two = m.run(EpForm::DispatchCombine, ids);
    auto one = m.run(EpForm::Coherent, ids);
    ASSERT_EQ(two.r.logits.sizes(), (std::vector<std::int64_t>{ids.size(0), kT, cfg.vocab})) << what;
    EXPECT_TRUE(torch::equal(one.r.logits, two.r.logits))
        << what << ": max |d| " << (one.r.logits - two.r.logits).abs().max().item<double>();
    ASSERT_EQ(one.r.layers.size(), static_cast<std::size_t>(moe_layers)) << what;
    std::int64_t drops = 0, cross = 0;
    for (std::size_t i = 0; i < one.r.layers.size(); ++i) {
      EXPECT_EQ(one.r.layers[i].received, two.r.layers[i].received) << what << " layer " << i;
      EXPECT_EQ(one.r.layers[i].dropped, two.r.layers[i].dropped) << what << " layer " << i;
      drops += sum_over_ranks(one.r.layers[i].dropped);
      cross += sum_over_ranks(one.r.layers[i].cross_rank);
    }
    EXPECT_GT(drops, 0) << what << ": capacity factor 1.0 dropped nothing; the test lost its point";
    EXPECT_GT(cross, 0) << what;
    EXPECT_EQ(two.events["ep_dispatch"], moe_layers) << what;
    EXPECT_EQ(two.events["ep_combine"], moe_layers) << what;
    EXPECT_EQ(two.events.count("ep_route") + two.events.count("ep_context") + two.events.count("ep_home"), 0u);
    EXPECT_EQ(one.events["ep_route"], moe_layers) << what;
    EXPECT_EQ(one.events["ep_context"], after_first) << what;
    EXPECT_EQ(one.events["ep_home"], 1) << what;
    EXPECT_EQ(one.events.count("ep_dispatch") + one.events.count("ep_combine"), 0u) << what;
    if (world_rank() == 0)
      std::printf("[ ep infer ] %-16s bitwise equal; %lld dropped, %lld routed across ranks; bytes rank 0: "
                  "dispatch+combine %llu, route %llu + context %llu + home %llu\n", what.c_str(),
                  static_cast<long long>(drops), static_cast<long long>(cross),
                  static_cast<unsigned long long>(two.bytes["ep_dispatch"] + two.bytes["ep_combine"]),
                  static_cast<unsigned long long>(one.bytes["ep_route"]),
                  static_cast<unsigned long long>(one.bytes["ep_context"]),
                  static_cast<unsigned long long>(one.bytes["ep_home"]));
  }
}

// Top-1 in both forms' dispatch_combine, and top-2 (GShard's renormalized pair, each
// assignment dispatched alone and weighted at home), against the ordinary forward: the same
// logits within 1e-5 and the same assignments over capacity.
TEST(EpInference, EqualsTheOrdinaryForward) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  for (const std::int64_t k : {1, 2}) {
    const auto cfg = config(k);
    const auto b = my_batch(cfg);
    for (const int ep : eps(n)) {
      const std::string what = fmt::format("{} ranks, ep {}, top-{}", n, ep, k);
      EpModel m(ep, {}, k);
      torch::Tensor want;
      {
        torch::NoGradGuard ng;
        want = m.model->logits(m.params, b);
      }
      std::int64_t want_dropped = 0;
      for (const auto& r : *m.model->moe_routing()) want_dropped += r.dropped_assignments;
      auto got = m.run(EpForm::DispatchCombine, b.input_ids);
      const double d = (got.r.logits - want).abs().max().item<double>();
      EXPECT_LT(d, 1e-5 * std::max(1.0, want.abs().max().item<double>())) << what << ": logits differ by " << d;
      std::int64_t got_dropped = 0, assignments = 0;
      for (const auto& s : got.r.layers) got_dropped += s.dropped, assignments += s.tokens;
      EXPECT_EQ(sum_over_ranks(got_dropped), sum_over_ranks(want_dropped)) << what << ": dropped assignments";
      EXPECT_GT(sum_over_ranks(got_dropped), 0) << what << ": capacity factor 1.0 dropped nothing";
      EXPECT_EQ(assignments, k * b.input_ids.numel() * static_cast<std::int64_t>(got.r.layers.size())) << what;
      EXPECT_EQ(got.events["ep_dispatch"], static_cast<int>(got.r.layers.size())) << what;
      EXPECT_EQ(got.events["ep_combine"], static_cast<int>(got.r.layers.size())) << what;
      if (world_rank() == 0)
        std::printf("[ ep infer ] %-22s vs the ordinary forward: max |d logits| %.2e\n", what.c_str(), d);
    }
  }
}

// Top-2 under a placement that is not contiguous: the same experts compute the same rows and
// each token adds its two outputs in the same order, so the logits stay bit for bit.
TEST(EpInference, TopTwoPlacementMovesTrafficNotResults) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  const auto cfg = config(2);
  const auto ids = my_batch(cfg).input_ids;
  for (const int ep : eps(n)) {
    const std::string what = fmt::format("{} ranks, ep {}", n, ep);
    std::vector<std::int64_t> interleaved;  // expert e on rank e mod ep
    for (std::int64_t e = 0; e < cfg.moe.experts; ++e) interleaved.push_back(e % ep);
    EpModel base(ep, {}, 2), placed(ep, {interleaved, interleaved}, 2);
    const auto a = base.run(EpForm::DispatchCombine, ids), b = placed.run(EpForm::DispatchCombine, ids);
    EXPECT_TRUE(torch::equal(a.r.logits, b.r.logits))
        << what << ": max |d| " << (a.r.logits - b.r.logits).abs().max().item<double>();
    for (std::size_t i = 0; i < a.r.layers.size(); ++i)
      EXPECT_EQ(sum_over_ranks(a.r.layers[i].dropped), sum_over_ranks(b.r.layers[i].dropped)) << what << " layer " << i;
  }
}

// Every rank's routed (id, expert) rows: each token's expert, indexed by id made unique over
// the world (ids count within an ep group: `offset` is the group's first world id).
torch::Tensor experts_by_id(const torch::Tensor& routed, std::int64_t offset) {
  const int n = world_size();
  auto mine = routed.clone();
  mine.select(1, 0).add_(offset);
  long long count = mine.numel();
  std::vector<long long> counts(static_cast<std::size_t>(n));
  MPI_Allgather(&count, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  std::vector<int> cnt, disp;
  int total = 0;
  for (auto c : counts) cnt.push_back(static_cast<int>(c)), disp.push_back(total), total += static_cast<int>(c);
  auto all = torch::empty({total / 2, 2}, torch::kLong);
  MPI_Allgatherv(mine.data_ptr<std::int64_t>(), static_cast<int>(count), MPI_INT64_T, all.data_ptr<std::int64_t>(),
                 cnt.data(), disp.data(), MPI_INT64_T, MPI_COMM_WORLD);
  auto by_id = torch::full({total / 2}, -1, torch::kLong);
  by_id.index_put_({all.select(1, 0)}, all.select(1, 1));
  return by_id;
}

// Tokens whose expert's rank differs between two consecutive MoE layers.
std::int64_t moves(const torch::Tensor& e0, const torch::Tensor& e1, const std::vector<std::int64_t>& r0,
                   const std::vector<std::int64_t>& r1) {
  const auto a = torch::tensor(r0, torch::kLong).index_select(0, e0), b = torch::tensor(r1, torch::kLong).index_select(0, e1);
  return (a != b).sum().item<std::int64_t>();
}

// Every placement of `experts` on `ep` ranks with experts / ep each.
void balanced(std::int64_t experts, int ep, std::vector<std::int64_t>& cur, std::vector<std::vector<std::int64_t>>& out) {
  if (static_cast<std::int64_t>(cur.size()) == experts) {
    std::vector<std::int64_t> per(static_cast<std::size_t>(ep), 0);
    for (auto r : cur) ++per[static_cast<std::size_t>(r)];
    for (auto c : per)
      if (c != experts / ep) return;
    out.push_back(cur);
    return;
  }
  for (int r = 0; r < ep; ++r) {
    cur.push_back(r);
    balanced(experts, ep, cur, out);
    cur.pop_back();
  }
}

// ExFlow's point: a placement that follows the inter-layer affinity keeps tokens on their rank.
// The second MoE layer's experts placed (by brute force over every balanced placement) to
// minimize the tokens that change rank after the first, contiguous, one: the coherent form's
// logits stay bitwise what they were, both forms agree under it, and the second layer sends
// exactly the predicted tokens across ranks, no more than the contiguous placement did.
TEST(EpInference, PlacementMovesTrafficNotResults) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  const auto cfg = config();
  const auto ids = my_batch(cfg).input_ids;
  for (const int ep : eps(n)) {
    const std::string what = fmt::format("{} ranks, ep {}", n, ep);
    EpModel base(ep);
    const auto a = base.run(EpForm::Coherent, ids);
    const std::int64_t offset = (world_rank() / ep) * ep * ids.numel();  // ep groups: consecutive ranks
    const auto e0 = experts_by_id(a.r.layers[0].routed, offset), e1 = experts_by_id(a.r.layers[1].routed, offset);
    std::vector<std::int64_t> contiguous;
    for (std::int64_t e = 0; e < cfg.moe.experts; ++e) contiguous.push_back(e / (cfg.moe.experts / ep));
    std::vector<std::vector<std::int64_t>> all;
    std::vector<std::int64_t> cur;
    balanced(cfg.moe.experts, ep, cur, all);
    auto best = contiguous;
    for (const auto& p : all)
      if (moves(e0, e1, contiguous, p) < moves(e0, e1, contiguous, best)) best = p;
    EpModel placed(ep, {contiguous, best});
    const auto b = placed.run(EpForm::Coherent, ids);
    const auto c = placed.run(EpForm::DispatchCombine, ids);
    EXPECT_TRUE(torch::equal(a.r.logits, b.r.logits)) << what << ": the placement changed the logits";
    EXPECT_TRUE(torch::equal(b.r.logits, c.r.logits)) << what << ": the forms differ under the placement";
    const std::int64_t before = sum_over_ranks(a.r.layers[1].cross_rank), after = sum_over_ranks(b.r.layers[1].cross_rank);
    EXPECT_EQ(before, moves(e0, e1, contiguous, contiguous)) << what;
    EXPECT_EQ(after, moves(e0, e1, contiguous, best)) << what;
    EXPECT_LE(after, before) << what;
    if (world_rank() == 0)
      std::printf("[ ep place ] %-16s second MoE layer: %lld of %lld tokens change rank contiguous, %lld placed\n",
                  what.c_str(), static_cast<long long>(before), static_cast<long long>(e0.size(0)),
                  static_cast<long long>(after));
  }
}

TEST(EpInference, CoherentFormRefusesTopTwo) {
  if (world_size() == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  auto cfg = config();
  cfg.moe.top_k = 2;
  sb::Mesh mesh;
  mesh.dp_shard = world_size(), mesh.ep = 2;
  Communicator comm(MPI_COMM_WORLD, mesh);
  auto model = sb::models::make_model(cfg);
  model->set_expert_parallel(sb::parallel::expert_parallel(comm));
  sb::models::PersistentParams params(sb::models::init_params(model->units(), 1234), false);
  try {
    dynamic_cast<sb::models::Gpt2&>(*model).ep_inference(params, my_batch(cfg).input_ids, EpForm::Coherent);
    ADD_FAILURE() << "top-2 ran";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("so it routes top-1; moe.top_k = 2 runs moe.ep_form = dispatch_combine"),
              std::string::npos) << e.what();
  }
}

}  // namespace
