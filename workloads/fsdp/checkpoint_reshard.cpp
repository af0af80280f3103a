// Assembling a checkpoint set's whole parameters from its rank files' shard layouts
// (checkpoint_reshard.h).
#include "workloads/fsdp/checkpoint_reshard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "workloads/fsdp/checkpoint_file.h"
#include "workloads/models/tensor_parallel.h"

namespace sb::fsdp::ckpt {
namespace {

constexpr float kHole = std::numeric_limits<float>::quiet_NaN();  // no file held this element

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// One file's tp block of a parameter, filled by the flat ranges of the files that hold it.
struct Block {
  ParamLayout p;
  std::array<torch::Tensor, 3> t;
};
using Blocks = std::map<std::tuple<int, std::string, int>, Block>;  // (whole, name, tp rank)

// Where a file's unit holds each kind k (0 master, 1 exp_avg, 2 exp_avg_sq): elements
// [begin, begin + n) of the unit's padded flat buffer, from payload byte src. pos: the unit's
// first payload byte, moved past it.
struct KindRanges {
  std::int64_t begin[3], n[3];
  std::uint64_t src[3];
};
KindRanges kind_ranges(const UnitHeader& uh, const UnitLayout& L, std::uint64_t& pos) {
  const std::int64_t mb = L.master_begin, mo = L.master_begin + uh.opt_off;
  KindRanges r{{mb, mo, mo}, {L.master_n, uh.opt_n, uh.opt_n},
               {pos, pos + L.master_n * 4, pos + (L.master_n + uh.opt_n) * 4}};
  pos += (L.master_n + 2 * uh.opt_n) * 4;
  return r;
}

// Reads what rank file rf (its header: verified whole before, verify_rank_file) holds of the
// wanted units into their blocks, range by range from the file (pread): never the whole file
// in memory (a one-rank set's file is the model's 12 bytes a parameter). A file holding none of
// them is not opened (a loader assembling unit by unit asks every file for each unit).
void collect(const RankFile& rf, const std::set<int>& wanted, int kinds, Blocks& blocks) {
  if (!wanted.empty() && std::none_of(rf.h.layouts.begin(), rf.h.layouts.end(),
                                      [&](const UnitLayout& L) { return wanted.count(L.whole) > 0; }))
    return;
  const ReadFile file(rf.path);
  const int fd = file.fd();
  std::uint64_t pos = rf.payload_pos;
  for (std::size_t u = 0; u < rf.h.units.size(); ++u) {
    const UnitLayout& L = rf.h.layouts[u];
    const auto [begin, n, src] = kind_ranges(rf.h.units[u], L, pos);
    if (!wanted.empty() && !wanted.count(L.whole)) continue;
    std::int64_t off = 0;  // the parameter's first element in the flat buffer
    for (const ParamLayout& p : L.params) {
      const std::int64_t np = numel_of(p.shape);
      Block& B = blocks[{L.whole, p.name, p.tp_rank}];
      if (!B.t[0].defined()) {
        B.p = p;
        for (int k = 0; k < kinds; ++k) B.t[k] = torch::full({np}, kHole);
      }
      SB_CHECK(B.p == p, "checkpoint {}: parameter {} of unit {} has another layout ({} over tp "
               "{} of {}) than in an earlier rank file ({} over tp {} of {}): the set is not "
               "one save", rf.path, p.name, L.whole, fmt::join(p.shape, "x"), p.tp_rank,
               p.tp_size, fmt::join(B.p.shape, "x"), B.p.tp_rank, B.p.tp_size);
      for (int k = 0; k < kinds; ++k) {
        const std::int64_t a = std::max(begin[k], off), b = std::min(begin[k] + n[k], off + np);
        if (a < b)
          read_file_at(fd, reinterpret_cast<char*>(B.t[k].data_ptr<float>() + (a - off)),
                       static_cast<std::size_t>(b - a) * 4, src[k] + static_cast<std::uint64_t>(a - begin[k]) * 4,
                       rf.path);
      }
      off += np;
    }
  }
}

// Which rank files hold something of the wanted units (all when none are named), from their
// headers: a file is skipped when every wanted unit it holds is a pipeline copy (the last
// stage's copy of a tied embedding) whose original some file holds, or it holds none of them.
std::vector<bool> files_needed(const std::string& set, const Marker& m, const std::set<int>& wanted,
                               const std::string& hint) {
  std::vector<bool> needed(static_cast<std::size_t>(m.world), true);
  if (wanted.empty()) return needed;
  std::vector<Header> heads;
  std::set<int> originals;
  for (int r = 0; r < m.world; ++r) {
    heads.push_back(read_rank_header(rank_file(set, r), hint));
    for (const auto& L : heads.back().layouts)
      if (!L.pp_copy) originals.insert(L.whole);
  }
  for (int r = 0; r < m.world; ++r)
    needed[r] = std::any_of(heads[r].layouts.begin(), heads[r].layouts.end(), [&](const UnitLayout& L) {
      return wanted.count(L.whole) > 0 && (!L.pp_copy || !originals.count(L.whole));
    });
  return needed;
}

}  // namespace

std::vector<RankFile> verified_files(const std::string& set, const Marker& m, const std::set<int>& wanted,
                                     comm::StateDict* state0, int checker, int checkers) {
  SB_CHECK(checkers >= 1 && checker >= 0 && checker < checkers, "verified_files: checker {} of {}", checker,
           checkers);
  const auto hint = fmt::format("the set was written by {} ranks; every rank file is needed to "
                                "read it on another mesh or offline", m.world);
  const std::vector<bool> needed = files_needed(set, m, wanted, hint);
  std::vector<RankFile> out;
  for (int r = 0; r < m.world; ++r) {
    if (!needed[r] && !(r == 0 && state0)) continue;
    // Checked whole through one piece (size, checksum), then only its ranges are read
    // (collect): memory holds the blocks, not the file (read whole, a one-rank set's 4.3 GB
    // file of gpt2-medium beside its blocks ran two ranks out of 23.5 GiB).
    // Files of other checkers: the header (and rank 0's state tail) only, matched against the
    // marker here; their checksums are the other checkers' to check.
    const bool mine = r % checkers == checker;
    RankFile rf = mine                    ? verify_rank_file(rank_file(set, r), hint)
                  : (r == 0 && state0) ? read_rank_state(rank_file(set, r), hint)
                                          : read_rank_head(rank_file(set, r), hint);
    check_in_set(rf, m, r, set);
    if (r == 0 && state0) *state0 = decode_state(rf);
    // Kept as its header only: its state tail (error-feedback residuals, about 4 bytes a
    // parameter of its units) is not read again, and W old files' tails kept at once would be.
    rf.buf.resize(rf.payload_pos);
    rf.buf.shrink_to_fit();
    if (needed[r]) out.push_back(std::move(rf));
  }
  return out;
}

Logical assemble_from(const std::vector<RankFile>& files, const std::set<int>& wanted, bool moments,
                      const std::string& set) {
  const int kinds = moments ? 3 : 1;
  Blocks blocks;
  for (const RankFile& rf : files) collect(rf, wanted, kinds, blocks);
  Logical out;
  // Each block is freed once placed: the blocks and the whole parameters (12 bytes a parameter
  // each) are never both whole.
  for (auto it = blocks.begin(); it != blocks.end(); it = blocks.erase(it)) {
    auto& [key, B] = *it;
    LogicalParam& L = out[{std::get<0>(key), std::get<1>(key)}];
    if (!L.t[0].defined()) {
      L.shape = B.p.full_shape;
      for (int k = 0; k < kinds; ++k) L.t[k] = torch::full(L.shape, kHole);
    }
    SB_CHECK(L.shape == B.p.full_shape, "checkpoint {}: parameter {} of unit {} is {} in one "
             "rank file and {} in another: the set is not one save", set, B.p.name,
             std::get<0>(key), fmt::join(L.shape, "x"), fmt::join(B.p.full_shape, "x"));
    const models::ParamSpec spec = B.p.spec();
    for (int k = 0; k < kinds; ++k) models::tp_place(spec, L.t[k], B.t[k]);
  }
  return out;
}

Logical assemble(const std::string& set, const Marker& m, const std::set<int>& wanted,
                 bool moments, comm::StateDict* state0) {
  return assemble_from(verified_files(set, m, wanted, state0), wanted, moments, set);
}

torch::Tensor param_of(const Logical& lg, int whole, const std::string& unit_name,
                       const models::ParamSpec& p, int kind, const std::string& set) {
  const auto it = lg.find({whole, p.name});
  SB_CHECK(it != lg.end(), "checkpoint {} has no parameter {} of unit {} ({}): it was written "
           "for another model", set, p.name, whole, unit_name);
  const auto& full_shape = p.full_shape.empty() ? p.shape : p.full_shape;
  SB_CHECK(it->second.shape == full_shape, "checkpoint {}: parameter {} is {} there, {} in "
           "this model: it was written for another model", set, p.name,
           fmt::join(it->second.shape, "x"), fmt::join(full_shape, "x"));
  torch::Tensor mine = models::tp_slice(p, it->second.t[kind]);
  SB_CHECK(!torch::isnan(mine).any().item<bool>(), "checkpoint {}: no rank file holds all of "
           "parameter {} (unit {}): the set is incomplete; delete it to resume from an older "
           "one, or rerun from the start", set, p.name, whole);
  return mine;
}

torch::Tensor unit_flat(const Logical& lg, int whole, const models::UnitSpec& spec, int kind,
                        std::int64_t padded, const std::string& set) {
  std::vector<torch::Tensor> parts;
  std::int64_t n = 0;
  for (const models::ParamSpec& p : spec.params) {
    parts.push_back(param_of(lg, whole, spec.name, p, kind, set).reshape({-1}));
    n += parts.back().numel();
  }
  SB_CHECK(n <= padded, "unit {}: {} parameters do not fit {} padded elements", spec.name, n, padded);
  parts.push_back(torch::zeros({padded - n}));
  return torch::cat(parts);
}

namespace {

// The same parameters in the same blocks but perhaps of another tp rank (false: another
// block layout, which makes element indices mean other things).
bool same_blocks(const std::vector<ParamLayout>& a, const std::vector<ParamLayout>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ParamLayout x = a[i];
    x.tp_rank = b[i].tp_rank;
    if (!(x == b[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<FlatSources>> flat_sources(const std::string& set, const Marker& m,
                                                     const std::vector<UnitLayout>& mine,
                                                     const std::string& hint) {
  std::vector<FlatSources> orig(mine.size()), copy(mine.size());
  std::map<int, std::vector<std::size_t>> by_whole;
  for (std::size_t i = 0; i < mine.size(); ++i) by_whole[mine[i].whole].push_back(i);
  for (int r = 0; r < m.world; ++r) {
    const RankFile rf = read_rank_head(rank_file(set, r), hint);
    check_in_set(rf, m, r, set);
    std::uint64_t pos = rf.payload_pos;
    for (std::size_t u = 0; u < rf.h.units.size(); ++u) {
      const UnitHeader& uh = rf.h.units[u];
      const UnitLayout& L = rf.h.layouts[u];
      const auto [begin, n, src] = kind_ranges(uh, L, pos);
      const auto it = by_whole.find(L.whole);
      if (it == by_whole.end()) continue;
      for (const std::size_t i : it->second) {
        if (!same_blocks(L.params, mine[i].params)) return std::nullopt;
        if (L.params != mine[i].params) continue;  // another tp rank's block
        FlatSources& s = (L.pp_copy ? copy : orig)[i];
        s.numel = uh.numel;
        for (int k = 0; k < 3; ++k)
          if (n[k] > 0) s.kind[k].push_back({rf.path, begin[k], begin[k] + n[k], src[k]});
      }
    }
  }
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (orig[i].kind[0].empty()) orig[i] = std::move(copy[i]);
  return orig;
}

int FlatReader::fd_for(const std::string& path) {
  auto it = fds_.find(path);
  if (it == fds_.end()) {
    if (fds_.size() >= max_open_)  // close the least recently read
      fds_.erase(std::min_element(fds_.begin(), fds_.end(),
                                  [](const auto& a, const auto& b) { return a.second.last < b.second.last; }));
    it = fds_.emplace(path, Open{ReadFile(path), 0}).first;
    ++opens_;
  }
  it->second.last = ++uses_;
  return it->second.file.fd();
}

void FlatReader::read(const FlatSources& s, int k, std::int64_t e0, std::int64_t n, char* buf,
                      const std::string& what) {
  std::memset(buf, 0, static_cast<std::size_t>(n) * 4);
  const std::int64_t end = std::min(e0 + n, s.numel);
  std::vector<const FlatSpan*> best;  // of the spans holding pos, those reaching furthest
  for (std::int64_t pos = e0; pos < end;) {
    best.clear();
    for (const FlatSpan& sp : s.kind[static_cast<std::size_t>(k)]) {
      if (sp.begin > pos || pos >= sp.end) continue;
      if (!best.empty() && sp.end > best.front()->end) best.clear();
      if (best.empty() || sp.end == best.front()->end) best.push_back(&sp);
    }
    SB_CHECK(!best.empty(), "{}: no rank file holds element {} of its {} (kind {}): the set is "
             "incomplete; delete it to resume from an older one, or rerun from the start", what, pos,
             k == 0 ? "master" : k == 1 ? "exp_avg" : "exp_avg_sq", k);
    const FlatSpan& sp = *best[static_cast<std::size_t>(spread_) % best.size()];
    const std::int64_t stop = std::min(sp.end, end);
    const auto bytes = static_cast<std::size_t>(stop - pos) * 4;
    read_file_at(fd_for(sp.path), buf + (pos - e0) * 4, bytes,
                 sp.byte + static_cast<std::uint64_t>(pos - sp.begin) * 4, sp.path);
    bytes_read_[sp.path] += bytes;
    pos = stop;
  }
}

}  // namespace sb::fsdp::ckpt
