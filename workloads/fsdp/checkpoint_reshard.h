// A checkpoint set's logical tensors (private to workloads/fsdp): every rank file's shard
// layout (checkpoint_file.h) says which elements of which whole parameter it holds, so the
// whole parameters (and their Adam moments) can be assembled from the set whatever mesh,
// strategy and world wrote it, then cut for the mesh that reads it: torch.distributed.
// checkpoint's resharding, done at load. docs/FSDP.md "Checkpoints across meshes".
#pragma once
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/compressor.h"  // comm::StateDict
#include "workloads/fsdp/checkpoint_file.h"  // RankFile
#include "workloads/fsdp/checkpoint_set.h"
#include "workloads/models/model.h"

namespace sb::fsdp::ckpt {

// One whole parameter: master, exp_avg, exp_avg_sq (fp32, its whole shape; the moments are
// undefined when not asked for).
struct LogicalParam {
  std::vector<std::int64_t> shape;
  std::array<torch::Tensor, 3> t;
};
// (whole-model unit index, Hugging Face name) -> the parameter.
using Logical = std::map<std::pair<int, std::string>, LogicalParam>;

// Reads the rank files of `set` that hold the units in `wanted` (empty: all), each checked
// whole through one piece and then read by range, and assembles those units' whole
// parameters. Throws naming the file when one is
// missing, corrupt or not of this set, and naming the parameter when no file holds some of
// its elements. state0: rank 0's state entries (compression and engine state), if not null.
Logical assemble(const std::string& set, const Marker& m, const std::set<int>& wanted,
                 bool moments, comm::StateDict* state0 = nullptr);
// assemble in two parts, so that a loader holds one unit whole at a time: the files of the set
// that hold something of `wanted` (rank 0's too when state0 is asked for), each checked whole
// through one piece (size, checksum, the commit marker) and kept as its header only
// (decode_state does not work on them: state0 is decoded here); then the whole parameters of
// some of those units from those files' ranges. Processes that load together share the
// checking: checker c of `checkers` checks files c, c + checkers, ... whole and the others'
// headers only, so a caller with checkers > 1 must fail every process when one fails.
std::vector<RankFile> verified_files(const std::string& set, const Marker& m, const std::set<int>& wanted,
                                     comm::StateDict* state0 = nullptr, int checker = 0, int checkers = 1);
Logical assemble_from(const std::vector<RankFile>& files, const std::set<int>& wanted, bool moments,
                      const std::string& set);

// Parameter p of unit `unit_name` (whole-model unit `whole`) as this model holds it (its tp
// block, spec shape), kind 0 master, 1 exp_avg, 2 exp_avg_sq. Throws when the set has no such
// parameter or another shape (another model), or when no file held some of its elements.
torch::Tensor param_of(const Logical& lg, int whole, const std::string& unit_name,
                       const models::ParamSpec& p, int kind, const std::string& set);

// Unit `spec`'s (whole-model unit `whole`) parameters as this model holds them (its tp
// blocks), flattened back to back and zero-padded to `padded`: kind 0 master, 1 exp_avg,
// 2 exp_avg_sq. Throws when the set has no such parameter or another shape (another model).
torch::Tensor unit_flat(const Logical& lg, int whole, const models::UnitSpec& spec, int kind,
                        std::int64_t padded, const std::string& set);

// Streaming instead of assembling, when the tensor-parallel layout is unchanged (any other
// change of dp, strategy, world or pp): a unit's flat buffer then means the same elements in
// every file that holds its tp block, so a rank reads the byte ranges of its own shard.
//
// A file's elements [begin, end) of one kind of a unit's flat buffer, from byte `byte` on.
struct FlatSpan {
  std::string path;
  std::int64_t begin = 0, end = 0;
  std::uint64_t byte = 0;
};
// Kind 0 master, 1 exp_avg, 2 exp_avg_sq of one unit: the spans that hold it (replicas may
// overlap) and its unpadded element count.
struct FlatSources {
  std::array<std::vector<FlatSpan>, 3> kind;
  std::int64_t numel = 0;
};
// For each of `mine` (this rank's units' layouts) the spans of the set's files that hold its
// tp block, from their headers alone (originals before a pipeline stage's copy of a tied
// unit); std::nullopt when a file holds one of them with other blocks (another tp size or
// shape): the set must be assembled.
std::optional<std::vector<FlatSources>> flat_sources(const std::string& set, const Marker& m,
                                                     const std::vector<UnitLayout>& mine,
                                                     const std::string& hint);
// Reads elements [e0, e0 + n) of kind k into buf (4 n bytes), zeros from numel on (the
// padding); throws naming `what` and the element when no file holds one.
//
// Of the spans holding an element it reads the one reaching furthest; among equals (the
// replicas of a no_shard or hybrid set, each file the whole buffer) the `spread`-th modulo
// their number, so that the new ranks (spread = rank) read different old files instead of
// all reading the first. At most `max_open` files stay open (the least recently read is
// closed first): a set of thousands of old ranks would otherwise reach the process's limit
// of open files (1024 by default).
class FlatReader {
 public:
  static constexpr std::size_t kMaxOpen = 64;
  explicit FlatReader(int spread = 0, std::size_t max_open = kMaxOpen)
      : spread_(spread), max_open_(std::max<std::size_t>(1, max_open)) {}
  FlatReader(const FlatReader&) = delete;
  FlatReader& operator=(const FlatReader&) = delete;
  void read(const FlatSources& s, int k, std::int64_t e0, std::int64_t n, char* buf, const std::string& what);
  // Bytes read from each file so far, the files open now and the opens so far (tests).
  const std::map<std::string, std::uint64_t>& bytes_read() const { return bytes_read_; }
  std::size_t open_files() const { return fds_.size(); }
  std::uint64_t opens() const { return opens_; }

 private:
  int fd_for(const std::string& path);
  struct Open {
    ReadFile file;
    std::uint64_t last = 0;  // use counter when last read: the smallest is closed first
  };
  int spread_;
  std::size_t max_open_;
  std::uint64_t uses_ = 0, opens_ = 0;
  std::map<std::string, Open> fds_;
  std::map<std::string, std::uint64_t> bytes_read_;
};

}  // namespace sb::fsdp::ckpt
