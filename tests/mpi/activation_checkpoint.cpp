// Activation checkpointing under the FSDP engine and every parallel dimension
// (models/checkpoint.h): 3 steps of gpt2-tiny-8l and bert-tiny-8l with dropout 0.1 in fp32,
// recomputing whole blocks (every block, every second) or the attention core, on dp N
// (full_shard, which re-gathers a unit for its recomputation; 2 micro-batches), tp 2 with
// sequence parallelism x dp N/2, and pp 2 (1f1b, 2 micro-batches) x dp N/2, give the losses of
// the same mesh without checkpointing bit for bit, and the engine gathers no more than
// without it (the recomputation's acquires pin nothing: the gathered bytes after the step and
// at their peak are equal). Even worlds for tp and pp. FPDT's chunked blocks (3 chunks of the
// 16 tokens, their keys and values in memory or on disk, residual dropout) give the same losses
// within 1e-5 relative on dp N with 2 micro-batches, tp 2 (no row split), pp 2 and inside
// Ulysses at sp 2 (4 chunks: each rank's slice in stripes, Model::sequence_stripe, against sp 2
// without checkpointing on contiguous slices, so positions and dropout masks must follow the
// striped tokens): each chunk's gradient part is summed before the unit's one reduction
// (Engine::partial_grads_), and the engine gathers no more.
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/data/batches.h"
#include "workloads/models/checkpoint.h"
#include "workloads/parallel/sp_layers.h"
#include "workloads/parallel/tp_layers.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;
using sb::models::CheckpointConfig;
using sb::models::CheckpointMode;

namespace {

constexpr int kSteps = 3;
constexpr std::int64_t kB = 24, kT = 16;  // divides over 2, 3 and 4 ranks x 2 micro-batches

struct Case {
  int tp = 1, pp = 1, micro = 1;
  bool sp = false;  // tp's sequence parallelism
  int ulysses = 1;  // mesh.sp
};

struct Result {
  std::vector<double> losses;
  std::uint64_t gathered = 0, peak_gathered = 0;
};

Result train(std::unique_ptr<sb::models::Model> model, const Case& c, const CheckpointConfig& ac,
             const sb::models::DropoutConfig& dropout = {0.1, 0.1, 5}) {
  sb::Mesh mesh;
  mesh.tp = c.tp, mesh.pp = c.pp, mesh.sp = c.ulysses, mesh.dp_shard = world_size() / (c.tp * c.pp * c.ulysses);
  Communicator comm(MPI_COMM_WORLD, mesh);
  if (c.tp > 1) model->set_tensor_parallel(sb::parallel::tensor_parallel(comm, c.sp));
  if (c.ulysses > 1) model->set_sequence_parallel(sb::parallel::sequence_parallel(comm));
  if (c.pp > 1) model->set_pipeline(c.pp, 1, comm.rank(Group::Pp));
  model->set_dropout(dropout);
  model->set_activation_checkpoint(ac);
  auto cfg = engine_config("full_shard", kSteps);
  cfg.pp_schedule = "1f1b";
  sb::fsdp::Engine e(*model, comm, cfg, sb::models::init_params(model->units(), 1234));
  Result r;
  for (int s = 0; s < kSteps; ++s) {
    auto g = global_batch(model->config(), kB, kT, s);
    g.dropout_step = s;
    const auto mine = sb::data::sequence_slice(slice(g, mesh.dp_rank(comm.rank()), mesh.dp_size()),
                                               comm.rank(Group::Sp), c.ulysses, model->sequence_stripe(kT));
    std::vector<sb::models::Batch> micro;
    for (int m = 0; m < c.micro; ++m) micro.push_back(slice(mine, m, c.micro));
    r.losses.push_back(e.step(micro, sb::fsdp::loss_terms(g)).loss);
  }
  r.gathered = e.memory().gathered;
  r.peak_gathered = e.memory().peak_gathered;
  return r;
}

}  // namespace

TEST(ActivationCheckpointMesh, EveryDimensionEqualsNoCheckpointing) {
  const int n = world_size();
  std::vector<std::pair<std::string, Case>> cases = {{"dp", {1, 1, 2, false}}};
  if (n % 2 == 0) {
    cases.push_back({"tp 2 + sequence parallel", {2, 1, 1, true}});
    cases.push_back({"pp 2", {1, 2, 2, false}});
  }
  const std::vector<std::pair<std::string, CheckpointConfig>> modes = {
      {"full", {CheckpointMode::Full, 1}}, {"full every 2", {CheckpointMode::Full, 2}},
      {"selective", {CheckpointMode::Selective, 1}}};
  for (const std::string preset : {"gpt2-tiny-8l", "bert-tiny-8l"})
    for (const auto& [name, c] : cases) {
      const Result want = train(sb::models::make_model(preset), c, {});
      for (const auto& [mode, ac] : modes) {
        const Result got = train(sb::models::make_model(preset), c, ac);
        const std::string what = preset + " " + name + " " + mode;
        for (int s = 0; s < kSteps; ++s)
          EXPECT_EQ(got.losses[s], want.losses[s]) << what << " step " << s;
        EXPECT_EQ(got.gathered, want.gathered) << what;
        EXPECT_EQ(got.peak_gathered, want.peak_gathered) << what;
      }
    }
}


TEST(ActivationCheckpointMesh, ChunkedBlocksEqualNoCheckpointing) {
  std::vector<std::pair<std::string, Case>> cases = {{"dp", {1, 1, 2, false}}};
  if (world_size() % 2 == 0) {
    cases.push_back({"tp 2", {2, 1, 1, false}});
    cases.push_back({"pp 2", {1, 2, 2, false}});
    cases.push_back({"sp 2", {1, 1, 1, false, 2}});
  }
  const sb::models::DropoutConfig residual{0.1, 0, 5};  // chunked refuses attention dropout
  for (const auto& [name, c] : cases) {
    auto cfg = sb::models::preset_config("gpt2-tiny-8l");
    cfg.attention = "sdpa";
    const Result want = train(sb::models::make_model(cfg), c, {}, residual);
    for (const char* kv : {"none", "disk"}) {
      // Under sp 2 each rank's 8 tokens in 4 stripes of 2, chunk i the 4 tokens [4 i, 4 i + 4).
      cfg.seq_chunks = c.ulysses > 1 ? 4 : 3, cfg.kv_offload = kv, cfg.kv_offload_dir = ::testing::TempDir();
      const Result got = train(sb::models::make_model(cfg), c, {CheckpointMode::Chunked, 1}, residual);
      const std::string what = name + ", chunks " + kv;
      for (int s = 0; s < kSteps; ++s)
        EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::abs(want.losses[s])) << what << " step " << s;
      EXPECT_EQ(got.gathered, want.gathered) << what;
      EXPECT_EQ(got.peak_gathered, want.peak_gathered) << what;
    }
  }
}
