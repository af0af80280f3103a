// Encoding and checked reading of one rank file (checkpoint_file.h).
#include "workloads/fsdp/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "workloads/models/model.h"

namespace sb::fsdp::ckpt {
namespace {

constexpr char kMagic[8] = {'S', 'B', 'F', 'S', 'D', 'P', 'C', 'K'};

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& out, const std::string& s) {
  put(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}
void put_dims(std::string& out, const std::vector<std::int64_t>& d) {
  put(out, static_cast<std::uint32_t>(d.size()));
  for (auto x : d) put(out, x);
}

// Thrown by a Reader over a file's prefix (read_rank_header) that runs past the prefix.
struct PrefixTooShort {};

struct Reader {
  const std::string& buf;
  std::size_t pos = 0;
  std::string path;
  bool prefix = false;  // buf is the file's first bytes only
  template <typename T>
  T get() {
    if (prefix && pos + sizeof(T) > buf.size()) throw PrefixTooShort{};
    SB_CHECK(pos + sizeof(T) <= buf.size(), "checkpoint {} is truncated at byte {}", path, pos);
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string get_str() {
    const auto n = get<std::uint32_t>();
    if (prefix && n < 4096 && pos + n > buf.size()) throw PrefixTooShort{};
    SB_CHECK(n < 4096 && pos + n <= buf.size(), "checkpoint {} is corrupt at byte {}", path, pos);
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
  std::vector<std::int64_t> get_dims() {
    const auto n = get<std::uint32_t>();
    SB_CHECK(n <= 8, "checkpoint {} is corrupt at byte {}: {} dimensions", path, pos, n);
    std::vector<std::int64_t> d;
    for (std::uint32_t i = 0; i < n; ++i) d.push_back(get<std::int64_t>());
    return d;
  }
};

void put_layout(std::string& out, const UnitLayout& l) {
  put(out, l.whole);
  put(out, static_cast<std::uint8_t>(l.pp_copy));
  put(out, l.master_begin);
  put(out, l.master_n);
  put(out, static_cast<std::uint32_t>(l.params.size()));
  for (const auto& p : l.params) {
    put_str(out, p.name);
    put(out, p.split);
    put(out, p.tp_rank);
    put(out, p.tp_size);
    put_dims(out, p.shape);
    put_dims(out, p.full_shape);
  }
}

UnitLayout get_layout(Reader& rd) {
  UnitLayout l;
  l.whole = rd.get<std::int32_t>();
  l.pp_copy = rd.get<std::uint8_t>() != 0;
  l.master_begin = rd.get<std::int64_t>();
  l.master_n = rd.get<std::int64_t>();
  const auto n = rd.get<std::uint32_t>();
  SB_CHECK(n < 100000, "checkpoint {} is corrupt: a unit of {} parameters", rd.path, n);
  for (std::uint32_t i = 0; i < n; ++i) {
    ParamLayout p;
    p.name = rd.get_str();
    p.split = rd.get<std::int32_t>();
    p.tp_rank = rd.get<std::int32_t>();
    p.tp_size = rd.get<std::int32_t>();
    p.shape = rd.get_dims();
    p.full_shape = rd.get_dims();
    l.params.push_back(std::move(p));
  }
  return l;
}

}  // namespace

models::ParamSpec ParamLayout::spec() const {
  models::ParamSpec s;
  s.name = name;
  s.shape = shape;
  s.tp = static_cast<models::TpSplit>(split);
  s.tp_rank = tp_rank;
  s.tp_size = tp_size;
  s.full_shape = full_shape;
  return s;
}

std::string encode_payload(const std::vector<const torch::Tensor*>& tensors,
                           const comm::StateDict& state) {
  std::string p;
  for (const torch::Tensor* t : tensors)
    p.append(static_cast<const char*>(t->data_ptr()), t->nbytes());
  for (const auto& [name, t0] : state) {
    const torch::Tensor t = t0.contiguous();
    put_str(p, name);
    put(p, static_cast<std::int32_t>(t.scalar_type()));
    put(p, static_cast<std::uint32_t>(t.dim()));
    for (auto d : t.sizes()) put(p, static_cast<std::int64_t>(d));
    put(p, static_cast<std::uint64_t>(t.nbytes()));
    if (t.nbytes() > 0) p.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  }
  return p;
}

namespace {
// The header's bytes up to the checksum (h.payload_bytes as given).
std::string encode_header(const Header& h) {
  std::string out(kMagic, sizeof kMagic);
  put(out, h.version);
  put(out, h.world);
  put(out, h.group);
  put(out, h.rank);
  put(out, h.step);
  put_str(out, h.strategy);
  put_str(out, h.dtype);
  put_str(out, h.compression);
  put(out, static_cast<std::uint32_t>(h.units.size()));
  for (const auto& u : h.units) put(out, u);
  for (const auto& l : h.layouts) put_layout(out, l);
  put(out, h.n_state);
  put(out, h.payload_bytes);
  return out;
}
}  // namespace

std::string encode_file(Header& h, const std::string& payload) {
  h.payload_bytes = payload.size();
  std::string out = encode_header(h);
  h.checksum = fnv1a(payload.data(), payload.size(), fnv1a(out.data(), out.size()));
  put(out, h.checksum);
  return out + payload;
}

std::uint64_t write_rank_file(const std::string& path, Header& h, const std::vector<PayloadPart>& parts,
                              const comm::StateDict& state) {
  const std::string tail = encode_payload({}, state);  // the state entries
  std::vector<PayloadPart> all = parts;
  all.push_back({tail.size(), [&](std::uint64_t off, std::uint64_t n, char* buf) {
                   std::memcpy(buf, tail.data() + off, n);
                 }});
  h.payload_bytes = 0;
  for (const auto& p : all) h.payload_bytes += p.bytes;
  const std::string head = encode_header(h);
  std::uint64_t sum = fnv1a(head.data(), head.size());
  std::size_t part = 0;
  std::uint64_t off = 0;
  // Each piece starts at the buffer's start, so a part's pieces stay aligned for O_DIRECT.
  const auto next = [&](char* buf, std::size_t cap) -> std::size_t {
    while (part < all.size() && off == all[part].bytes) ++part, off = 0;
    if (part == all.size()) return 0;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(cap, all[part].bytes - off));
    all[part].io(off, n, buf);
    sum = fnv1a(buf, n, sum);
    off += n;
    return n;
  };
  return write_durably_streamed(path, head.size() + sizeof(std::uint64_t), next, [&] {
    h.checksum = sum;
    std::string out = head;
    put(out, h.checksum);
    return out;
  });
}

std::size_t RankFile::state_pos() const {
  return payload_pos + (tensors_elided ? 0 : static_cast<std::size_t>(tensor_bytes(h)));
}

namespace {

// The header of buf (a whole file, or its first bytes with rd.prefix); rd.pos ends at the
// payload's first byte. Returns the checksum of the header bytes (the payload's continues it).
std::uint64_t parse_header(Reader& rd, Header& h) {
  const std::string& buf = rd.buf;
  const std::string& path = rd.path;
  if (rd.prefix && buf.size() < sizeof kMagic) throw PrefixTooShort{};
  SB_CHECK(buf.size() >= sizeof kMagic && std::memcmp(buf.data(), kMagic, sizeof kMagic) == 0,
           "{} is not a shardbench FSDP checkpoint (bad magic number)", path);
  rd.pos = sizeof kMagic;
  h.version = rd.get<std::uint32_t>();
  SB_CHECK(h.version == kVersion, "{} has format version {}, this build reads version {} (a "
           "version-2 set has no shard layout: resume it with the build that wrote it, or "
           "rerun from the start)", path, h.version, kVersion);
  h.world = rd.get<std::int32_t>();
  h.group = rd.get<std::int32_t>();
  h.rank = rd.get<std::int32_t>();
  h.step = rd.get<std::int64_t>();
  h.strategy = rd.get_str();
  h.dtype = rd.get_str();
  h.compression = rd.get_str();
  const auto nu = rd.get<std::uint32_t>();
  SB_CHECK(nu < 100000, "checkpoint {} is corrupt: {} units", path, nu);
  for (std::uint32_t u = 0; u < nu; ++u) h.units.push_back(rd.get<UnitHeader>());
  for (std::uint32_t u = 0; u < nu; ++u) h.layouts.push_back(get_layout(rd));
  h.n_state = rd.get<std::uint32_t>();
  h.payload_bytes = rd.get<std::uint64_t>();
  const std::uint64_t head_sum = fnv1a(buf.data(), rd.pos);
  h.checksum = rd.get<std::uint64_t>();
  return head_sum;
}

}  // namespace

namespace {
struct Head {
  Header h;
  std::string bytes;         // the file's bytes before the payload
  std::uint64_t sum = 0;     // their checksum before the checksum field (parse_header's)
};

Head read_head(const std::string& path, const std::string& missing_hint) {
  std::ifstream f(path, std::ios::binary);
  SB_CHECK(f.good(), "no checkpoint file {} ({})", path, missing_hint);
  // Prefixes of 64 KiB, 256 KiB, ... until the header fits (a header is about 100 bytes a
  // parameter tensor), or the whole file.
  for (std::size_t n = 64 << 10;; n *= 4) {
    std::string buf(n, '\0');
    f.clear();
    f.seekg(0);
    f.read(buf.data(), static_cast<std::streamsize>(n));
    buf.resize(static_cast<std::size_t>(f.gcount()));
    const bool whole = buf.size() < n;
    Reader rd{buf, 0, path, /*prefix=*/!whole};
    Head out;
    try {
      out.sum = parse_header(rd, out.h);
      out.bytes = buf.substr(0, rd.pos);
      return out;
    } catch (const PrefixTooShort&) {
    }
  }
}

}  // namespace

ReadFile::ReadFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY)) {
  SB_CHECK(fd_ >= 0, "cannot open checkpoint {}: {}", path, std::strerror(errno));
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadFile& ReadFile::operator=(ReadFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

// EINTR and short reads retried.
void read_file_at(int fd, char* p, std::size_t n, std::uint64_t at, const std::string& path) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t k = ::pread(fd, p + done, n - done, static_cast<off_t>(at + done));
    if (k < 0 && errno == EINTR) continue;
    SB_CHECK(k > 0, "checkpoint {}: reading {} bytes at {}: {}", path, n, at,
             k == 0 ? "the file ends" : std::strerror(errno));
    done += static_cast<std::size_t>(k);
  }
}

namespace {
// A RankFile of the header alone (its bytes taken from head).
RankFile header_only(const std::string& path, Head& head) {
  RankFile rf;
  rf.path = path;
  rf.h = head.h;
  rf.buf = std::move(head.bytes);
  rf.payload_pos = rf.buf.size();
  rf.tensors_elided = true;
  return rf;
}
}  // namespace

Header read_rank_header(const std::string& path, const std::string& missing_hint) {
  return read_head(path, missing_hint).h;
}

RankFile read_rank_head(const std::string& path, const std::string& missing_hint) {
  Head head = read_head(path, missing_hint);
  return header_only(path, head);
}

std::uint64_t tensor_bytes(const Header& h) {
  std::uint64_t n = 0;
  for (std::size_t u = 0; u < h.units.size() && u < h.layouts.size(); ++u)
    n += static_cast<std::uint64_t>(h.layouts[u].master_n + 2 * h.units[u].opt_n) * 4;
  return n;
}

RankFile read_rank_state(const std::string& path, const std::string& missing_hint) {
  Head head = read_head(path, missing_hint);
  RankFile rf = header_only(path, head);
  const std::uint64_t tensors = tensor_bytes(rf.h);
  SB_CHECK(tensors <= rf.h.payload_bytes, "checkpoint {}: {} payload bytes, its units' tensors take {}", path,
           rf.h.payload_bytes, tensors);
  const ReadFile file(path);
  const int fd = file.fd();
  std::string tail(rf.h.payload_bytes - tensors, '\0');
  read_file_at(fd, tail.data(), tail.size(), rf.payload_pos + tensors, path);
  rf.buf += tail;
  return rf;
}

namespace {
// read_rank_file_streamed from a header already read (head).
RankFile stream_payload(const std::string& path, Head& head, const std::vector<PayloadPart>& parts) {
  RankFile rf = header_only(path, head);
  const ReadFile file(path);
  const int fd = file.fd();
  struct stat st{};
  SB_CHECK(::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == rf.payload_pos + rf.h.payload_bytes,
           "checkpoint {} is truncated: {} payload bytes expected, {} present", path,
           rf.h.payload_bytes, static_cast<std::uint64_t>(st.st_size) - rf.payload_pos);
  std::uint64_t tensors = 0;
  for (const auto& p : parts) tensors += p.bytes;
  SB_CHECK(tensors <= rf.h.payload_bytes, "checkpoint {}: {} payload bytes, its units' tensors "
           "take {}", path, rf.h.payload_bytes, tensors);
  const auto buf = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(4096, kStreamPiece)), std::free);
  SB_CHECK(buf != nullptr, "cannot allocate the {}-byte buffer to read {}", kStreamPiece, path);
  std::uint64_t sum = head.sum, at = rf.payload_pos;
  for (const auto& p : parts)
    for (std::uint64_t off = 0; off < p.bytes; off += kStreamPiece) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kStreamPiece, p.bytes - off));
      read_file_at(fd, buf.get(), n, at, path);
      ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
      sum = fnv1a(buf.get(), n, sum);
      p.io(off, n, buf.get());
      at += n;
      sb::heartbeat::tick();
    }
  std::string tail(rf.h.payload_bytes - tensors, '\0');
  read_file_at(fd, tail.data(), tail.size(), at, path);
  sum = fnv1a(tail.data(), tail.size(), sum);
  SB_CHECK(sum == rf.h.checksum, "checkpoint {} is corrupt: checksum {:016x}, header says {:016x}",
           path, sum, rf.h.checksum);
  rf.buf += tail;
  return rf;
}
}  // namespace

RankFile verify_rank_file(const std::string& path, const std::string& missing_hint) {
  Head head = read_head(path, missing_hint);  // once: its units' sizes say how much to stream
  const std::uint64_t tensors = tensor_bytes(head.h);
  return stream_payload(path, head, {{tensors, [](std::uint64_t, std::uint64_t, char*) {}}});
}

RankFile read_rank_file_streamed(const std::string& path, const std::string& missing_hint,
                                 const std::vector<PayloadPart>& parts) {
  Head head = read_head(path, missing_hint);
  return stream_payload(path, head, parts);
}

comm::StateDict decode_state(const RankFile& rf) {
  comm::StateDict s;
  Reader rd{rf.buf, rf.state_pos(), rf.path};
  for (std::uint32_t i = 0; i < rf.h.n_state; ++i) {
    const std::string name = rd.get_str();
    const auto type = static_cast<torch::ScalarType>(rd.get<std::int32_t>());
    const auto dims = rd.get<std::uint32_t>();
    SB_CHECK((type == torch::kFloat || type == torch::kDouble || type == torch::kByte ||
              type == torch::kLong) && dims <= 8,
             "checkpoint {}: state entry \"{}\" has an unknown type or shape", rf.path, name);
    std::vector<std::int64_t> shape;
    for (std::uint32_t d = 0; d < dims; ++d) shape.push_back(rd.get<std::int64_t>());
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
    const auto n = rd.get<std::uint64_t>();
    SB_CHECK(n == t.nbytes() && rd.pos + n <= rf.buf.size(), "checkpoint {}: compression state "
             "\"{}\" is corrupt", rf.path, name);
    if (n > 0) std::memcpy(t.data_ptr(), rf.buf.data() + rd.pos, n);
    rd.pos += n;
    s[name] = t;
  }
  SB_CHECK(rd.pos == rf.buf.size(), "checkpoint {}: {} bytes after the compression state",
           rf.path, rf.buf.size() - rd.pos);
  return s;
}

void check_in_set(const RankFile& rf, const Marker& m, int rank, const std::string& set) {
  const Header& h = rf.h;
  const FileEntry& e = m.files.at(rank);
  const bool listed = h.rank == rank && h.step == m.step && h.world == m.world &&
                      h.group == m.group && h.strategy == m.strategy && h.dtype == m.dtype &&
                      h.compression == m.compression && h.checksum == e.checksum &&
                      rf.payload_pos + h.payload_bytes == e.bytes;
  if (!listed && rf.tensors_elided) {
    // Only the header was read: an edited or damaged file says so (its checksum) before it is
    // called another save's. The units' tensors stream past without being kept.
    verify_rank_file(rf.path, "the commit marker lists it");
  }
  if (!listed)
    SB_FAIL("{} is not the rank-{} file the commit marker of {} lists: the file is rank {} of "
            "step {} ({} ranks, {}, checksum {:016x}), the marker lists step {} ({} ranks, {}, "
            "checksum {:016x}); the set mixes files from different saves. Delete {} (an older "
            "complete set, if any, is then used) or rerun from the start", rf.path, rank, set,
            h.rank, h.step, h.world, h.strategy, h.checksum, m.step, m.world, m.strategy,
            e.checksum, set);
}

}  // namespace sb::fsdp::ckpt
