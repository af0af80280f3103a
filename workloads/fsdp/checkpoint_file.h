// One rank file of a checkpoint set (private to workloads/fsdp: checkpoint.cpp,
// checkpoint_reshard.cpp). Byte layout, in this order: magic, version, world, group, rank, step
// (at byte 24), strategy, dtype, compression, unit count, units (UnitHeader each), the units'
// shard layouts (UnitLayout each), state entry count, payload bytes, checksum (FNV-1a of every
// byte before it, continued over the payload), payload. The payload is, per unit, the fp32
// master slice and the two Adam moments (raw), then the compression and engine state entries
// (name, dtype, rank, dims, byte count, bytes).
//
// The shard layout makes a file self-describing (torch.distributed.checkpoint's idea): for
// each unit, which unit of the whole model it is and which elements of its flat buffer the
// file holds; for each parameter, its Hugging Face name, its tensor-parallel block and the
// whole tensor's shape. That is enough to assemble the logical tensors from any set of files
// without the model that wrote them, and so to resume on another mesh (checkpoint_reshard.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/compressor.h"  // comm::StateDict
#include "workloads/fsdp/checkpoint_set.h"

namespace sb::models {
struct ParamSpec;
}

namespace sb::fsdp::ckpt {

constexpr std::uint32_t kVersion = 3;  // 3: shard layouts (resharding); 2: checksummed header

struct UnitHeader {
  std::int64_t numel = 0, padded = 0, size = 0, opt_off = 0, opt_n = 0;
  bool operator==(const UnitHeader& o) const {
    return numel == o.numel && padded == o.padded && size == o.size && opt_off == o.opt_off &&
           opt_n == o.opt_n;
  }
  bool operator!=(const UnitHeader& o) const { return !(*this == o); }
};

// A parameter as the file holds it: its block over tp (models::TpSplit as an int) of a whole
// tensor of full_shape; shape is the block's.
struct ParamLayout {
  std::string name;
  std::int32_t split = 0, tp_rank = 0, tp_size = 1;
  std::vector<std::int64_t> shape, full_shape;
  bool operator==(const ParamLayout& o) const {
    return name == o.name && split == o.split && tp_rank == o.tp_rank && tp_size == o.tp_size &&
           shape == o.shape && full_shape == o.full_shape;
  }
  models::ParamSpec spec() const;  // for models::tp_place
};

// Unit `whole` of the whole model (pp_copy: the last stage's copy of a tied unit); the master
// slice holds elements [master_begin, master_begin + master_n) of the unit's padded flat
// buffer (parameters back to back in `params` order), the Adam moments the opt_n elements
// from master_begin + opt_off.
struct UnitLayout {
  std::int32_t whole = 0;
  bool pp_copy = false;
  std::int64_t master_begin = 0, master_n = 0;
  std::vector<ParamLayout> params;
  bool operator==(const UnitLayout& o) const {
    return whole == o.whole && pp_copy == o.pp_copy && master_begin == o.master_begin &&
           master_n == o.master_n && params == o.params;
  }
};

struct Header {
  std::uint32_t version = kVersion;
  std::int32_t world = 0, group = 0, rank = 0;
  std::int64_t step = 0;
  std::string strategy, dtype, compression;
  std::vector<UnitHeader> units;
  std::vector<UnitLayout> layouts;  // [unit]
  std::uint32_t n_state = 0;
  std::uint64_t payload_bytes = 0, checksum = 0;
};

// Payload: per unit master, exp_avg, exp_avg_sq (raw fp32); then the state entries.
std::string encode_payload(const std::vector<const torch::Tensor*>& tensors,
                           const comm::StateDict& state);
// The whole file; sets h.payload_bytes and h.checksum.
std::string encode_file(Header& h, const std::string& payload);

// A part of the payload that streams rather than sits in memory (a unit's master or moments,
// in memory or in the optimizer's offload file): `bytes` bytes moved by io(off, n, buf) in
// consecutive pieces, off a multiple of kStreamPiece, buf 4096-aligned with room for n rounded
// up to 4096. Saving, io fills buf; loading, it takes buf's bytes.
struct PayloadPart {
  std::uint64_t bytes = 0;
  std::function<void(std::uint64_t off, std::uint64_t n, char* buf)> io;
};
// The file of encode_file(h, encode_payload(parts' bytes, state)), written durably piece by
// piece (write_durably_streamed): memory holds one piece, never the file. Sets
// h.payload_bytes and h.checksum; returns the file's size.
std::uint64_t write_rank_file(const std::string& path, Header& h, const std::vector<PayloadPart>& parts,
                              const comm::StateDict& state);

// One rank's file, checked on its own (magic, version, size, checksum); payload_pos is where
// the payload starts, in buf and in the file (the header's bytes are the file's first ones):
// readers pread the payload's ranges at it.
struct RankFile {
  std::string path, buf;
  Header h;
  std::size_t payload_pos = 0;
  bool tensors_elided = false;  // read_rank_file_streamed: buf lacks the units' tensors
  // Where the state entries start in buf (after every unit's master and moments).
  std::size_t state_pos() const;
};
// A rank file read and checked (magic, version, size, checksum) without its units' tensors in
// memory (never the whole file: a one-rank set's file is 12 bytes a parameter of the model):
// the payload's first bytes go to parts
// (the file's master and moments, in order) piece by piece, and buf keeps the header and the
// state entries only (decode_state reads them). The size and the checksum are checked at the
// end, after the parts have taken their bytes: a caller that writes them into live state
// treats a failure as fatal to that state.
RankFile read_rank_file_streamed(const std::string& path, const std::string& missing_hint,
                                 const std::vector<PayloadPart>& parts);
// read_rank_file_streamed with the units' tensors read and dropped: the file checked (size,
// checksum) through one piece, its header and state entries kept.
RankFile verify_rank_file(const std::string& path, const std::string& missing_hint);
// Its header only, as a RankFile with nothing of the payload (tensors_elided; check_in_set
// works on it, decode_state does not): nothing past the header is read or checked.
RankFile read_rank_head(const std::string& path, const std::string& missing_hint);
// The header and the state entries (decode_state works on it), read past the units' tensors:
// nothing is checked beyond the size (no checksum; a reader that uses the file's tensors
// checks it with read_rank_file_streamed).
RankFile read_rank_state(const std::string& path, const std::string& missing_hint);
// The bytes of every unit's master and moments in a file of header h (the payload before its
// state entries).
std::uint64_t tensor_bytes(const Header& h);
// n bytes at offset `at` of the open file fd (of `path`, for messages) into p, whole.
void read_file_at(int fd, char* p, std::size_t n, std::uint64_t at, const std::string& path);
// A checkpoint file open for reading (pread it with read_file_at), closed with this object
// (movable, not copyable); opening throws naming the file and the system's reason.
class ReadFile {
 public:
  explicit ReadFile(const std::string& path);
  ~ReadFile();
  ReadFile(ReadFile&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ReadFile& operator=(ReadFile&& o) noexcept;
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};
// Only the header (layouts included) of a rank file, from the file's first bytes: what a
// loader reads to skip files that hold none of its units. Nothing beyond the header is
// checked (no checksum): a file that is then used is checked with verify_rank_file.
Header read_rank_header(const std::string& path, const std::string& missing_hint);
// The state entries (after the units' tensors).
comm::StateDict decode_state(const RankFile& rf);
// A rank file must be the file the set's commit marker lists for its rank.
void check_in_set(const RankFile& rf, const Marker& m, int rank, const std::string& set);

}  // namespace sb::fsdp::ckpt
