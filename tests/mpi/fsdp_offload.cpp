// Optimizer state on disk (offload_optimizer = "disk", fsdp/offload_store.h) equals the
// in-memory optimizer bit for bit: 5 steps of gpt2-tiny under full_shard, zero1,
// shard_grad_op and no_shard, fp32 and bf16 (whose update unscales and clips a 16-bit
// gradient as it reads it), with 1024-element staging blocks so every unit streams through
// several: the same losses, gradient norms and final parameters. The engine holds no moments,
// its staging buffers are its offload bytes, as the memory model predicts, and the file moved
// exactly 3 x and 2 x each block's 4096-aligned bytes a step (read m, v, decay; write m, v).
// A checkpoint saved from the offloaded optimizer resumes in an in-memory one (and back)
// exactly as the uninterrupted run; the file is gone when the engine is.
#include <filesystem>
#include <optional>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/fsdp/memory_model.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::fsdp::Engine;
using sb::fsdp::EngineConfig;

namespace {

// The size of `path` when this process holds it open after it was unlinked (/proc/self/fd's
// links read "PATH (deleted)", and stat through them reaches the file); none otherwise.
std::optional<std::uintmax_t> deleted_file_size(const std::string& path) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string() == path + " (deleted)") return std::filesystem::file_size(e.path());
  }
  return std::nullopt;
}
bool open_deleted(const std::string& path) { return deleted_file_size(path).has_value(); }

constexpr int kSteps = 5;
constexpr std::int64_t kB = 12, kT = 16, kBlock = 1024;

EngineConfig cfg_of(const std::string& strategy, torch::ScalarType dtype, bool disk, bool master = false) {
  EngineConfig c = engine_config(strategy, kSteps);
  c.param_dtype = dtype;
  c.reduce_dtype = dtype;
  if (disk) {
    c.offload_optimizer = "disk";
    c.offload_dir = shared_tmpdir("sb_offload", strategy);
    c.offload_block = kBlock;
    c.offload_master = master;
  }
  return c;
}

std::uint64_t aligned(std::int64_t n) { return (4 * static_cast<std::uint64_t>(n) + 4095) / 4096 * 4096; }

// The same losses, gradient norms and final parameters, bit for bit.
void expect_equal_runs(const RunResult& got, const RunResult& want, const std::string& what) {
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(got.losses[s], want.losses[s]) << what << " step " << s;
    EXPECT_EQ(got.norms[s], want.norms[s]) << what << " step " << s;
  }
  EXPECT_EQ(max_param_diff(got.params, want.params), 0.0) << what;
}

// What one update moves through the file: every block of every unit's optimizer slice (the
// shard, or the whole unit where nothing is sharded), `reads` and `writes` arrays of it.
std::pair<std::uint64_t, std::uint64_t> update_bytes(const sb::models::Model& model, int rank, bool sharded,
                                                     int reads, int writes) {
  std::uint64_t read = 0, written = 0;
  for (const auto& u : model.units()) {
    const auto r = sb::fsdp::shard_range(u.numel(), world_size(), rank);
    const std::int64_t n = sharded ? r.size : r.padded;
    for (std::int64_t off = 0; off < n; off += kBlock) {
      read += reads * aligned(std::min(kBlock, n - off));
      written += writes * aligned(std::min(kBlock, n - off));
    }
  }
  return {read, written};
}

// The memory model's prediction for these engines (disk: the moments on disk, master: and the
// master).
sb::fsdp::MemoryPrediction predicted(const sb::models::Model& model, const std::string& strategy,
                                     torch::ScalarType dtype, bool disk, bool master) {
  sb::fsdp::MemoryInputs in;
  in.units = model.units();
  in.model = model.config();
  in.strategy = strategy;
  in.world = world_size();
  in.param_dtype = dtype;
  in.reduce_dtype = dtype;
  if (disk) in.offload_optimizer = "disk";
  in.offload_block = kBlock;
  in.offload_master = master;
  return sb::fsdp::predict_memory(in);
}

TEST(Offload, DiskEqualsMemoryBitForBit) {
  for (const std::string strategy : {"full_shard", "zero1", "shard_grad_op", "no_shard"})
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      const std::string what = strategy + (dtype == torch::kFloat32 ? " fp32" : " bf16");
      auto model = sb::models::make_model("gpt2-tiny");
      Communicator comm(MPI_COMM_WORLD, 0);
      const RunResult want = run_engine(*model, comm, cfg_of(strategy, dtype, false), kB, kT, kSteps);
      std::string path;
      {
        Engine e(*model, comm, cfg_of(strategy, dtype, true), sb::models::init_params(model->units(), 1234));
        const RunResult got = run_engine(*model, comm, {}, kB, kT, kSteps, 1, 0, &e);
        expect_equal_runs(got, want, what);
        // Memory: no moments here, the staging blocks instead, as predicted.
        const auto m = e.memory();
        EXPECT_EQ(m.optim, 0u) << what;
        EXPECT_EQ(m.offload, sb::fsdp::OffloadStore::staging_bytes(kBlock)) << what;
        const auto pm = predicted(*model, strategy, dtype, true, false);
        EXPECT_EQ(pm.optim, 0u) << what;
        EXPECT_EQ(pm.offload, m.offload) << what;
        EXPECT_EQ(pm.model_state, m.model_state) << what;
        // The bytes moved: every block of every unit, each step.
        const auto* store = e.offload_store();
        ASSERT_NE(store, nullptr);
        const auto [read, written] = update_bytes(*model, comm.rank(), strategy != "no_shard", 3, 2);
        EXPECT_EQ(store->stats().read_bytes, read * kSteps) << what;
        EXPECT_EQ(store->stats().written_bytes, written * kSteps) << what;
        // Unlinked as soon as created (a rank killed by MPI_Abort leaves no file behind), and
        // held open by this process until the engine goes.
        path = store->path();
        EXPECT_FALSE(std::filesystem::exists(path)) << path << " is still linked";
        EXPECT_TRUE(open_deleted(path)) << path << " is not open";
      }
      EXPECT_FALSE(open_deleted(path)) << what << ": " << path << " outlived its engine";
      if (world_rank() == 0)
        std::printf("[ offload ] %-22s loss %.6f -> %.6f, equal to the in-memory optimizer\n",
                    what.c_str(), want.losses.front(), want.losses.back());
    }
}

// offload_overlap: where parameters are sharded the update runs after the step on a thread
// and the next forward waits unit by unit; the same losses, norms and parameters as the
// update finished inside the step (and so as the in-memory optimizer, above). Where the
// strategy communicates after the update (zero1) or does not gather (no_shard) it never
// overlaps.
TEST(Offload, OverlappedUpdateEqualsTheUpdateInsideTheStep) {
  for (const std::string strategy : {"full_shard", "shard_grad_op", "zero1", "no_shard"})
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      const std::string what = strategy + (dtype == torch::kFloat32 ? " fp32" : " bf16");
      auto model = sb::models::make_model("gpt2-tiny");
      Communicator comm(MPI_COMM_WORLD, 0);
      EngineConfig inside = cfg_of(strategy, dtype, true);
      inside.offload_overlap = false;
      RunResult want;
      {
        Engine e(*model, comm, inside, sb::models::init_params(model->units(), 1234));
        EXPECT_FALSE(e.overlaps_update()) << what;
        want = run_engine(*model, comm, {}, kB, kT, kSteps, 1, 0, &e);
      }
      Engine e(*model, comm, cfg_of(strategy, dtype, true), sb::models::init_params(model->units(), 1234));
      EXPECT_EQ(e.overlaps_update(), strategy == "full_shard" || strategy == "shard_grad_op") << what;
      const RunResult got = run_engine(*model, comm, {}, kB, kT, kSteps, 1, 0, &e);
      expect_equal_runs(got, want, what);
      EXPECT_GE(e.update_wait_s(), 0.0) << what;
    }
}

// Save after 2 steps from one kind of optimizer, resume in the other, 3 more steps: the
// uninterrupted in-memory run's losses and parameters, both ways.
TEST(Offload, CheckpointsMoveBetweenDiskAndMemory) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  const RunResult want = run_engine(*model, comm, cfg_of("full_shard", torch::kFloat32, false), kB, kT, kSteps);
  for (const bool save_disk : {true, false}) {
    const std::string dir = shared_tmpdir("sb_offload_ckpt", save_disk ? "from_disk" : "from_memory");
    {
      Engine a(*model, comm, cfg_of("full_shard", torch::kFloat32, save_disk), sb::models::init_params(model->units(), 1234));
      run_engine(*model, comm, {}, kB, kT, 2, 1, 0, &a);
      a.save(dir);
    }
    Engine b(*model, comm, cfg_of("full_shard", torch::kFloat32, !save_disk), sb::models::init_params(model->units(), 7));
    b.load(dir);
    const RunResult got = run_engine(*model, comm, {}, kB, kT, kSteps - 2, 1, 2, &b);
    for (int s = 0; s < kSteps - 2; ++s)
      EXPECT_EQ(got.losses[s], want.losses[s + 2]) << (save_disk ? "disk -> memory" : "memory -> disk") << " step " << s + 2;
    EXPECT_EQ(max_param_diff(got.params, want.params), 0.0) << (save_disk ? "disk -> memory" : "memory -> disk");
  }
}

// offload_master: the master weights in the same file, streamed by the update and read by
// each gather. The same losses, norms and parameters as the in-memory optimizer, overlapped
// or not; no parameter bytes in memory; the file is exactly the predicted disk bytes (four
// regions a unit); the update moved 4 x and 3 x each block's aligned bytes a step (read m, v,
// decay, p; write m, v, p), and every gather read its unit's shard.
TEST(Offload, MasterOnDiskEqualsMemoryBitForBit) {
  for (const std::string strategy : {"full_shard", "shard_grad_op"})
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
      for (const bool overlap : {true, false}) {
        const std::string what = strategy + (dtype == torch::kFloat32 ? " fp32" : " bf16") +
                                 (overlap ? " overlapped" : "");
        auto model = sb::models::make_model("gpt2-tiny");
        Communicator comm(MPI_COMM_WORLD, 0);
        const RunResult want = run_engine(*model, comm, cfg_of(strategy, dtype, false), kB, kT, kSteps);
        EngineConfig c = cfg_of(strategy, dtype, true, true);
        c.offload_overlap = overlap;
        Engine e(*model, comm, c, sb::models::init_params(model->units(), 1234));
        EXPECT_EQ(e.overlaps_update(), overlap) << what;
        const RunResult got = run_engine(*model, comm, {}, kB, kT, kSteps, 1, 0, &e);
        expect_equal_runs(got, want, what);
        const auto m = e.memory();
        EXPECT_EQ(m.param, 0u) << what;
        EXPECT_EQ(m.optim, 0u) << what;
        EXPECT_EQ(m.offload, sb::fsdp::OffloadStore::staging_bytes(kBlock, true)) << what;
        const auto pm = predicted(*model, strategy, dtype, true, true);
        EXPECT_EQ(pm.param, 0u) << what;
        EXPECT_EQ(pm.offload, m.offload) << what;
        EXPECT_EQ(pm.model_state, m.model_state) << what;
        const auto* store = e.offload_store();
        ASSERT_NE(store, nullptr);
        EXPECT_TRUE(store->holds_master()) << what;
        EXPECT_EQ(deleted_file_size(store->path()).value_or(0), pm.disk_optim) << what;
        const auto [read, written] = update_bytes(*model, comm.rank(), true, 4, 3);
        std::uint64_t shards = 0;
        for (const auto& u : model->units())
          shards += aligned(sb::fsdp::shard_range(u.numel(), world_size(), comm.rank()).size);
        EXPECT_EQ(store->stats().read_bytes, read * kSteps) << what;
        EXPECT_EQ(store->stats().written_bytes, written * kSteps) << what;
        // Each step gathers every unit at least once (full_shard: again in backward); the
        // final parameters' read (full_params) once more.
        EXPECT_GE(store->stats().param_read_bytes, shards * (kSteps + 1)) << what;
        EXPECT_EQ(store->stats().param_read_bytes % 4096, 0u) << what;
      }
}

// A checkpoint saved with the master on disk resumes in an in-memory optimizer and back,
// exactly as the uninterrupted run.
TEST(Offload, CheckpointsMoveBetweenMasterOnDiskAndMemory) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  const RunResult want = run_engine(*model, comm, cfg_of("full_shard", torch::kFloat32, false), kB, kT, kSteps);
  for (const bool save_disk : {true, false}) {
    const std::string dir = shared_tmpdir("sb_offload_master_ckpt", save_disk ? "from_disk" : "from_memory");
    {
      Engine a(*model, comm, cfg_of("full_shard", torch::kFloat32, true, save_disk), sb::models::init_params(model->units(), 1234));
      run_engine(*model, comm, {}, kB, kT, 2, 1, 0, &a);
      a.save(dir);
    }
    // The rank file: the memory model's disk_checkpoint (the tensors) and a small header.
    const std::uint64_t tensors = predicted(*model, "full_shard", torch::kFloat32, false, false).disk_checkpoint;
    std::uint64_t file = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
      if (f.path().filename() == "rank" + std::to_string(comm.rank()) + ".sbck") file = f.file_size();
    EXPECT_GE(file, tensors);
    EXPECT_LT(file, tensors + 65536) << "a rank file of " << file << " bytes for " << tensors << " of tensors";
    Engine b(*model, comm, cfg_of("full_shard", torch::kFloat32, true, !save_disk), sb::models::init_params(model->units(), 7));
    b.load(dir);
    const RunResult got = run_engine(*model, comm, {}, kB, kT, kSteps - 2, 1, 2, &b);
    const char* how = save_disk ? "master on disk -> in memory" : "in memory -> master on disk";
    for (int s = 0; s < kSteps - 2; ++s) EXPECT_EQ(got.losses[s], want.losses[s + 2]) << how << " step " << s + 2;
    EXPECT_EQ(max_param_diff(got.params, want.params), 0.0) << how;
  }
}

// Where nothing is gathered there is nothing to read the master into: refused, with the fix.
TEST(Offload, MasterOnDiskNeedsShardedParameters) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  for (const std::string strategy : {"no_shard", "zero1"}) {
    const std::string msg = error_of([&] {
      Engine e(*model, comm, cfg_of(strategy, torch::kFloat32, true, true), sb::models::init_params(model->units(), 1234));
    });
    EXPECT_NE(msg.find("strategy '" + strategy + "' does not shard the parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find("or set offload_param = \"none\""), std::string::npos) << msg;
  }
}

TEST(Offload, AFolderThatCannotHoldTheFileIsNamed) {
  auto model = sb::models::make_model("gpt2-tiny");
  Communicator comm(MPI_COMM_WORLD, 0);
  auto c = cfg_of("full_shard", torch::kFloat32, true);
  c.offload_dir = "/nonexistent/offload";
  const std::string msg = error_of([&] {
    Engine e(*model, comm, c, sb::models::init_params(model->units(), 1234));
  });
  EXPECT_NE(msg.find("cannot create /nonexistent/offload/shardbench-optim-rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set offload_dir to a writable folder"), std::string::npos) << msg;
}

}  // namespace
