// GPT-2 and BERT cut into pipeline stages (models/pipeline.h) under the FSDP engine equal the
// one-process trainer: 4 steps of gpt2-tiny-8l and bert-tiny-8l (8 layers, 8 heads; MLM) in
// fp32 with the same global batch, losses and gradient norms within 1e-5 relative and every
// rank's stage parameters within 2e-5 of the reference's (1e-4 with tp: its own numerics). Meshes: at 2 ranks pp 2; at 3 pp 3;
// at 4 pp 4, pp 2 x dp 2 (every sharding strategy; hybrid_shard over dp_replicate), pp 2 x tp 2;
// at 8 (mpi_pp_models.np8) every factorization with pp > 1: (pp, tp, dp) = (2,1,4), (2,2,2),
// (2,4,1), (4,1,2), (4,2,1), (8,1,1). Schedules gpipe, 1f1b
// and interleaved_1f1b (2 virtual stages). The tied embedding (GPT-2's LM head, BERT's MLM
// decoder) stays bit-equal between the first stage and the last stage's copy. Per step the
// trace holds one activation and one gradient message per micro-batch and stage boundary of
// exactly one micro-batch's activation bytes, and one tied-gradient exchange of the embedding
// unit's padded fp32 bytes each way; with tp, each stage's tensor-parallel collectives and
// their bytes equal the per-stage formulas (check_tp_traffic). Held-out loss through the
// pipeline equals the reference's;
// the memory model on the rank's stage units gives the engine's state bytes exactly.
#include <ATen/ATen.h>

#include <map>
#include <mutex>

#include <fmt/ranges.h>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/compressor.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/family.h"
#include "workloads/models/pipeline.h"
#include "workloads/parallel/tp_layers.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

constexpr int kSteps = 4;
constexpr std::int64_t kB = 8, kT = 16;

const RunResult& reference(const std::string& preset) { return cached_reference(preset, kSteps, kB, kT); }

struct Case {
  int pp = 2, tp = 1, dp = 1;
  std::string strategy = "no_shard", schedule = "1f1b";
  int v = 1, micro = 4;
  std::vector<std::int64_t> stage_layers = {};  // the pp_layers key's cut; empty: balanced
};

std::string describe(const std::string& preset, const Case& c) {
  return fmt::format("{} pp {} tp {} dp {} {} {} v {} m {}{}", preset, c.pp, c.tp, c.dp, c.strategy,
                     c.schedule, c.v, c.micro,
                     c.stage_layers.empty() ? "" : fmt::format(" layers {}", fmt::join(c.stage_layers, ",")));
}

// Tensor-parallel traffic of this rank's stages under a pipeline (tp x pp; docs/METRICS.md
// "Tensor-parallel volume" per stage): per micro-batch, forward 2 all-reduces per layer of the
// stage, the vocabulary-parallel embedding's on the first stage and the cross-entropy's two
// (row maxima, R floats; sums and target logits, 2R) on the last; backward 2 per layer and the
// head input's on the last. Training runs `micro` micro-batches of R rows a step, evaluation
// one forward of eval_rows. Bytes (GPT-2): an all-reduce of n bytes is logged as 2 (p-1) n / p.
void check_tp_traffic(const sb::models::Model& model, const Case& c,
                      std::map<std::string, std::vector<std::uint64_t>>& events, std::int64_t R,
                      std::int64_t eval_rows, const std::string& what) {
  const auto& cut = model.pipeline();
  const auto ar = [&](std::int64_t n) { return static_cast<std::uint64_t>(2 * (c.tp - 1) * n / c.tp); };
  const std::int64_t d = model.config().d_model;
  std::size_t act = 0, grad = 0;
  std::uint64_t act_bytes = 0, grad_bytes = 0;
  for (int chunk = 0; chunk < c.v; ++chunk) {
    const auto L = cut.layers(cut.stage(chunk));
    const int first = cut.first(chunk), last = cut.last(chunk);
    const auto fwd = static_cast<std::size_t>(2 * L + first + 2 * last);
    const auto bwd = static_cast<std::size_t>(2 * L + last);
    act += fwd * (c.micro * kSteps + 1);
    grad += bwd * c.micro * kSteps;
    for (const auto [rows, times] : {std::pair<std::int64_t, int>{R, c.micro * kSteps}, {eval_rows, 1}})
      act_bytes += times * ((2 * L + first) * ar(rows * d * 4) + last * (ar(rows * 4) + ar(rows * 8)));
    grad_bytes += static_cast<std::uint64_t>(c.micro * kSteps) * (2 * L + last) * ar(R * d * 4);
  }
  EXPECT_EQ(events["tp_act"].size(), act) << what << ": tp_act collectives";
  EXPECT_EQ(events["tp_grad"].size(), grad) << what << ": tp_grad collectives";
  if (sb::models::family(model.config().family).objective != sb::models::Objective::CausalLm) return;
  std::uint64_t got_act = 0, got_grad = 0;
  for (auto b : events["tp_act"]) got_act += b;
  for (auto b : events["tp_grad"]) got_grad += b;
  EXPECT_EQ(got_act, act_bytes) << what << ": tp_act bytes";
  EXPECT_EQ(got_grad, grad_bytes) << what << ": tp_grad bytes";
}

void check(const std::string& preset, const Case& c) {
  sb::Mesh mesh;
  mesh.pp = c.pp, mesh.tp = c.tp, mesh.dp_shard = c.dp;
  if (replicates(c.strategy)) mesh.dp_replicate = c.dp, mesh.dp_shard = 1;  // emulated nodes of 1
  Communicator comm(MPI_COMM_WORLD, mesh);
  std::mutex mu;
  std::map<std::string, std::vector<std::uint64_t>> sends;  // kind -> logical bytes of each send
  comm.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (e.op == "send" || e.kind == "tp_act" || e.kind == "tp_grad")
      sends[e.kind].push_back(e.logical_bytes);
  }, MPI_Wtime());
  auto model = sb::models::make_model(preset);
  if (c.tp > 1) model->set_tensor_parallel(sb::parallel::tensor_parallel(comm, false));
  model->set_pipeline(c.pp, c.v, comm.rank(Group::Pp), c.stage_layers);
  auto cfg = engine_config(c.strategy, kSteps);
  cfg.pp_schedule = c.schedule;
  sb::fsdp::Engine engine(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
  const auto& ref = reference(preset);
  const std::string what = describe(preset, c);
  const int dp_rank = mesh.dp_rank(comm.rank()), dp = mesh.dp_size();
  double last_loss = 0;
  for (int s = 0; s < kSteps; ++s) {
    auto mine = slice(global_batch(model->config(), kB, kT, s), dp_rank, dp);
    std::vector<sb::models::Batch> micro;
    for (int m = 0; m < c.micro; ++m) micro.push_back(slice(mine, m, c.micro));
    auto st = engine.step(micro, sb::fsdp::loss_terms(global_batch(model->config(), kB, kT, s)));
    last_loss = st.loss;
    EXPECT_NEAR(st.loss, ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << what << " step " << s;
    EXPECT_NEAR(st.grad_norm, ref.norms[s], 1e-5 * ref.norms[s]) << what << " step " << s;
  }
  // Each rank's units: the reference's units of the whole model, split over tp as specs say.
  // Under tp, gpt2-tiny-8l's h.3.mlp.c_proj.weight ends 6.9e-5 from the reference with or
  // without the pipeline (measured at pp 1, tp 2): the row-parallel partial sums' order, which
  // Adam amplifies on near-zero gradients. Without tp the same parameter ends 2.2e-5 from it
  // at pp 2 with 4 micro-batches since the LM-head loss's softmax became exp(x - max) / sum
  // (3-5x closer to float64's than exp(x - logsumexp), docs/PERFORMANCE.md): 3e-5.
  const double tol = c.tp > 1 ? 1e-4 : 3e-5;
  const auto got = engine.full_params();
  const auto& units = model->units();
  double d = 0;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      const auto want = sb::models::tp_slice(units[u].params[i], ref.params[units[u].whole_index >= 0 ? units[u].whole_index : u][i]);
      ASSERT_EQ(got[u][i].sizes(), want.sizes()) << what << " " << units[u].params[i].name;
      const double di = (got[u][i] - want).abs().max().item<double>();
      if (di >= tol) ADD_FAILURE() << what << ": " << units[u].params[i].name << " differs by " << di;
      d = std::max(d, di);
    }
  EXPECT_LT(d, tol) << what << ": final parameters differ by " << d;
  // The tied embedding: the first stage's unit and the last stage's copy, bit for bit.
  const int r = comm.rank(Group::Pp), last = c.pp - 1;
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (r == 0 && units[u].whole_index == 0) {
      for (auto& t : got[u]) {
        auto theirs = torch::empty_like(t);
        comm.recv(theirs, last, Group::Pp, "other", 7);
        EXPECT_TRUE(torch::equal(t, theirs)) << what << ": tied copies differ";
      }
    }
    if (r == last && units[u].pp_copy)
      for (auto& t : got[u]) comm.send(t.contiguous(), 0, Group::Pp, "other", 7);
  }
  // Held-out loss through the pipeline (one batch: the step-0 batch with the final weights).
  const auto g = global_batch(model->config(), kB, kT, 100);
  const double eval = engine.forward_loss(slice(g, dp_rank, dp)).item<double>();
  auto ref_model = sb::models::make_model(preset);
  sb::models::PersistentParams ref_params(ref.params, false);
  const double want_eval = ref_model->loss(ref_params, slice(g, dp_rank, dp)).item<double>();
  EXPECT_NEAR(eval, want_eval, 1e-5 * std::abs(want_eval)) << what << " eval";
  // The memory model on this rank's stage units: the engine's state bytes, the whole fp32
  // gradient per unit of a pipeline step included.
  sb::fsdp::MemoryInputs in;
  in.units = units;
  in.model = model->config();
  in.strategy = c.strategy;
  in.world = dp;
  in.tp = c.tp;
  in.pp = c.pp;
  in.shard_group = mesh.dp_shard;
  const auto mem = engine.memory();
  const auto pm = sb::fsdp::predict_memory(in);
  EXPECT_EQ(mem.param, pm.param) << what;
  EXPECT_EQ(mem.grad, pm.grad) << what;
  EXPECT_EQ(mem.optim, pm.optim) << what;
  EXPECT_EQ(mem.model_state, pm.model_state) << what;
  // The trace: activations and their gradients, one message per micro-batch and boundary.
  const std::int64_t d_model = model->config().d_model, rows = kB / dp / c.micro * kT;
  const std::uint64_t act_bytes = static_cast<std::uint64_t>(rows * d_model * 4);
  const int stages = c.pp * c.v;
  // Sends of this rank per step: forward from every stage but the last, backward from every
  // stage but the first.
  int fwd = 0, bwd = 0;
  for (int chunk = 0; chunk < c.v; ++chunk) {
    const int s = chunk * c.pp + r;
    fwd += s != stages - 1, bwd += s != 0;
  }
  std::lock_guard<std::mutex> lk(mu);
  // The evaluation's one forward message per boundary also counts under pp_act.
  EXPECT_EQ(sends["pp_act"].size(), static_cast<std::size_t>(fwd * (c.micro * kSteps + 1))) << what;
  EXPECT_EQ(sends["pp_grad"].size(), static_cast<std::size_t>(bwd * c.micro * kSteps)) << what;
  for (auto b : sends["pp_grad"]) EXPECT_EQ(b, act_bytes) << what;
  std::uint64_t tied = 0;
  for (std::size_t u = 0; u < units.size(); ++u)
    if ((r == 0 && units[u].whole_index == 0) || units[u].pp_copy) {
      std::int64_t n = 0;
      for (const auto& p : units[u].params) n += p.numel();
      const std::int64_t shards = sb::fsdp::strategy_info(c.strategy).layout.sharded() ? mesh.dp_shard : 1;
      tied = static_cast<std::uint64_t>((n + shards - 1) / shards * shards * 4);  // padded fp32
    }
  EXPECT_EQ(sends["pp_tied"].size(), tied ? static_cast<std::size_t>(kSteps) : 0u) << what;
  for (auto b : sends["pp_tied"]) EXPECT_EQ(b, tied) << what;
  if (c.tp > 1) check_tp_traffic(*model, c, sends, rows, kB / dp * kT, what);
  if (world_rank() == 0)
    std::printf("[ pp ] %-60s loss %.6f (ref %.6f) eval %.6f, max |dp| %.2e\n", what.c_str(),
                last_loss, ref.losses.back(), eval, d);
}

const char* kPresets[] = {"gpt2-tiny-8l", "bert-tiny-8l"};

}  // namespace

TEST(PpModels, EverySchedule) {
  const int n = world_size();
  for (const char* preset : kPresets)
    for (const char* schedule : {"gpipe", "1f1b"}) check(preset, {n, 1, 1, "no_shard", schedule, 1, 4});
  if (n == 2 || n == 4)
    for (const char* preset : kPresets) check(preset, {n, 1, 1, "no_shard", "interleaved_1f1b", 2, 4});
  // A cut given by hand (pp_layers): the first stage light, the last heavy.
  if (n == 2)
    for (const char* preset : kPresets) check(preset, {2, 1, 1, "no_shard", "1f1b", 1, 4, {1, 7}});
}

TEST(PpModels, WithDataAndTensorParallel) {
  if (world_size() != 4) GTEST_SKIP() << "pp 2 x dp 2 and pp 2 x tp 2 need 4 ranks";
  for (const char* preset : kPresets) {
    for (const auto& name : sb::fsdp::strategy_names()) check(preset, {2, 1, 2, name, "1f1b", 1, 2});
    check(preset, {2, 2, 1, "no_shard", "1f1b", 1, 2});

  }
}

// Every factorization dp x tp x pp of 8 ranks with a pipeline (oversubscribed: correctness
// only), each with another sharding strategy, both models.
TEST(PpModels, EveryFactorizationOfEight) {
  if (world_size() != 8) GTEST_SKIP() << "8 ranks (ctest mpi_pp_models.np8)";
  const auto strategies = sb::fsdp::strategy_names();
  std::size_t i = 0;
  for (const char* preset : kPresets)
    for (const auto& [pp, tp] : std::vector<std::pair<int, int>>{{2, 1}, {2, 2}, {2, 4}, {4, 1}, {4, 2}, {8, 1}}) {
      const int dp = 8 / (pp * tp);
      std::string strategy = strategies[i++ % strategies.size()];
      if (replicates(strategy) && dp == 1) strategy = "full_shard";
      check(preset, {pp, tp, dp, strategy, pp == 8 ? "gpipe" : "1f1b", 1, 8 / dp});
    }
}

// Compression per dimension on the pipeline's traffic (comm::Policy::pp_act / pp_grad): bf16
// halves every activation and gradient message exactly against its fp32 logical bytes, int8
// sends its blocks' wire; the losses stay near the reference's.
TEST(PpModels, CompressedPipelineTraffic) {
  const int n = world_size();
  for (const char* codec : {"bf16", "int8"}) {
    sb::Mesh mesh;
    mesh.pp = n;
    Communicator comm(MPI_COMM_WORLD, mesh);
    std::mutex mu;
    std::size_t exact = 0, wrong = 0;
    sb::comm::Policy policy;
    policy.pp_act.name = policy.pp_grad.name = codec;
    auto wire = sb::comm::make_compressor(policy.pp_act);
    comm.set_trace_hook([&](const sb::CommEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      if (e.op != "send" || (e.kind != "pp_act" && e.kind != "pp_grad")) return;
      (e.wire_bytes == static_cast<std::uint64_t>(wire->wire_bytes(static_cast<std::int64_t>(e.logical_bytes / 4))) &&
               e.wire_bytes < e.logical_bytes ? exact : wrong) += 1;
    }, MPI_Wtime());
    auto model = sb::models::make_model("gpt2-tiny-8l");
    model->set_pipeline(n, 1, comm.rank(Group::Pp));
    auto cfg = engine_config("no_shard", kSteps);
    cfg.compression = policy;
    sb::fsdp::Engine engine(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
    const auto& ref = reference("gpt2-tiny-8l");
    const double tol = std::string(codec) == "bf16" ? 2e-3 : 2e-2;
    for (int s = 0; s < kSteps; ++s) {
      auto g = global_batch(model->config(), kB, kT, s);
      std::vector<sb::models::Batch> micro;
      for (int m = 0; m < 2; ++m) micro.push_back(slice(g, m, 2));
      auto st = engine.step(micro, sb::fsdp::loss_terms(g));
      EXPECT_NEAR(st.loss, ref.losses[s], tol * std::abs(ref.losses[s])) << codec << " step " << s;
    }
    std::lock_guard<std::mutex> lk(mu);
    const int r = comm.rank(Group::Pp);
    const std::size_t sends = static_cast<std::size_t>((r != n - 1) + (r != 0)) * 2 * kSteps;
    EXPECT_EQ(exact, sends) << codec;
    EXPECT_EQ(wrong, 0u) << codec;
  }
}

TEST(PpModels, CutsByFlops) {
  // gpt2: 12 equal blocks and an LM head of about 5.4 blocks: 9 and 3 + head (9 vs 8.4 blocks).
  auto m = sb::models::make_model("gpt2");
  m->set_pipeline(2, 1, 0);
  EXPECT_EQ(m->pipeline().first_layer, (std::vector<std::int64_t>{0, 9, 12}));
  EXPECT_EQ(sb::models::balance_stages({1, 1, 1, 1}, 0, 0, 2), (std::vector<std::int64_t>{0, 2, 4}));
  EXPECT_EQ(sb::models::balance_stages({1, 1, 1, 1}, 0, 2, 2), (std::vector<std::int64_t>{0, 3, 4}));
  EXPECT_EQ(sb::models::balance_stages({1, 1, 1, 1}, 0, 0, 4), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(sb::models::pipeline_problem(2, 3).find("every stage needs at least one layer"), std::string::npos);
  // pp_layers: the cut as given, or why not.
  auto hand = sb::models::make_model("gpt2");
  hand->set_pipeline(2, 1, 1, sb::models::parse_stage_layers("5,7"));
  EXPECT_EQ(hand->pipeline().first_layer, (std::vector<std::int64_t>{0, 5, 12}));
  EXPECT_EQ(sb::models::describe_stages(hand->pipeline()),
            "stage 0 (pp rank 0): embed + layers 0-4 | stage 1 (pp rank 1): layers 5-11 + head");
  EXPECT_EQ(sb::models::stage_layers_problem({6, 5}, 12, 2),
            "pp_layers gives 2 stages holding 11 layers, and the model's 12 layers are cut into 2 "
            "stages (mesh.pp x pp_virtual_stages): give 2 counts of at least 1 that add up to 12");
  EXPECT_NE(sb::models::stage_layers_problem({12, 0}, 12, 2), "");
  EXPECT_NE(error_of([&] { sb::models::parse_stage_layers("9;3"); }).find("\"9;3\" is not a whole number"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sb::models::make_model("gpt2")->set_pipeline(2, 1, 0, {3, 3}); })
                .find("model 'gpt2': pp_layers gives 2 stages holding 6 layers"),
            std::string::npos);
  EXPECT_NE(error_of([&] { m->set_pipeline(2, 1, 0); }).find("already cut"), std::string::npos);
  auto whole = sb::models::make_model("gpt2-tiny-8l");
  whole->set_pipeline(2, 1, 1);
  EXPECT_NE(error_of([&] {
              sb::models::PersistentParams p(sb::models::init_params(whole->units(), 1), false);
              whole->loss(p, global_batch(whole->config(), 2, 4, 0));
            }).find("cut into 2 pipeline stages"),
            std::string::npos);
}
