// The optimizer state's file and its streaming (offload_store.h).
#include "workloads/fsdp/offload_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

using models::DirectFile;
constexpr std::uint64_t kAlign = DirectFile::kAlign;
std::uint64_t round_up(std::uint64_t n) { return DirectFile::round_up(n); }

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string master_on_disk_problem(const std::string& offload_optimizer, const std::string& strategy) {
  if (offload_optimizer != "disk" && offload_optimizer != "auto")
    return fmt::format("offload_param = \"disk\" keeps the master weights in the optimizer state's "
                       "file, and offload_optimizer = \"{}\" makes none: set offload_optimizer = "
                       "\"disk\" or offload_param = \"none\"", offload_optimizer);
  if (strategy == "auto" || strategy_info(strategy).layout.params_sharded) return "";
  return fmt::format("offload_param = \"disk\" reads each unit's master shard from disk as it "
                     "gathers it, and strategy '{}' does not shard the parameters (nothing is "
                     "gathered): use full_shard, shard_grad_op or hybrid_shard, or set "
                     "offload_param = \"none\"", strategy);
}

OffloadStore::OffloadStore(const std::string& dir, const std::string& tag, std::int64_t block,
                           bool master)
    : block_(block), master_(master) {
  SB_CHECK(block_ > 0 && block_ % 1024 == 0, "offload block of {} elements: a positive multiple "
           "of 1024 (O_DIRECT's 4096-byte alignment)", block_);
  file_ = std::make_unique<DirectFile>(
      fmt::format("{}/shardbench-optim-{}-{}.bin", dir.empty() ? "." : dir, tag, ::getpid()),
      "offload_optimizer = \"disk\"",
      "set offload_dir to a writable folder with room for the optimizer state",
      /*unlink_now=*/true);  // a killed rank (MPI_Abort runs no destructor) leaves no file behind
  for (auto& slot : slots_)
    for (int i = 0; i < arrays(); ++i) {
      float*& a = slot[i];
      void* p = nullptr;
      SB_CHECK(::posix_memalign(&p, kAlign, 4 * static_cast<std::size_t>(block_)) == 0,
               "offload: cannot allocate a {}-byte staging buffer", 4 * block_);
      a = static_cast<float*>(p);
    }
}

OffloadStore::~OffloadStore() {
  for (auto& slot : slots_)
    for (auto* a : slot) std::free(a);
}

std::uint64_t OffloadStore::cap(int unit) const {
  return round_up(4 * static_cast<std::uint64_t>(sizes_.at(static_cast<std::size_t>(unit))));
}
std::uint64_t OffloadStore::base(int unit) const { return bases_.at(static_cast<std::size_t>(unit)); }
std::uint64_t OffloadStore::at(int unit, int array, std::int64_t off) const {
  return base(unit) + static_cast<std::uint64_t>(array) * cap(unit) + 4 * static_cast<std::uint64_t>(off);
}

void OffloadStore::io(bool write, void* buf, std::uint64_t bytes, std::uint64_t offset, double* seconds) {
  const double t0 = now();
  if (write)
    file_->write(buf, bytes, offset);
  else
    file_->read(buf, bytes, offset);
  *seconds += now() - t0;
}

int OffloadStore::add(const torch::Tensor& decay, const torch::Tensor& master) {
  const int unit = static_cast<int>(sizes_.size());
  const std::int64_t n = decay.numel();
  SB_CHECK(master.defined() == master_ && (!master_ || master.numel() == n),
           "offload: unit {} of {} elements given {} master weights (the store {} them)", unit, n,
           master.defined() ? master.numel() : 0, master_ ? "holds" : "does not hold");
  const std::uint64_t at0 = bases_.empty() ? 0 : bases_.back() + arrays() * cap(unit - 1);
  sizes_.push_back(n);
  bases_.push_back(at0);
  // Reserved now, so a full disk fails here, at start, and not in the middle of a step.
  file_->reserve(at0 + arrays() * cap(unit));
  torch::Tensor pc = master_ ? master.to(torch::kCPU, torch::kFloat32).contiguous() : torch::Tensor();
  write_unit(unit, nullptr, nullptr, decay.to(torch::kCPU, torch::kFloat32).contiguous().data_ptr<float>(),
             master_ ? pc.data_ptr<float>() : nullptr);
  return unit;
}

void OffloadStore::stream(int unit, const std::function<void(std::int64_t, std::int64_t, const Block&)>& f) {
  const auto n = sizes_.at(static_cast<std::size_t>(unit));
  const std::int64_t blocks = (n + block_ - 1) / block_;
  const auto bytes_of = [&](std::int64_t i) {
    return round_up(4 * static_cast<std::uint64_t>(std::min(block_, n - i * block_)));
  };
  // A block's read (m, v, decay[, p]) or write (m, v[, p]) on its own thread; its seconds
  // land in secs[write][slot], read after .get().
  const int reads_n = arrays(), writes_n = arrays() - 1;
  double secs[2][2] = {};
  const auto transfer = [&](std::int64_t i, bool write) {
    const int s = static_cast<int>(i % 2);
    double& t = secs[write][s];
    t = 0;
    return std::async(std::launch::async, [this, unit, i, s, write, &t, bytes = bytes_of(i)] {
      for (int a = 0; a < arrays(); ++a)
        if (!(write && a == 2))  // the decay mask is only read
          io(write, slots_[s][a], bytes, at(unit, a, i * block_), &t);
    });
  };
  const auto wait = [&](std::future<void>& fut) {
    if (!fut.valid()) return;
    const double t0 = now();
    fut.get();  // rethrows the I/O thread's error
    stats_.wait_s += now() - t0;
  };
  std::future<void> reads[2], writes[2];
  if (blocks > 0) reads[0] = transfer(0, false);
  for (std::int64_t i = 0; i < blocks; ++i) {
    const int s = static_cast<int>(i % 2), o = 1 - s;
    wait(reads[s]);
    stats_.read_bytes += reads_n * bytes_of(i), stats_.read_s += secs[0][s];
    if (i + 1 < blocks) {  // the other slot is free once block i - 1's write is done
      wait(writes[o]);
      if (i >= 1) stats_.written_bytes += writes_n * bytes_of(i - 1), stats_.write_s += secs[1][o];
      reads[o] = transfer(i + 1, false);
    }
    const std::int64_t off = i * block_;
    f(off, std::min(block_, n - off), Block{slots_[s][0], slots_[s][1], slots_[s][2], slots_[s][3]});
    writes[s] = transfer(i, true);
  }
  for (std::int64_t i = std::max<std::int64_t>(0, blocks - 2); i < blocks; ++i) {
    const int s = static_cast<int>(i % 2);
    if (!writes[s].valid()) continue;
    wait(writes[s]);
    stats_.written_bytes += writes_n * bytes_of(i), stats_.write_s += secs[1][s];
  }
}

void OffloadStore::set_moments(int unit, const torch::Tensor& m, const torch::Tensor& v) {
  const auto n = sizes_.at(static_cast<std::size_t>(unit));
  SB_CHECK(m.numel() == n && v.numel() == n, "offload: unit {} holds {} moments, got {} and {}",
           unit, n, m.numel(), v.numel());
  const auto mc = m.to(torch::kCPU, torch::kFloat32).contiguous(), vc = v.to(torch::kCPU, torch::kFloat32).contiguous();
  write_unit(unit, mc.data_ptr<float>(), vc.data_ptr<float>(), nullptr, nullptr);
}

torch::Tensor OffloadStore::read_master(int unit) {
  SB_CHECK(master_, "offload: read_master on a store without the master weights");
  const auto n = sizes_.at(static_cast<std::size_t>(unit));
  const std::uint64_t bytes = cap(unit);
  // Over-allocated by kAlign so an aligned start exists inside; the view keeps it alive.
  auto buf = torch::empty({static_cast<std::int64_t>(master_read_bytes(n) / 4)});
  const auto addr = reinterpret_cast<std::uintptr_t>(buf.data_ptr<float>());
  const std::int64_t shift = static_cast<std::int64_t>((kAlign - addr % kAlign) % kAlign / 4);
  auto p = buf.narrow(0, shift, n);
  const double t0 = now();
  file_->read(p.data_ptr<float>(), bytes, at(unit, kP, 0));
  const std::lock_guard<std::mutex> lock(param_stats_mu_);
  stats_.param_read_s += now() - t0;
  stats_.param_read_bytes += bytes;
  return p;
}

namespace {
void check_range(int unit, int array, std::int64_t off, std::int64_t n, std::int64_t size, int arrays) {
  SB_CHECK(array >= 0 && array < arrays && array != 2 && off >= 0 && off % 1024 == 0 && n >= 0 &&
               off + n <= size,
           "offload: unit {} array {} elements [{}, {}) of {} (array 0, 1 or 3 the store holds; "
           "off a multiple of 1024)", unit, array, off, off + n, size);
}
}  // namespace

void OffloadStore::read_array(int unit, int array, std::int64_t off, std::int64_t n, void* buf) {
  check_range(unit, array, off, n, size(unit), arrays());
  if (n == 0) return;
  double s = 0;
  io(false, buf, round_up(4 * static_cast<std::uint64_t>(n)), at(unit, array, off), &s);
}

void OffloadStore::write_array(int unit, int array, std::int64_t off, std::int64_t n, const void* buf) {
  check_range(unit, array, off, n, size(unit), arrays());
  if (n == 0) return;
  double s = 0;
  io(true, const_cast<void*>(buf), round_up(4 * static_cast<std::uint64_t>(n)), at(unit, array, off), &s);
}

void OffloadStore::set_master(int unit, const torch::Tensor& p) {
  const auto n = sizes_.at(static_cast<std::size_t>(unit));
  SB_CHECK(master_ && p.numel() == n, "offload: unit {} holds {} master weights{}, got {}", unit, n,
           master_ ? "" : " (none: the store does not hold the master)", p.numel());
  const auto pc = p.to(torch::kCPU, torch::kFloat32).contiguous();
  write_unit(unit, nullptr, nullptr, nullptr, pc.data_ptr<float>());
}

void OffloadStore::write_unit(int unit, const float* m, const float* v, const float* decay, const float* p) {
  const auto n = sizes_.at(static_cast<std::size_t>(unit));
  for (std::int64_t off = 0; off < n; off += block_) {
    const std::int64_t k = std::min(block_, n - off);
    const std::uint64_t bytes = round_up(4 * static_cast<std::uint64_t>(k));
    const float* src[4] = {m, v, decay, p};
    for (int a = 0; a < arrays(); ++a) {
      const bool written = a >= 2 ? src[a] != nullptr : (src[a] != nullptr || decay != nullptr);
      if (!written) continue;
      // Zeros where no values are given (a new unit's moments) and in the aligned tail.
      std::memset(slots_[0][a], 0, bytes);
      if (src[a]) std::memcpy(slots_[0][a], src[a] + off, 4 * static_cast<std::size_t>(k));
      double s = 0;
      io(true, slots_[0][a], bytes, at(unit, a, off), &s);
    }
  }
}

}  // namespace sb::fsdp
