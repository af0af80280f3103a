// ZeRO-Infinity's optimizer-state offload, to disk (offload_optimizer = "disk"; docs/FSDP.md
// "Optimizer state on disk"). Each rank's Adam moments and weight-decay mask live in one file
// under offload_dir, opened with O_DIRECT so the page cache does not keep them in RAM (where
// the file system refuses O_DIRECT, a plain file whose written pages are dropped with
// posix_fadvise; `direct()` says which). The AdamW step streams a unit's state through two
// staging slots: while block i updates, block i + 1 is read and block i - 1 written on I/O
// threads. The file is removed when the store is destroyed: it holds no checkpoint.
//
// Layout: per unit u (n_u elements), three regions of cap_u = n_u x 4 bytes rounded up to
// 4096 (O_DIRECT's alignment): exp_avg, exp_avg_sq, decay (fp32), units in order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/models/direct_file.h"

namespace sb::fsdp {

class OffloadStore {
 public:
  // One block of a unit's state in the staging slot: m and v are written back, decay is not.
  struct Block {
    float* m;
    float* v;
    const float* decay;
  };
  struct Stats {
    std::uint64_t read_bytes = 0, written_bytes = 0;
    double read_s = 0, write_s = 0;  // time inside pread / pwrite (I/O threads)
    double wait_s = 0;               // time the updating thread waited for a read or write
  };
  // Elements of a staging block by default: 1 Mi (4 MiB an array).
  static constexpr std::int64_t kDefaultBlock = std::int64_t{1} << 20;
  // The staging memory a store with this block size holds: 2 slots x 3 arrays.
  static std::uint64_t staging_bytes(std::int64_t block) { return 2 * 3 * 4 * static_cast<std::uint64_t>(block); }

  // Creates the file (dir must exist; tag names it: "rank<r>"); block: elements per staging
  // block, a multiple of 1024.
  OffloadStore(const std::string& dir, const std::string& tag, std::int64_t block = kDefaultBlock);
  ~OffloadStore();
  OffloadStore(const OffloadStore&) = delete;
  OffloadStore& operator=(const OffloadStore&) = delete;

  // Appends a unit of decay.numel() elements (its index: the units so far): zero moments and
  // this decay mask, written as the file grows, so a caller drops each mask as it goes.
  int add(const torch::Tensor& decay);
  // f on consecutive blocks [off, off + n) of unit u (n <= block), the read of the next and
  // the write of the last overlapping it; returns when every write is done.
  void stream(int unit, const std::function<void(std::int64_t off, std::int64_t n, const Block&)>& f);
  // Unit u's moments as tensors (n_u fp32 each; tests and checkpoints).
  std::pair<torch::Tensor, torch::Tensor> moments(int unit);
  void set_moments(int unit, const torch::Tensor& m, const torch::Tensor& v);

  const std::string& path() const { return file_->path(); }
  bool direct() const { return file_->direct(); }
  std::int64_t block() const { return block_; }
  const Stats& stats() const { return stats_; }

 private:
  std::uint64_t cap(int unit) const;   // one region's bytes
  std::uint64_t base(int unit) const;  // the unit's first region's offset
  void io(bool write, void* buf, std::uint64_t bytes, std::uint64_t offset, double* seconds);
  // Writes unit's arrays from these n-element buffers: m and v (null: zeros, when decay is
  // given: a new unit) and decay (null: left as it is).
  void write_unit(int unit, const float* m, const float* v, const float* decay);

  std::unique_ptr<models::DirectFile> file_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::uint64_t> bases_;
  std::int64_t block_;
  float* slots_[2][3] = {};  // [slot][m, v, decay], 4096-aligned
  Stats stats_;
};

}  // namespace sb::fsdp
