// GPT-2 and BERT with Megatron's tensor parallelism (models/tensor_parallel.h) under the FSDP
// engine equal the one-process trainer: at 2 ranks tp = 2; at 4 ranks tp = 2 x dp_shard = 2 under
// every strategy that shards over dp_shard, and tp = 2 x dp_replicate = 2 under hybrid_shard.
// The memory model (fsdp::predict_memory on the rank's blocks) gives the engine's state bytes.
// 10 steps of gpt2-tiny and bert-tiny (MLM): losses and gradient norms (split parameters counted per tp rank,
// replicated ones once) within 1e-5 relative, each rank's final blocks within 2e-5 of the
// reference's. Per micro-step the tp group all-reduces 2L + 3 activations forward (embedding,
// two per block, the cross-entropy's maxima and sums) and 2L + 1 gradients backward. The
// vocabulary-parallel cross-entropy on its own (uneven vocabulary ranges, ignored targets)
// equals at::cross_entropy and its gradient; a tp that does not divide the heads is refused
// naming the fix.
#include <ATen/ATen.h>

#include <map>
#include <mutex>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/family.h"
#include "workloads/models/loss.h"
#include "workloads/parallel/tp_layers.h"
#include "workloads/train/reference_trainer.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

constexpr int kSteps = 10;
constexpr std::int64_t kB = 8, kT = 16;

const RunResult& reference(const std::string& preset) { return cached_reference(preset, kSteps, kB, kT); }

sb::Mesh mesh_of(int tp, int dp_shard, int dp_replicate) {
  sb::Mesh m;
  m.tp = tp, m.dp_shard = dp_shard, m.dp_replicate = dp_replicate;
  return m;
}

// Collectives over tp per micro-batch (docs/FSDP.md "Tensor parallelism in the models").
bool causal(const sb::models::Model& m) {  // GPT-2 here (the other is BERT)
  return sb::models::family(m.config().family).objective == sb::models::Objective::CausalLm;
}

std::pair<std::size_t, std::size_t> tp_collectives(bool gpt2, std::size_t L, bool sp) {
  if (!sp) return {2 * L + 3, 2 * L + 1};
  // Sequence parallel, per block: forward 2 gathers and 2 reduce-scatters; backward 2 gathers
  // again (tp_act), 2 reduce-scatters and 2 all-gathers of gradients, and 6 all-reduces of the
  // replicated LayerNorm and bias gradients. Outside the blocks, GPT-2: the embedding's
  // reduce-scatter, the head's gathered GEMM and the cross-entropy's 2 forward; backward the
  // head's gather again, its reduce-scatter, the embedding's all-gather and wpe, ln_f (2)
  // all-reduces. BERT: the embedding and the heads' all-gather and the cross-entropy forward;
  // backward the MLM decoder's input all-reduce, the embedding's all-gather and position,
  // token type and LayerNorm (2) all-reduces.
  return gpt2 ? std::make_pair(6 * L + 5, 10 * L + 5) : std::make_pair(6 * L + 4, 10 * L + 6);
}

// GPT-2's tp traffic per micro-batch of R rows (positions), in the trace's logical bytes (what
// the fp32 collective sends: all-reduce 2 (p-1)/p of its buffer, all-gather and reduce-scatter
// (p-1)/p of the whole buffer), forward (tp_act) and backward (tp_grad):
//   tensor parallel: (2L + 1) all-reduces of R x d each way (embedding and two per block
//     forward; two per block and the LM head's input backward), and the cross-entropy's row
//     maxima (R) and sums with the target logit (2R) forward;
//   sequence parallel: (6L + 3) all-gathers or reduce-scatters of R x d forward and
//     re-gathered in backward (embedding, 4 per block, the head's gathered GEMM; 2 per block
//     and the head's again), the cross-entropy's 3R; backward (4L + 2) of R x d and the
//     all-reduces of the replicated parameters' gradients: 6 d per block, ln_f's 2 d and wpe
//     (P x d).
std::pair<std::uint64_t, std::uint64_t> gpt2_tp_bytes(const sb::models::ModelConfig& c,
                                                      std::int64_t R, int p, bool sp) {
  const double ar = 2.0 * (p - 1) / p, ag = static_cast<double>(p - 1) / p;
  const double rows = static_cast<double>(R * c.d_model * 4), L = static_cast<double>(c.n_layer);
  const double ce = ar * static_cast<double>(3 * R * 4);
  if (!sp) return {static_cast<std::uint64_t>((2 * L + 1) * ar * rows + ce),
                   static_cast<std::uint64_t>((2 * L + 1) * ar * rows)};
  const double params = ar * static_cast<double>((6 * c.n_layer + 2) * c.d_model * 4 + c.max_pos * c.d_model * 4);
  return {static_cast<std::uint64_t>((6 * L + 3) * ag * rows + ce),
          static_cast<std::uint64_t>((4 * L + 2) * ag * rows + params)};
}

void check(const std::string& preset, const std::string& strategy, const sb::Mesh& mesh,
           bool sp = false) {
  Communicator comm(MPI_COMM_WORLD, mesh);
  std::mutex mu;
  std::size_t act = 0, grad = 0;
  std::uint64_t act_bytes = 0, grad_bytes = 0;
  comm.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    act += e.kind == "tp_act";
    grad += e.kind == "tp_grad";
    if (e.kind == "tp_act") act_bytes += e.logical_bytes;
    if (e.kind == "tp_grad") grad_bytes += e.logical_bytes;
  }, MPI_Wtime());
  auto model = sb::models::make_model(preset);
  model->set_tensor_parallel(sb::parallel::tensor_parallel(comm, sp));
  sb::fsdp::EngineConfig cfg = engine_config(strategy, kSteps);
  sb::fsdp::Engine engine(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
  const auto& ref = reference(preset);
  const std::string what = preset + " " + strategy + " " + mesh.str() + (sp ? " sequence-parallel" : "");
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    auto mine = slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size());
    auto st = engine.step({mine}, sb::fsdp::loss_terms(g));
    losses.push_back(st.loss);
    EXPECT_NEAR(st.loss, ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << what << " step " << s;
    EXPECT_NEAR(st.grad_norm, ref.norms[s], 1e-5 * ref.norms[s]) << what << " step " << s;
  }
  // Each rank's blocks: the reference's parameters split as the specs say.
  const auto got = engine.full_params();
  const auto& units = model->units();
  double d = 0;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      const auto want = sb::models::tp_slice(units[u].params[i], ref.params[u][i]);
      ASSERT_EQ(got[u][i].sizes(), want.sizes()) << units[u].params[i].name;
      d = std::max(d, (got[u][i] - want).abs().max().item<double>());
    }
  EXPECT_LT(d, 2e-5) << what << ": final parameters differ by " << d;
  // The memory model on this rank's blocks and the data-parallel ranks: the engine's state.
  sb::fsdp::MemoryInputs in;
  in.units = units;
  in.model = model->config();
  in.strategy = strategy;
  in.world = mesh.dp_size();
  in.tp = mesh.tp;
  in.sequence_parallel = sp;
  in.shard_group = mesh.dp_shard;
  const auto m = engine.memory();
  const auto pm = sb::fsdp::predict_memory(in);
  EXPECT_EQ(m.param, pm.param) << what;
  EXPECT_EQ(m.optim, pm.optim) << what;
  EXPECT_EQ(m.model_state, pm.model_state) << what;
  const auto [per_act, per_grad] = tp_collectives(causal(*model), model->config().n_layer, sp);
  EXPECT_EQ(act, per_act * kSteps) << what;
  EXPECT_EQ(grad, per_grad * kSteps) << what;
  if (causal(*model)) {  // bytes: docs/METRICS.md "Tensor-parallel volume"
    const auto [want_act, want_grad] = gpt2_tp_bytes(model->config(), kB / mesh.dp_size() * kT, mesh.tp, sp);
    EXPECT_EQ(act_bytes, want_act * kSteps) << what;
    EXPECT_EQ(grad_bytes, want_grad * kSteps) << what;
  }
  if (world_rank() == 0)
    std::printf("[ tp ] %-52s loss %.6f -> %.6f (ref %.6f), max |dp| %.2e\n", what.c_str(),
                losses.front(), losses.back(), ref.losses.back(), d);
}

TEST(TpModels, MatchesOneProcessTrainer) {
  const int n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "tp = 2 needs an even world";
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    for (const std::string s : {"full_shard", "zero1", "shard_grad_op", "no_shard"})
      check(preset, s, mesh_of(2, n / 2, 1));
    if (n == 4) check(preset, "hybrid_shard", mesh_of(2, 1, 2));
  }
}

TEST(TpModels, SequenceParallelMatchesOneProcessTrainer) {
  const int n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "tp = 2 needs an even world";
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    check(preset, "full_shard", mesh_of(2, n / 2, 1), true);
    if (n == 4) check(preset, "no_shard", mesh_of(2, 2, 1), true);
    if (n == 4) check(preset, "hybrid_shard", mesh_of(2, 1, 2), true);
  }
}

// Compression per dimension (comm::Policy::tp_act / tp_grad): bf16 on f's and g's all-reduces
// halves their bytes exactly (the cross-entropy's stay plain) and keeps GPT-2 within bf16's
// rounding of the one-process trainer.
TEST(TpModels, CompressedTensorParallelTraffic) {
  const int n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "tp = 2 needs an even world";
  const sb::Mesh mesh = mesh_of(2, n / 2, 1);
  Communicator comm(MPI_COMM_WORLD, mesh);
  std::mutex mu;
  std::size_t halved = 0, plain = 0, other = 0;
  comm.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (e.kind != "tp_act" && e.kind != "tp_grad") return;
    if (2 * e.wire_bytes == e.logical_bytes) ++halved;
    else if (e.wire_bytes == e.logical_bytes) ++plain;
    else ++other;
  }, MPI_Wtime());
  sb::comm::Policy policy;
  policy.tp_act.name = policy.tp_grad.name = "bf16";
  auto model = sb::models::make_model("gpt2-tiny");
  model->set_tensor_parallel(sb::parallel::tensor_parallel(comm, false, policy));
  sb::fsdp::Engine engine(*model, comm, engine_config("full_shard", kSteps),
                          sb::models::init_params(model->units(), 1234));
  const auto& ref = reference("gpt2-tiny");
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    auto st = engine.step({slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size())}, sb::fsdp::loss_terms(g));
    EXPECT_NEAR(st.loss, ref.losses[s], 2e-3 * std::abs(ref.losses[s])) << "step " << s;
  }
  const std::size_t L = model->config().n_layer;
  EXPECT_EQ(halved, (2 * L + 1 + 2 * L + 1) * kSteps);  // f's and g's all-reduces
  EXPECT_EQ(plain, 2u * kSteps);                         // the cross-entropy's maxima and sums
  EXPECT_EQ(other, 0u);
}

TEST(TpModels, VocabParallelCrossEntropy) {
  const int n = world_size();
  Communicator comm(MPI_COMM_WORLD, mesh_of(n, 1, 1));
  const std::int64_t N = 7, V = 10;  // V over 3 or 4 ranks: uneven ranges
  torch::manual_seed(3);
  const auto logits = torch::randn({N, V}) * 3;
  const auto targets = torch::tensor({0, 9, -100, 4, 5, -100, 2}, torch::kLong);
  auto full = logits.clone().requires_grad_(true);
  auto ref = at::cross_entropy_loss(full, targets, {}, at::Reduction::Mean, -100);
  ref.backward();
  const auto [b, e] = sb::models::vocab_range(V, comm.rank(Group::Tp), n);
  auto mine = logits.narrow(1, b, e - b).clone().requires_grad_(true);
  auto loss = sb::parallel::vocab_parallel_cross_entropy(mine, targets, b, comm);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), ref.item<double>(), 1e-6);
  EXPECT_TRUE(torch::allclose(mine.grad(), full.grad().narrow(1, b, e - b), 1e-6, 1e-7));
}

TEST(TpModels, RefusesWhatCannotSplit) {
  auto gpt = sb::models::make_model("gpt2-tiny");  // 4 heads
  EXPECT_NE(gpt->tensor_parallel_problem(3).find("mesh.tp = 3 must divide the heads (4) and the "
                                                 "MLP width (256) of model 'gpt2-tiny'"),
            std::string::npos);
  EXPECT_EQ(gpt->tensor_parallel_problem(2), "");
  auto bert = sb::models::make_model("bert-tiny");  // 4 heads
  EXPECT_NE(error_of([&] { bert->set_tensor_parallel({.rank = 0, .size = 3}); })
                .find("mesh.tp = 3 must divide the heads (4)"), std::string::npos);
}

}  // namespace
