// ZeRO-Infinity's optimizer-state offload, to disk (offload_optimizer = "disk"; docs/FSDP.md
// "Optimizer state on disk"). Each rank's Adam moments and weight-decay mask live in one file
// under offload_dir, opened with O_DIRECT so the page cache does not keep them in RAM (where
// the file system refuses O_DIRECT, a plain file whose written pages are dropped with
// posix_fadvise; `direct()` says which). The AdamW step streams a unit's state through two
// staging slots: while block i updates, block i + 1 is read and block i - 1 written on I/O
// threads. The file is removed when the store is destroyed: it holds no checkpoint.
//
// With master = true (offload_master) the fp32 master weights live there too: the update
// streams them with the moments, and a gather reads the unit's shard (read_master) into a
// buffer that lives until the all-gather is done. In fp32 training the master is the compute
// copy, so this is parameter offload as well.
//
// Layout: per unit u (n_u elements), three regions (four with the master) of cap_u = n_u x 4
// bytes rounded up to 4096 (O_DIRECT's alignment): exp_avg, exp_avg_sq, decay[, master]
// (fp32), units in order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/models/direct_file.h"

namespace sb::fsdp {

// Why the fp32 master cannot go to the optimizer's file with these settings (offload_param =
// "disk"), with the fix; "" when it can. It needs that file (offload_optimizer = "disk") and a
// strategy that shards parameters (a gather reads the shard); "auto" passes (fit chooses).
// The one check of plan (train_keys.cpp) and of the engine. Throws on an unknown strategy.
std::string master_on_disk_problem(const std::string& offload_optimizer, const std::string& strategy);

class OffloadStore {
 public:
  // One block of a unit's state in the staging slot: m, v (and p) are written back, decay is
  // not. p: the master weights' block, null unless the store holds them.
  struct Block {
    float* m;
    float* v;
    const float* decay;
    float* p;
  };
  struct Stats {
    std::uint64_t read_bytes = 0, written_bytes = 0;
    double read_s = 0, write_s = 0;  // time inside pread / pwrite (I/O threads)
    double wait_s = 0;               // time the updating thread waited for a read or write
    // Reads of the master for gathers (read_master; the caller's thread, apart from the above).
    std::uint64_t param_read_bytes = 0;
    double param_read_s = 0;
  };
  // Elements of a staging block by default: 1 Mi (4 MiB an array).
  static constexpr std::int64_t kDefaultBlock = std::int64_t{1} << 20;
  // The staging memory a store with this block size holds: 2 slots x 3 arrays (4 with the
  // master).
  static std::uint64_t staging_bytes(std::int64_t block, bool master = false) {
    return 2 * (master ? 4 : 3) * 4 * static_cast<std::uint64_t>(block);
  }
  // The bytes read_master's buffer for n elements holds: n x 4 rounded up to 4096, plus up to
  // 4096 to align it.
  static std::uint64_t master_read_bytes(std::int64_t n) {
    return models::DirectFile::round_up(4 * static_cast<std::uint64_t>(n)) + models::DirectFile::kAlign;
  }

  // Creates the file (dir must exist; tag names it: "rank<r>"); block: elements per staging
  // block, a multiple of 1024; master: the store holds the master weights too.
  OffloadStore(const std::string& dir, const std::string& tag, std::int64_t block = kDefaultBlock,
               bool master = false);
  ~OffloadStore();
  OffloadStore(const OffloadStore&) = delete;
  OffloadStore& operator=(const OffloadStore&) = delete;

  // Appends a unit of decay.numel() elements (its index: the units so far): zero moments, this
  // decay mask and (a store of the master) these master weights, written as the file grows,
  // so a caller drops each as it goes.
  int add(const torch::Tensor& decay, const torch::Tensor& master = {});
  // f on consecutive blocks [off, off + n) of unit u (n <= block), the read of the next and
  // the write of the last overlapping it; returns when every write is done.
  void stream(int unit, const std::function<void(std::int64_t off, std::int64_t n, const Block&)>& f);
  // Writes unit u's moments (n_u fp32 each; a resume on another mesh).
  void set_moments(int unit, const torch::Tensor& m, const torch::Tensor& v);
  // A store of the master: unit u's master weights (n_u fp32), read into a tensor whose storage
  // is 4096-aligned (master_read_bytes of memory, from the caching allocator, so the step's
  // tensor bytes count it). Reads straight from the file, never through the staging slots: a
  // gather calls it (on its own I/O thread) while the overlapped update streams another unit.
  torch::Tensor read_master(int unit);
  // Elements [off, off + n) of one of unit u's arrays (kM, kV, kP), straight between the file
  // and buf (checkpoints: no copy of the unit in memory). off a multiple of 1024, buf
  // 4096-aligned with room for 4 n bytes rounded up to 4096; a write's bytes past n land in
  // the region's padding.
  static constexpr int kM = 0, kV = 1, kP = 3;
  void read_array(int unit, int array, std::int64_t off, std::int64_t n, void* buf);
  void write_array(int unit, int array, std::int64_t off, std::int64_t n, const void* buf);
  std::int64_t size(int unit) const { return sizes_.at(static_cast<std::size_t>(unit)); }
  void set_master(int unit, const torch::Tensor& p);
  bool holds_master() const { return master_; }

  const std::string& path() const { return file_->path(); }
  bool direct() const { return file_->direct(); }
  std::int64_t block() const { return block_; }
  const Stats& stats() const { return stats_; }

 private:
  std::uint64_t cap(int unit) const;   // one region's bytes
  std::uint64_t base(int unit) const;  // the unit's first region's offset
  std::uint64_t at(int unit, int array, std::int64_t off) const;  // element off of an array
  void io(bool write, void* buf, std::uint64_t bytes, std::uint64_t offset, double* seconds);
  int arrays() const { return master_ ? 4 : 3; }
  // Writes unit's arrays from these n-element buffers: m and v (null: zeros, when decay is
  // given: a new unit), decay and p (null: left as it is).
  void write_unit(int unit, const float* m, const float* v, const float* decay, const float* p);

  std::unique_ptr<models::DirectFile> file_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::uint64_t> bases_;
  std::int64_t block_;
  bool master_ = false;
  float* slots_[2][4] = {};  // [slot][m, v, decay, p], 4096-aligned (p: a store of the master)
  Stats stats_;
  std::mutex param_stats_mu_;  // read_master runs on gathers' I/O threads
};

}  // namespace sb::fsdp
