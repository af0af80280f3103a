// A checkpoint reaches the full_shard engine shard by shard (the Realdata issue): built from a
// data::CheckpointReader's slices, each rank reads about 1/N of the file's bytes, its peak
// tensor memory grows by at least half the model's bytes less than when the whole model is
// loaded first (load_checkpoint, the control, which holds all of it), and the engine holds
// exactly the checkpoint's values. And a step's tensors peak in the phase the memory model
// names as its moment, within 15% of its prediction (MemoryPhase).
#include <fstream>
#include <string>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/loss.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::fsdp::Engine;

namespace {

// Peak growth (bytes) of the tensor memory live during f, counted by the caching CPU
// allocator (every block of 1 MiB and more): exact, unlike RSS, which freed-but-kept pages
// and the kernel's high-water mark blur.
double peak_growth(const std::function<void()>& f) {
  const sb::models::CpuPeakGrowth window;
  f();
  return static_cast<double>(window.bytes());
}

// A gpt2 folder shared by the ranks (rank 0 writes it): config.json from `config` (its keys
// after model_type), and with `weights` a checkpoint of seed-11 parameters.
std::string gpt2_folder(const std::string& prefix, const std::string& config, bool weights) {
  const std::string dir = shared_tmpdir(prefix, "model");
  if (world_rank() == 0) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << R"({"model_type": "gpt2", )" << config << "}";
    if (weights) {
      auto m = sb::models::make_model(dir);
      sb::data::export_hf_folder(*m, sb::models::init_params(m->units(), 11), dir);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

}  // namespace

TEST(LazyLoad, FullShardNeverHoldsTheWholeCheckpoint) {
  ASSERT_TRUE(sb::models::cpu_cache_stats().installed) << "the caching CPU allocator counts the "
                                                          "memory; unset SB_CPU_ALLOCATOR";
  // 12 blocks of d 512 (~39M parameters, 157 MB in fp32): each unit is a small part.
  const std::string dir = gpt2_folder(
      "sb_lazy", R"("n_layer": 12, "n_head": 8, "n_embd": 512, "vocab_size": 2048, "n_positions": 128)", true);
  auto model = sb::models::make_model(dir);
  const double model_bytes = 4.0 * static_cast<double>(sb::models::count_params(model->units()));
  Communicator comm(MPI_COMM_WORLD, 0);

  std::unique_ptr<Engine> lazy;
  std::int64_t read = 0;
  const double lazy_growth = peak_growth([&] {
    auto reader = std::make_shared<sb::data::CheckpointReader>(*model, dir);
    lazy = std::make_unique<Engine>(
        *model, comm, engine_config("full_shard"),
        [&](int u, std::int64_t off, std::int64_t n) { return reader->slice(u, off, n); });
    read = reader->bytes_read();
  });
  // Each rank read about its 1/N of the bytes (Conv1D shards, stored transposed, are read as
  // whole columns: a row of slack at each end), together every byte, and the engine holds
  // exactly the file's values.
  const int n = world_size();
  EXPECT_LE(static_cast<double>(read), model_bytes / n + 0.02 * model_bytes) << read;
  double total = static_cast<double>(read);
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GE(total, model_bytes);
  const auto full = lazy->full_params();
  const auto want = sb::data::load_checkpoint(*model, dir);
  EXPECT_EQ(max_param_diff(full, want), 0.0);
  lazy.reset();

  std::unique_ptr<Engine> eager;
  const double eager_growth = peak_growth([&] {
    const auto all = sb::data::load_checkpoint(*model, dir);  // the whole model first
    eager = std::make_unique<Engine>(*model, comm, engine_config("full_shard"), all);
  });
  eager.reset();
  if (world_rank() == 0)
    std::printf("# model %.0f MB; rank 0 read %.1f MB; peak growth while building: lazy %.0f "
                "MB, whole model first %.0f MB (%d ranks)\n", model_bytes / 1e6, read / 1e6,
                lazy_growth / 1e6, eager_growth / 1e6, world_size());
  EXPECT_LE(lazy_growth, eager_growth - 0.5 * model_bytes)
      << "lazy " << lazy_growth << " B, eager " << eager_growth << " B, model " << model_bytes;
  MPI_Barrier(MPI_COMM_WORLD);
}

// Where a training step's tensors peak (the allocator's phase, set at the engine's hooks) is
// the moment the memory model takes its activation terms at, and the step's measured tensors
// above the state are within 15% of the predicted ones (full_shard, fp32, a model whose tied
// embedding is the largest unit: 8192 x 128). Short rows: the first unit's backward (its
// gradient parts and their join, the head's gradient); long rows through naive attention:
// forward's end (every block's scores kept), and under full recomputation of more rows the top
// block's backward (its recomputed scores and their gradients).
TEST(MemoryPhase, TheStepPeaksWhereTheModelSays) {
  ASSERT_TRUE(sb::models::cpu_cache_stats().installed);
  const std::string dir = gpt2_folder(
      "sb_phase", R"("n_layer": 2, "n_head": 4, "n_embd": 128, "vocab_size": 8192, "n_positions": 512)", false);
  struct Case {
    std::string attention;
    std::int64_t B, T;
    bool recompute;  // activation_checkpoint = "full"
    const char* moment;
    std::string phase;  // the engine's phase name for that moment
  };
  const int n = world_size();
  // Under full recomputation the top block's backward peaks in its recomputation's scope (the
  // recomputation acquires the unit after the backward hook named it).
  const std::vector<Case> cases = {
      {"sdpa", 2L * n, 16, false, "first unit's backward", "backward of unit 0"},
      {"naive", 2L * n, 512, false, "forward's end", "loss"},
      {"naive", 12L * n, 512, true, "top block's backward", "recomputation of unit 2"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attention + " T " + std::to_string(c.T));
    auto model = sb::models::make_model(dir, c.attention);
    sb::models::CheckpointConfig ac;
    if (c.recompute) ac.mode = sb::models::CheckpointMode::Full;
    model->set_activation_checkpoint(ac);
    Communicator comm(MPI_COMM_WORLD, 0);
    Engine e(*model, comm, engine_config("full_shard"), sb::models::init_params(model->units(), 1));
    run_engine(*model, comm, engine_config("full_shard"), c.B, c.T, 1, 1, 0, &e);  // state formed
    const auto g = global_batch(model->config(), c.B, c.T, 1);
    const sb::models::CpuPeakGrowth window;
    e.step({slice(g, comm.rank(), n)}, sb::fsdp::loss_terms(g));
    const double measured = static_cast<double>(window.bytes_above_ends());
    const std::string phase = sb::models::cpu_peak_phase(sb::models::cpu_cache_stats());
    sb::fsdp::MemoryInputs in;
    in.units = model->units();
    in.model = model->config();
    in.strategy = "full_shard";
    in.world = n;
    in.rows = c.B / n, in.seq = c.T, in.loss_rows = in.rows * c.T, in.loss_classes = model->config().vocab;
    in.loss_chunk_rows = sb::models::loss_chunk_rows(model->config().vocab);
    in.checkpoint = ac;
    const auto p = sb::fsdp::predict_memory(in);
    const double predicted = static_cast<double>(p.gathered + p.activation_layers + p.activation_attention +
                                                 p.activation_head + p.first_unit_grad) -
                             static_cast<double>(p.grad_unformed);
    if (world_rank() == 0)
      std::printf("# %s B %lld T %lld: peak at \"%s\" (%.2f MB above the state), predicted \"%s\" "
                  "(%.2f MB)\n", c.attention.c_str(), static_cast<long long>(c.B), static_cast<long long>(c.T),
                  phase.c_str(), measured / 1e6, p.moment, predicted / 1e6);
    EXPECT_STREQ(p.moment, c.moment);
    EXPECT_EQ(phase, c.phase);
    EXPECT_NEAR(measured / predicted, 1.0, 0.15) << measured << " B measured, " << predicted << " predicted";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
