// Expert parallelism (models/moe.h ExpertParallel; mesh.ep) under the FSDP engine equals the
// one-process MoE with the same routing groups: gpt2-moe-tiny (4 experts in blocks 1 and 3,
// top-1 and top-2, capacity factor 1.25 so tokens are dropped), 6 steps of B 8 x T 16, each
// rank's micro-batch its own routing group, against one process stepping the same micro-
// batches in turn (gradient accumulation: each its own group). At ep 2 (2 and 4 ranks) and
// ep 4 (4 ranks) under full_shard, shard_grad_op, zero1 and no_shard, and at ep 2 under
// hybrid_shard with 2 replicas of 2-rank (4 ranks) and 4-rank (8 ranks) shard groups: losses and gradient
// norms within 1e-5 relative, final parameters (each rank's experts against their block of
// the reference's) within 2e-5, the same dropped tokens per group and layer. Per MoE layer and
// step the ep group runs one dispatch and one combine all-to-all forward and two backward;
// the engine's model state equals the memory model's with the experts sharded over the
// expert-data-parallel group. Under Ulysses (mesh.sp 2 and 4, with ep 1, 2 and 4) each rank's
// slice of its rows is its routing group, and the run equals one process routing each
// forward's tokens in the same column slices. Settings that cannot run are refused naming
// the key.
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/data/batches.h"
#include "workloads/parallel/ep_layers.h"
#include "workloads/parallel/sp_layers.h"

#include <mutex>

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

constexpr int kSteps = 6;
constexpr std::int64_t kB = 8, kT = 16;

struct Case {
  int ep = 2;
  std::string strategy = "full_shard";
  int top_k = 1;
  int replicate = 1;  // mesh.dp_replicate (hybrid sharding): shard groups of n / replicate ranks
};

std::string describe(const Case& c, int n) {
  return fmt::format("{} ranks, ep {}, {}, top-{}{}", n, c.ep, c.strategy, c.top_k,
                     c.replicate > 1 ? fmt::format(", dp_replicate {}", c.replicate) : "");
}

sb::models::ModelConfig moe_config(int top_k) {
  auto cfg = sb::models::preset_config("gpt2-moe-tiny");
  cfg.moe.top_k = top_k;
  cfg.moe.capacity_factor = 1.25;
  return cfg;
}

// The step's global batch (global_batch draws GPT-2's next-token targets by family name).
sb::models::Batch batch_of(const sb::models::ModelConfig& cfg, int step) {
  auto c = cfg;
  c.family = "gpt2";
  return global_batch(c, kB, kT, step);
}

std::int64_t dropped(const sb::models::Model& m) {
  std::int64_t n = 0;
  for (const auto& r : *m.moe_routing()) n += r.dropped_tokens;
  return n;
}

struct EpRun {
  RunResult r;
  std::vector<std::int64_t> dropped;  // per step, then per group (rank or micro-batch)
  std::size_t dispatch = 0, combine = 0, grad = 0;
  std::uint64_t bytes = 0;
  sb::fsdp::MemoryStats memory;
  std::vector<sb::models::UnitSpec> units;
};

// AdamW with eps 1e-6: the default 1e-8 turns the 1e-8 rounding differences of the experts'
// batched GEMMs (against the reference's loop) into whole lr-sized steps on elements whose
// gradient is ~0; GradientsEqualTheReference holds the gradients themselves to 2e-5.
sb::fsdp::EngineConfig ep_engine_config(const std::string& strategy) {
  auto c = engine_config(strategy, kSteps);
  c.adamw.eps = 1e-6;
  return c;
}

// One process, every rank's micro-batch in turn: the routing groups of an n-rank run.
EpRun reference(int top_k, int n) {
  Communicator self(MPI_COMM_SELF, 1);
  auto model = sb::models::make_model(moe_config(top_k));
  sb::fsdp::Engine e(*model, self, ep_engine_config("no_shard"),
                     sb::models::init_params(model->units(), 1234));
  EpRun out;
  e.set_loss([&](sb::models::ParamProvider& p, const sb::models::Batch& b) {
    auto l = model->loss(p, b);
    out.dropped.push_back(dropped(*model));
    return l;
  });
  for (int s = 0; s < kSteps; ++s) {
    const auto g = batch_of(model->config(), s);
    std::vector<sb::models::Batch> micro;
    for (int r = 0; r < n; ++r) micro.push_back(slice(g, r, n));
    const auto st = e.step(micro, sb::fsdp::loss_terms(g));
    out.r.losses.push_back(st.loss);
    out.r.norms.push_back(st.grad_norm);
  }
  out.r.params = e.full_params();
  return out;
}

EpRun run(const Case& c) {
  sb::Mesh mesh;
  mesh.dp_replicate = c.replicate, mesh.dp_shard = world_size() / c.replicate, mesh.ep = c.ep;
  Communicator comm(MPI_COMM_WORLD, mesh);
  EpRun out;
  std::mutex mu;
  comm.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (e.kind == "ep_dispatch") ++out.dispatch, out.bytes += e.logical_bytes;
    if (e.kind == "ep_combine") ++out.combine, out.bytes += e.logical_bytes;
    if (e.kind == "ep_grad") ++out.grad, out.bytes += e.logical_bytes;
  }, MPI_Wtime());
  auto model = sb::models::make_model(moe_config(c.top_k));
  model->set_expert_parallel(sb::parallel::expert_parallel(comm));
  sb::fsdp::Engine engine(*model, comm, ep_engine_config(c.strategy),
                          sb::models::init_params(model->units(), 1234));
  for (int s = 0; s < kSteps; ++s) {
    const auto g = batch_of(model->config(), s);
    const auto st = engine.step({slice(g, comm.rank(), comm.size())}, sb::fsdp::loss_terms(g));
    out.r.losses.push_back(st.loss);
    out.r.norms.push_back(st.grad_norm);
    std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
    const std::int64_t mine = dropped(*model);
    MPI_Allgather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
    out.dropped.insert(out.dropped.end(), all.begin(), all.end());
  }
  out.r.params = engine.full_params();
  out.memory = engine.memory();
  out.units = model->units();
  return out;
}

std::vector<Case> cases(int n) {
  std::vector<Case> out;
  for (const char* s : {"full_shard", "shard_grad_op", "zero1", "no_shard"}) out.push_back({2, s, 1});
  out.push_back({2, "full_shard", 2});
  if (n == 4) {
    for (const char* s : {"full_shard", "no_shard"}) out.push_back({4, s, 1});
    out.push_back({4, "zero1", 2});
    // Hybrid sharding: 2 replicas of a 2-rank shard group, each split ep 2 (an expert's
    // gradient summed over its replica's rank of the same ep index).
    out.push_back({2, "hybrid_shard", 1, 2});
    out.push_back({2, "hybrid_shard", 2, 2});
  }
  // 8 ranks (mpi_moe_ep.np8): 2 replicas of 4-rank shard groups at ep 2, so an experts unit is
  // sharded over its 2-rank expert-data-parallel group and reduced over the replica group.
  if (n == 8) out = {{2, "hybrid_shard", 1, 2}, {2, "hybrid_shard", 2, 2}};
  return out;
}

// Losses and gradient norms within 1e-5 relative, the same dropped tokens, the final parameters
// (each rank's experts against their block of the reference's) within 2e-5; returns their
// largest difference, and the reference's dropped tokens in *drops.
double expect_matches(const EpRun& got, const EpRun& ref, int top_k, const std::string& what, std::int64_t* drops) {
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(got.r.losses[s], ref.r.losses[s], 1e-5 * std::abs(ref.r.losses[s])) << what << " step " << s;
    EXPECT_NEAR(got.r.norms[s], ref.r.norms[s], 1e-5 * ref.r.norms[s]) << what << " step " << s;
  }
  EXPECT_EQ(got.dropped, ref.dropped) << what << ": dropped tokens per step (and group)";
  *drops = 0;
  for (auto n : ref.dropped) *drops += n;
  if (top_k == 1) EXPECT_GT(*drops, 0) << what << ": capacity 1.25 dropped nothing; the test lost its point";
  double d = 0;
  for (std::size_t u = 0; u < got.units.size(); ++u)
    for (std::size_t i = 0; i < got.units[u].params.size(); ++i) {
      const auto want = sb::models::ep_slice(got.units[u].params[i], ref.r.params[u][i]);
      EXPECT_EQ(got.r.params[u][i].sizes(), want.sizes()) << got.units[u].params[i].name;
      if (got.r.params[u][i].sizes() == want.sizes())
        d = std::max(d, (got.r.params[u][i] - want).abs().max().item<double>());
    }
  EXPECT_LT(d, 2e-5) << what << ": final parameters differ by " << d;
  return d;
}

TEST(ExpertParallel, MatchesOneProcessWithTheSameRoutingGroups) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  std::map<int, EpRun> refs;
  const auto cfg = moe_config(1);
  const std::size_t moe_layers = static_cast<std::size_t>(cfg.moe.layers(cfg.n_layer));
  for (const Case& c : cases(n)) {
    const std::string what = describe(c, n);
    if (!refs.count(c.top_k)) refs[c.top_k] = reference(c.top_k, n);
    const EpRun& ref = refs[c.top_k];
    const EpRun got = run(c);
    std::int64_t drops = 0;
    const double d = expect_matches(got, ref, c.top_k, what, &drops);
    for (const auto& unit : got.units)
      for (const auto& spec : unit.params) EXPECT_EQ(spec.ep_size, unit.expert ? c.ep : 1) << spec.name;
    // Traffic: per MoE layer and step, dispatch and combine forward, each one's gradient back.
    EXPECT_EQ(got.dispatch, moe_layers * kSteps) << what;
    EXPECT_EQ(got.combine, moe_layers * kSteps) << what;
    EXPECT_EQ(got.grad, 2 * moe_layers * kSteps) << what;
    EXPECT_GT(got.bytes, 0u) << what;
    // The memory model: experts' units sharded over n / ep ranks, the rest over n.
    sb::fsdp::MemoryInputs in;
    in.units = got.units;
    in.model = cfg;
    in.strategy = c.strategy;
    in.world = n;
    in.ep = c.ep;
    in.shard_group = n / c.replicate;
    const auto pm = sb::fsdp::predict_memory(in);
    EXPECT_EQ(got.memory.param, pm.param) << what;
    EXPECT_EQ(got.memory.optim, pm.optim) << what;
    EXPECT_EQ(got.memory.model_state, pm.model_state) << what;
    if (world_rank() == 0)
      std::printf("[ ep ] %-34s loss %.6f -> %.6f (ref %.6f), max |dp| %.2e, %lld dropped\n", what.c_str(),
                  got.r.losses.front(), got.r.losses.back(), ref.r.losses.back(), d,
                  static_cast<long long>(drops));
  }
}

// Ulysses (mesh.sp): each rank routes its slice of every row of its rows as its own group, with
// and without expert parallelism over dp_shard x sp; the reference is one process stepping the
// data-parallel ranks' micro-batches in turn, each forward's tokens routed in sp column slices
// (MoeConfig::sequence_groups). Losses and gradient norms within 1e-5 relative, the final
// parameters within 2e-5, the same tokens dropped per step.
struct SpCase {
  int sp = 2, dp = 1, ep = 1;
  std::string strategy = "full_shard";
  int top_k = 1;
};

EpRun sp_reference(const SpCase& c) {
  Communicator self(MPI_COMM_SELF, 1);
  auto cfg = moe_config(c.top_k);
  cfg.moe.sequence_groups = c.sp;
  auto model = sb::models::make_model(cfg);
  sb::fsdp::Engine e(*model, self, ep_engine_config("no_shard"), sb::models::init_params(model->units(), 1234));
  EpRun out;
  std::int64_t drops = 0;
  e.set_loss([&](sb::models::ParamProvider& p, const sb::models::Batch& b) {
    auto l = model->loss(p, b);
    drops += dropped(*model);
    return l;
  });
  for (int s = 0; s < kSteps; ++s) {
    const auto g = batch_of(model->config(), s);
    std::vector<sb::models::Batch> micro;
    for (int r = 0; r < c.dp; ++r) micro.push_back(slice(g, r, c.dp));
    drops = 0;
    const auto st = e.step(micro, sb::fsdp::loss_terms(g));
    out.r.losses.push_back(st.loss);
    out.r.norms.push_back(st.grad_norm);
    out.dropped.push_back(drops);
  }
  out.r.params = e.full_params();
  return out;
}

EpRun sp_run(const SpCase& c) {
  sb::Mesh mesh;
  mesh.sp = c.sp, mesh.dp_shard = c.dp, mesh.ep = c.ep;
  Communicator comm(MPI_COMM_WORLD, mesh);
  auto model = sb::models::make_model(moe_config(c.top_k));
  model->set_sequence_parallel(sb::parallel::sequence_parallel(comm));
  if (c.ep > 1) model->set_expert_parallel(sb::parallel::expert_parallel(comm));
  sb::fsdp::Engine engine(*model, comm, ep_engine_config(c.strategy), sb::models::init_params(model->units(), 1234));
  EpRun out;
  for (int s = 0; s < kSteps; ++s) {
    const auto g = batch_of(model->config(), s);
    const auto mine = sb::data::sequence_slice(slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size()),
                                               comm.rank(Group::Sp), comm.size(Group::Sp));
    const auto st = engine.step({mine}, sb::fsdp::loss_terms(g));
    out.r.losses.push_back(st.loss);
    out.r.norms.push_back(st.grad_norm);
    std::int64_t d = dropped(*model);
    MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    out.dropped.push_back(d);
  }
  out.r.params = engine.full_params();
  out.units = model->units();
  return out;
}

TEST(ExpertParallel, UlyssesRoutesEachRanksSliceAsOneProcessDoes) {
  const int n = world_size();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 heads and 4 experts split over 2 or 4 ranks";
  std::vector<SpCase> cases = {{2, 1, 1}, {2, 1, 2}, {2, 1, 2, "zero1", 2}};
  if (n == 4) cases = {{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {4, 1, 4, "shard_grad_op"}, {2, 2, 2, "no_shard", 2}};
  for (const SpCase& c : cases) {
    const std::string what = fmt::format("sp {} x dp_shard {}, ep {}, {}, top-{}", c.sp, c.dp, c.ep, c.strategy, c.top_k);
    const EpRun ref = sp_reference(c);
    const EpRun got = sp_run(c);
    std::int64_t drops = 0;
    const double d = expect_matches(got, ref, c.top_k, what, &drops);
    if (world_rank() == 0)
      std::printf("[ ep sp ] %-40s loss %.6f -> %.6f (ref %.6f), max |dp| %.2e, %lld dropped\n", what.c_str(),
                  got.r.losses.front(), got.r.losses.back(), ref.r.losses.back(), d, static_cast<long long>(drops));
  }
}

// The forward and backward alone (no engine, no optimizer): each rank's loss on its micro-batch
// through the expert-parallel model, weighted to the global mean, and its gradients summed over
// the ranks that hold the same parameters (all for the dense ones, the expert-data-parallel
// group for the experts) equal the one-process model's on the same routing groups.
TEST(ExpertParallel, GradientsEqualTheReference) {
  const int n = world_size(), rank = world_rank();
  if (n == 3) GTEST_SKIP() << "gpt2-moe-tiny's 4 experts split over 2 or 4 ranks";
  for (const int ep : n == 4 ? std::vector<int>{2, 4} : std::vector<int>{2})
    for (const int top_k : {1, 2}) {
      const std::string what = fmt::format("{} ranks, ep {}, top-{}", n, ep, top_k);
      const auto cfg = moe_config(top_k);
      const auto g = batch_of(cfg, 0);
      const double total = static_cast<double>(sb::fsdp::loss_terms(g));
      // The reference: every rank's micro-batch in turn, each its own routing group.
      auto whole = sb::models::make_model(cfg);
      sb::models::PersistentParams ref(sb::models::init_params(whole->units(), 1234));
      double ref_loss = 0;
      std::vector<std::int64_t> ref_dropped;
      for (int r = 0; r < n; ++r) {
        const auto b = slice(g, r, n);
        const auto l = whole->loss(ref, b) * (static_cast<double>(sb::fsdp::loss_terms(b)) / total);
        l.backward();
        ref_loss += l.item<double>();
        ref_dropped.push_back(dropped(*whole));
      }
      sb::Mesh mesh;
      mesh.dp_shard = n, mesh.ep = ep;
      Communicator comm(MPI_COMM_WORLD, mesh);
      auto model = sb::models::make_model(cfg);
      model->set_expert_parallel(sb::parallel::expert_parallel(comm));
      sb::models::PersistentParams mine(sb::models::init_params(model->units(), 1234));
      const auto b = slice(g, rank, n);
      const auto l = model->loss(mine, b) * (static_cast<double>(sb::fsdp::loss_terms(b)) / total);
      l.backward();
      double loss = l.item<double>();
      MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss)) << what;
      std::vector<std::int64_t> got_dropped(static_cast<std::size_t>(n));
      const std::int64_t d = dropped(*model);
      MPI_Allgather(&d, 1, MPI_INT64_T, got_dropped.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
      EXPECT_EQ(got_dropped, ref_dropped) << what << ": dropped tokens per group";
      MPI_Comm edp;  // the ranks holding the same experts (Mesh::expert_group)
      MPI_Comm_split(MPI_COMM_WORLD, rank % ep, rank, &edp);
      const auto units = model->units();
      double worst = 0;
      for (std::size_t u = 0; u < units.size(); ++u)
        for (std::size_t i = 0; i < units[u].params.size(); ++i) {
          auto gr = mine.tensors()[u][i].grad().contiguous().clone();
          MPI_Allreduce(MPI_IN_PLACE, gr.data_ptr<float>(), static_cast<int>(gr.numel()), MPI_FLOAT, MPI_SUM,
                        units[u].expert ? edp : MPI_COMM_WORLD);
          const auto want = sb::models::ep_slice(units[u].params[i], ref.tensors()[u][i].grad());
          worst = std::max(worst, (gr - want).abs().max().item<double>());
        }
      MPI_Comm_free(&edp);
      EXPECT_LT(worst, 2e-5) << what << ": gradients differ by " << worst;
      if (rank == 0) std::printf("[ ep grads ] %-24s loss %.6f (ref %.6f), max |dg| %.2e\n", what.c_str(), loss, ref_loss, worst);
    }
}

// An ep that cannot run is refused before anything is built, naming the fix.
TEST(ExpertParallel, RefusesWhatCannotSplit) {
  auto dense = sb::models::make_model("gpt2-tiny");
  EXPECT_NE(dense->expert_parallel_problem(2).find("the model is dense"), std::string::npos)
      << dense->expert_parallel_problem(2);
  auto moe = sb::models::make_model("gpt2-moe-tiny");
  EXPECT_NE(moe->expert_parallel_problem(3).find("must divide the model's 4 experts"), std::string::npos)
      << moe->expert_parallel_problem(3);
  EXPECT_EQ(moe->expert_parallel_problem(4), "");
}

}  // namespace
