// The FPDT key/value chunk store (kv_store.h).
#include "workloads/models/kv_store.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "workloads/models/attention.h"
#include "workloads/models/direct_file.h"

namespace sb::models {
namespace {

using torch::Tensor;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::mutex g_stats_mu;
KvOffloadStats g_stats;
void count(bool write, std::uint64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  (write ? g_stats.written_bytes : g_stats.read_bytes) += bytes;
  (write ? g_stats.write_s : g_stats.read_s) += seconds;
}
void count_wait(double seconds) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  g_stats.wait_s += seconds;
}

}  // namespace

KvStore::KvStore(const std::string& mode, const std::string& dir) : mode_(mode) {
  SB_CHECK(mode_ == "none" || mode_ == "host" || mode_ == "disk",
           "kv_offload = \"{}\": use none, host or disk", mode_);
  if (mode_ == "disk") open_file(dir);
  std::lock_guard<std::mutex> lock(g_stats_mu);
  ++g_stats.live_stores;
}

KvStore::~KvStore() {
  if (pending_.valid()) pending_.wait();
  std::lock_guard<std::mutex> lock(g_stats_mu);
  --g_stats.live_stores;
}

void KvStore::put(const Tensor& k, const Tensor& v) {
  Entry e{k.sizes().vec(), k.options(), 0, 0, v.defined(), {}, {}};
  if (mode_ == "none") {
    e.k = k, e.v = v;
  } else if (mode_ == "host") {
    const auto host = torch::TensorOptions().dtype(k.scalar_type()).device(torch::kCPU).pinned_memory(k.is_cuda());
    e.k = torch::empty(k.sizes(), host).copy_(k);
    if (e.pair) e.v = torch::empty(v.sizes(), host).copy_(v);
  } else {
    write(k, v, e);
  }
  entries_.push_back(std::move(e));
}

std::future<KvStore::Chunk> KvStore::fetch(std::int64_t j) {
  const Entry& e = entries_.at(static_cast<std::size_t>(j));
  if (mode_ != "disk") {
    std::promise<Chunk> ready;
    ready.set_value({e.k.to(e.opts.device()), e.pair ? e.v.to(e.opts.device()) : Tensor()});
    return ready.get_future();
  }
  if (pending_.valid()) wait(pending_);  // the last write lands before any read
  return std::async(std::launch::async, [this, e] { return read(e); });
}

KvStore::Chunk KvStore::take(std::future<Chunk>& f) {
  const double t0 = now();
  Chunk c = f.get();
  count_wait(now() - t0);
  return c;
}

void KvStore::open_file(std::string dir) {
  if (dir.empty()) dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  static std::atomic<int> serial{0};
  // Gone from the folder at once; the space is freed when the store (the node) goes.
  file_ = std::make_unique<DirectFile>(fmt::format("{}/shardbench-kv-{}-{}.bin", dir, ::getpid(), serial++),
                                       "kv_offload = \"disk\"",
                                       "set offload_dir to a writable folder with room for every stored "
                                       "key, value (and chunked block input) element", /*unlink_now=*/true);
}

void KvStore::wait(std::future<void>& f) {
  const double t0 = now();
  f.get();  // rethrows an I/O error
  count_wait(now() - t0);
}

void KvStore::io(bool write, char* p, std::uint64_t bytes, std::uint64_t offset) const {
  const double t0 = now();
  if (write)
    file_->write(p, bytes, offset);
  else
    file_->read(p, bytes, offset);
  count(write, bytes, now() - t0);
}

// k and v copied side by side into an aligned buffer (on the caller's thread: the copy is
// LibTorch's), then written on the I/O thread once the previous write is done.
void KvStore::write(const Tensor& k, const Tensor& v, Entry& e) {
  e.bytes = static_cast<std::uint64_t>(k.numel() * k.element_size());
  const std::uint64_t cap = DirectFile::round_up((e.pair ? 2 : 1) * e.bytes);
  auto buf = DirectFile::aligned(cap);
  const auto cpu = torch::TensorOptions().dtype(k.scalar_type());
  torch::from_blob(buf.get(), k.sizes(), cpu).copy_(k);
  if (e.pair) torch::from_blob(buf.get() + e.bytes, v.sizes(), cpu).copy_(v);
  e.offset = end_;
  end_ += cap;
  if (pending_.valid()) wait(pending_);
  pending_ = std::async(std::launch::async, [this, buf, cap, off = e.offset] { io(true, buf.get(), cap, off); });
}

KvStore::Chunk KvStore::read(const Entry& e) const {
  const std::uint64_t cap = DirectFile::round_up((e.pair ? 2 : 1) * e.bytes);
  auto buf = DirectFile::aligned(cap);
  io(false, buf.get(), cap, e.offset);
  const auto cpu = torch::TensorOptions().dtype(e.opts.dtype());
  auto k = torch::from_blob(buf.get(), e.shape, [buf](void*) {}, cpu);
  if (!e.pair) return {k.to(e.opts.device()), Tensor()};
  auto v = torch::from_blob(buf.get() + e.bytes, e.shape, [buf](void*) {}, cpu);
  return {k.to(e.opts.device()), v.to(e.opts.device())};
}

Tensor hold(std::shared_ptr<KvStore> s) {
  auto* owner = new std::shared_ptr<KvStore>(std::move(s));
  return torch::from_blob(owner, {1}, [](void* p) { delete static_cast<std::shared_ptr<KvStore>*>(p); },
                          torch::kUInt8);
}
KvStore& held(const Tensor& t) { return **static_cast<std::shared_ptr<KvStore>*>(t.data_ptr()); }

KvOffloadStats kv_offload_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_stats;
}

}  // namespace sb::models
