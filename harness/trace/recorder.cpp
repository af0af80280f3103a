// Recorder::gather: every rank's comm events and memory records to rank 0, packed as bytes
// (one MPI_Gatherv) after the timed steps, so no MPI happens while a step is measured.
#include "harness/trace/recorder.h"

#include <sys/resource.h>

#include <cstring>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"

namespace sb {
namespace {

// Byte packing in host order: sender and receiver are the same binary on the same kind of
// machine (a point's ranks), and the bytes never reach a file.
class Packer {
 public:
  template <class T>
  void put(const T& v) {
    const char* p = reinterpret_cast<const char*>(&v);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  void put(const std::string& s) {
    put<std::uint64_t>(s.size());
    buf.insert(buf.end(), s.begin(), s.end());
  }
  std::vector<char> buf;
};

class Unpacker {
 public:
  Unpacker(const char* p, size_t n) : p_(p), end_(p + n) {}
  template <class T>
  void get(T& v) {
    need(sizeof(T));
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
  }
  void get(std::string& s) {
    std::uint64_t n = 0;
    get(n);
    need(n);
    s.assign(p_, n);
    p_ += n;
  }
  bool done() const { return p_ == end_; }

 private:
  void need(size_t n) {
    SB_CHECK(static_cast<size_t>(end_ - p_) >= n,
             "gathered trace records are truncated ({} bytes left, {} needed)", end_ - p_, n);
  }
  const char* p_;
  const char* end_;
};

void pack(Packer& pk, const CommEvent& e) {
  pk.put(e.step); pk.put(e.rank); pk.put(e.op); pk.put(e.group); pk.put(e.kind);
  pk.put(e.logical_bytes); pk.put(e.wire_bytes); pk.put(e.start_s); pk.put(e.duration_s);
}
void unpack(Unpacker& u, CommEvent& e) {
  u.get(e.step); u.get(e.rank); u.get(e.op); u.get(e.group); u.get(e.kind);
  u.get(e.logical_bytes); u.get(e.wire_bytes); u.get(e.start_s); u.get(e.duration_s);
}
void pack(Packer& pk, const RankMemory& m) {
  pk.put(m.rank); pk.put(m.host); pk.put(m.param_bytes); pk.put(m.grad_bytes);
  pk.put(m.optim_bytes); pk.put(m.gathered_bytes); pk.put(m.model_state_bytes);
  pk.put(m.peak_model_state_bytes); pk.put(m.peak_rss_bytes);
}
void unpack(Unpacker& u, RankMemory& m) {
  u.get(m.rank); u.get(m.host); u.get(m.param_bytes); u.get(m.grad_bytes);
  u.get(m.optim_bytes); u.get(m.gathered_bytes); u.get(m.model_state_bytes);
  u.get(m.peak_model_state_bytes); u.get(m.peak_rss_bytes);
}
}  // namespace

void Recorder::gather(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  Packer pk;
  pk.put<std::uint64_t>(comm_.size());
  for (const auto& e : comm_) pack(pk, e);
  pk.put<std::uint64_t>(memory_.size());
  for (const auto& m : memory_) pack(pk, m);
  std::vector<int> sizes;
  std::vector<char> all = gather_bytes(pk.buf, comm, &sizes);
  if (rank != 0) return;
  // Rank order: rank 0's records first, then rank 1's, ... (rank 0's own are replaced by
  // its copy in the gathered buffer).
  comm_.clear();
  memory_.clear();
  size_t off = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    Unpacker u(all.data() + off, static_cast<size_t>(sizes[r]));
    std::uint64_t n = 0;
    u.get(n);
    for (std::uint64_t i = 0; i < n; ++i) unpack(u, comm_.emplace_back());
    u.get(n);
    for (std::uint64_t i = 0; i < n; ++i) unpack(u, memory_.emplace_back());
    SB_CHECK(u.done(), "gathered trace records of rank {} have trailing bytes", r);
    off += static_cast<size_t>(sizes[r]);
  }
}

RankMemory rank_memory_now(int rank) {
  RankMemory m;
  m.rank = rank;
  m.host = host_name();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  m.peak_rss_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
  return m;
}

}  // namespace sb
