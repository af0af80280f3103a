// A checkpoint reaches the full_shard engine shard by shard (the Realdata issue): built from a
// data::CheckpointReader's slices, each rank reads about 1/N of the file's bytes, its peak
// tensor memory grows by at least half the model's bytes less than when the whole model is
// loaded first (load_checkpoint, the control, which holds all of it), and the engine holds
// exactly the checkpoint's values.
#include <fstream>
#include <string>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/data/safetensors.h"
#include "workloads/models/cpu_allocator.h"

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

}  // namespace

TEST(LazyLoad, FullShardNeverHoldsTheWholeCheckpoint) {
  ASSERT_TRUE(sb::models::cpu_cache_stats().installed) << "the caching CPU allocator counts the "
                                                          "memory; unset SB_CPU_ALLOCATOR";
  // 12 blocks of d 512 (~39M parameters, 157 MB in fp32): each unit is a small part.
  const std::string dir = shared_tmpdir("sb_lazy", "model");
  if (world_rank() == 0) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json")
        << R"({"model_type": "gpt2", "n_layer": 12, "n_head": 8, "n_embd": 512,)"
        << R"( "vocab_size": 2048, "n_positions": 128})";
    auto m = sb::models::make_model(dir);
    sb::data::export_hf_folder(*m, sb::models::init_params(m->units(), 11), dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
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
