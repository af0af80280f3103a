// The key/value chunk store of FPDT (docs/FSDP.md "FPDT"): one attention call's (or one
// chunked block's) key/value chunks, kept from its forward until its backward in memory
// ("none"), CPU memory ("host", pinned for a GPU run) or an O_DIRECT file under offload_dir
// ("disk", unlinked at once: its space is freed with the store). On disk a chunk's write runs
// on an I/O thread while the caller computes the next one, and a read is started ahead of its
// use. The stores of a process count what they moved (kv_offload_stats, attention.h).
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace sb::models {

class DirectFile;

class KvStore {
 public:
  // k, v: (B, H, n, Dh); or a chunked block's input rows (B n, d) and an undefined v.
  using Chunk = std::pair<torch::Tensor, torch::Tensor>;

  KvStore(const std::string& mode, const std::string& dir);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Appends the next chunk; on disk its write overlaps what the caller computes next. v may be
  // undefined: a single tensor (a chunked block's input), given back with an undefined v.
  void put(const torch::Tensor& k, const torch::Tensor& v);
  std::int64_t size() const { return static_cast<std::int64_t>(entries_.size()); }
  // Starts bringing chunk j back (disk: read on an I/O thread); take() on the result waits.
  std::future<Chunk> fetch(std::int64_t j);
  Chunk take(std::future<Chunk>& f);

 private:
  struct Entry {
    std::vector<std::int64_t> shape;
    torch::TensorOptions opts;
    std::uint64_t offset = 0, bytes = 0;  // disk: where k then v start, and k's bytes
    bool pair = true;                     // v stored beside k
    torch::Tensor k, v;                   // none, host
  };
  void open_file(std::string dir);
  void wait(std::future<void>& f);
  void io(bool write, char* p, std::uint64_t bytes, std::uint64_t offset) const;
  void write(const torch::Tensor& k, const torch::Tensor& v, Entry& e);
  Chunk read(const Entry& e) const;

  std::string mode_;
  std::unique_ptr<DirectFile> file_;  // disk
  std::uint64_t end_ = 0;
  std::vector<Entry> entries_;
  std::future<void> pending_;  // the write in flight
};

// A store owned by a tensor, so that an autograd context's saved_data frees it: its backward
// erases it when done (its chunks, host memory or file, go block by block), and a graph
// dropped without backward frees it with the node. held() is the store again.
torch::Tensor hold(std::shared_ptr<KvStore> s);
KvStore& held(const torch::Tensor& t);

}  // namespace sb::models
