// Recorder::gather: every rank's records of the types gathered from every rank (comm events,
// memory) to rank 0, packed as bytes (one MPI_Gatherv) after the timed steps, so no MPI
// happens while a step is measured. The packing is generated from the records' Tables.
#include "harness/trace/recorder.h"

#include <sys/resource.h>

#include <cstring>
#include <type_traits>

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

// One record, field by field in table order (the same binary packs and unpacks).
template <class Rec>
void pack(Packer& pk, const Rec& r) {
  for_each_field<Rec>([&](const auto& f) { pk.put(r.*f.member); });
}
template <class Rec>
void unpack(Unpacker& u, Rec& r) {
  for_each_field<Rec>([&](const auto& f) { u.get(r.*f.member); });
}

// Calls f(rows) with the vector of each record type gathered from every rank, in the order
// of RecordTypes (packing and unpacking walk them alike).
template <class Tables, class F>
void for_each_gathered(Tables& tables, F&& f) {
  for_each_record(RecordTypes{}, [&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    if constexpr (Table<Rec>::from_every_rank) f(std::get<std::vector<Rec>>(tables));
  });
}
}  // namespace

void Recorder::gather(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  Packer pk;
  for_each_gathered(tables_, [&](const auto& rows) {
    pk.put<std::uint64_t>(rows.size());
    for (const auto& r : rows) pack(pk, r);
  });
  std::vector<int> sizes;
  std::vector<char> all = gather_bytes(pk.buf, comm, &sizes);
  if (rank != 0) return;
  // Rank order: rank 0's records first, then rank 1's, ... (rank 0's own are replaced by
  // its copy in the gathered buffer).
  for_each_gathered(tables_, [](auto& rows) { rows.clear(); });
  size_t off = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    Unpacker u(all.data() + off, static_cast<size_t>(sizes[r]));
    for_each_gathered(tables_, [&u](auto& rows) {
      std::uint64_t n = 0;
      u.get(n);
      for (std::uint64_t i = 0; i < n; ++i) unpack(u, rows.emplace_back());
    });
    SB_CHECK(u.done(), "gathered trace records of rank {} have trailing bytes", r);
    off += static_cast<size_t>(sizes[r]);
  }
}

RankMemory rank_memory_now(int rank, const Mesh& mesh) {
  RankMemory m;
  m.rank = rank;
  m.host = host_name();
  const auto c = mesh.coords(rank);
  m.mesh_pp = c[int(MeshDim::pp)], m.mesh_dp_replicate = c[int(MeshDim::dp_replicate)];
  m.mesh_dp_shard = c[int(MeshDim::dp_shard)], m.mesh_sp = c[int(MeshDim::sp)];
  m.mesh_tp = c[int(MeshDim::tp)];
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  m.peak_rss_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
  return m;
}

}  // namespace sb
