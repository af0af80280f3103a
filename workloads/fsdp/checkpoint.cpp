// Sharded checkpoints: one file per rank (dir/rank<r>.sbck) holding this rank's fp32 master
// slice and Adam moments per unit, behind a header (magic, version, world size, sharding
// group, strategy, dtype, step, unit layout, payload checksum). Loading checks every header
// field against the running engine and names what differs. Written to a temporary name and
// renamed, so a crash never leaves a half-written file under the final name.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/core/check.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/unit.h"

namespace sb::fsdp {
namespace {

constexpr char kMagic[8] = {'S', 'B', 'F', 'S', 'D', 'P', 'C', 'K'};
constexpr std::uint32_t kVersion = 1;

struct UnitHeader {
  std::int64_t numel = 0, padded = 0, size = 0, opt_off = 0, opt_n = 0;
  bool operator!=(const UnitHeader& o) const { return !(*this == o); }
  bool operator==(const UnitHeader& o) const {
    return numel == o.numel && padded == o.padded && size == o.size && opt_off == o.opt_off &&
           opt_n == o.opt_n;
  }
};

struct Header {
  std::uint32_t version = kVersion;
  std::int32_t world = 0, group = 0, rank = 0;
  std::string strategy, dtype;
  std::int64_t step = 0;
  std::vector<UnitHeader> units;
  std::uint64_t payload_bytes = 0, checksum = 0;
};

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& out, const std::string& s) {
  put(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

struct Reader {
  const std::string& buf;
  std::size_t pos = 0;
  std::string path;
  template <typename T>
  T get() {
    SB_CHECK(pos + sizeof(T) <= buf.size(), "checkpoint {} is truncated at byte {}", path, pos);
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string get_str() {
    const auto n = get<std::uint32_t>();
    SB_CHECK(n < 4096 && pos + n <= buf.size(), "checkpoint {} is corrupt at byte {}", path, pos);
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

std::string rank_file(const std::string& dir, int rank) {
  return fmt::format("{}/rank{}.sbck", dir, rank);
}

}  // namespace

void Engine::save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // every rank may race here; exists is fine
  SB_CHECK(std::filesystem::is_directory(dir), "cannot create checkpoint directory {}: {}", dir,
           ec.message());
  std::string payload;
  for (const auto& U : units_)
    for (const torch::Tensor* t : {&U->master, &U->exp_avg, &U->exp_avg_sq})
      payload.append(static_cast<const char*>(t->data_ptr()), t->nbytes());

  std::string out(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<std::int32_t>(comm_.size()));
  put(out, static_cast<std::int32_t>(comm_.size(layout_.group)));
  put(out, static_cast<std::int32_t>(comm_.rank()));
  put_str(out, strategy_->name());
  put_str(out, dtype_name(cfg_.param_dtype));
  put(out, step_);
  put(out, static_cast<std::uint32_t>(units_.size()));
  for (const auto& U : units_) {
    UnitHeader h{U->flat.numel, U->range.padded, U->range.size, U->opt_off, U->opt_n};
    put(out, h);
  }
  put(out, static_cast<std::uint64_t>(payload.size()));
  put(out, fnv1a(payload.data(), payload.size()));
  out += payload;

  const std::string path = rank_file(dir, comm_.rank()), tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    SB_CHECK(f.good(), "cannot write checkpoint {}", tmp);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.flush();
    SB_CHECK(f.good(), "writing checkpoint {} failed (disk full?)", tmp);
  }
  std::filesystem::rename(tmp, path);
}

namespace {

// One rank's file, checked on its own (magic, version, size, checksum); payload_pos is where
// the payload starts in buf.
struct RankFile {
  std::string path, buf;
  Header h;
  std::vector<UnitHeader> units;
  std::size_t payload_pos = 0;
};

RankFile read_rank_file(const std::string& path, const std::string& missing_hint) {
  RankFile rf;
  rf.path = path;
  std::ifstream f(path, std::ios::binary);
  SB_CHECK(f.good(), "no checkpoint file {} ({})", path, missing_hint);
  rf.buf.assign((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string& buf = rf.buf;
  Reader rd{buf, 0, path};
  SB_CHECK(buf.size() >= sizeof kMagic && std::memcmp(buf.data(), kMagic, sizeof kMagic) == 0,
           "{} is not a shardbench FSDP checkpoint (bad magic number)", path);
  rd.pos = sizeof kMagic;
  Header& h = rf.h;
  h.version = rd.get<std::uint32_t>();
  SB_CHECK(h.version == kVersion, "{} has format version {}, this build reads version {}", path,
           h.version, kVersion);
  h.world = rd.get<std::int32_t>();
  h.group = rd.get<std::int32_t>();
  h.rank = rd.get<std::int32_t>();
  h.strategy = rd.get_str();
  h.dtype = rd.get_str();
  h.step = rd.get<std::int64_t>();
  const auto nu = rd.get<std::uint32_t>();
  SB_CHECK(nu < 100000, "checkpoint {} is corrupt: {} units", path, nu);
  for (std::uint32_t u = 0; u < nu; ++u) rf.units.push_back(rd.get<UnitHeader>());
  h.payload_bytes = rd.get<std::uint64_t>();
  h.checksum = rd.get<std::uint64_t>();
  SB_CHECK(rd.pos + h.payload_bytes == buf.size(), "checkpoint {} is truncated: {} payload bytes "
           "expected, {} present", path, h.payload_bytes, buf.size() - rd.pos);
  const std::uint64_t sum = fnv1a(buf.data() + rd.pos, h.payload_bytes);
  SB_CHECK(sum == h.checksum, "checkpoint {} is corrupt: checksum {:016x}, header says {:016x}",
           path, sum, h.checksum);
  rf.payload_pos = rd.pos;
  return rf;
}

}  // namespace

void Engine::load(const std::string& dir) {
  const std::string path = rank_file(dir, comm_.rank());
  const RankFile rf = read_rank_file(
      path, fmt::format("rank {}: was it written by {} ranks?", comm_.rank(), comm_.size()));
  const Header& h = rf.h;
  std::vector<std::string> diffs;
  if (h.world != comm_.size())
    diffs.push_back(fmt::format("world size {} (this run: {})", h.world, comm_.size()));
  if (h.strategy != strategy_->name())
    diffs.push_back(fmt::format("strategy {} (this run: {})", h.strategy, strategy_->name()));
  if (h.group != comm_.size(layout_.group))
    diffs.push_back(fmt::format("sharding group of {} ranks (this run: {})", h.group,
                                comm_.size(layout_.group)));
  if (h.dtype != dtype_name(cfg_.param_dtype))
    diffs.push_back(fmt::format("param dtype {} (this run: {})", h.dtype,
                                dtype_name(cfg_.param_dtype)));
  if (h.rank != comm_.rank())
    diffs.push_back(fmt::format("rank {} (read by rank {})", h.rank, comm_.rank()));
  if (rf.units.size() != units_.size())
    diffs.push_back(fmt::format("{} units (this model: {})", rf.units.size(), units_.size()));
  SB_CHECK(diffs.empty(), "checkpoint {} does not match this run: it has {}; resume with the "
           "configuration it was written with", path, fmt::join(diffs, ", "));
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const auto& uh = rf.units[u];
    const auto& U = units_[u];
    UnitHeader mine{U->flat.numel, U->range.padded, U->range.size, U->opt_off, U->opt_n};
    SB_CHECK(uh == mine, "checkpoint {}: unit {} has {} parameters in shards of {} (this run: "
             "{} in shards of {}); it was written for another model or layout", path, u,
             uh.numel, uh.size, mine.numel, mine.size);
  }
  std::size_t pos = rf.payload_pos;
  for (auto& U : units_)
    for (torch::Tensor* t : {&U->master, &U->exp_avg, &U->exp_avg_sq}) {
      std::memcpy(t->data_ptr(), rf.buf.data() + pos, t->nbytes());
      pos += t->nbytes();
    }
  step_ = h.step;
  refresh_replicas();
}

// Offline: the fp32 master parameters of a sharded checkpoint, assembled in one process.
// With sharded parameters, ranks 0..group-1 (the first shard group: groups are contiguous
// blocks) hold shards 0..group-1 of every unit; otherwise rank 0 holds full replicas.
models::UnitTensors read_checkpoint_params(const std::string& dir, const models::Model& model) {
  const RankFile r0 = read_rank_file(rank_file(dir, 0), "is it a checkpoint_dir?");
  const Layout layout = strategy_layout(r0.h.strategy);
  const auto& specs = model.units();
  SB_CHECK(r0.units.size() == specs.size(), "checkpoint {} has {} units, model '{}' has {}: it "
           "was written for another model", dir, r0.units.size(), model.config().preset,
           specs.size());
  const int files = layout.params_sharded ? r0.h.group : 1;
  // Each unit's flat master buffer (all shards), filled one rank file at a time so that only
  // one file is in memory beside the parameters.
  std::vector<torch::Tensor> flats;
  std::vector<FlatLayout> layouts;
  for (std::size_t u = 0; u < specs.size(); ++u) {
    const UnitHeader& uh = r0.units[u];
    std::vector<std::int64_t> numels;
    for (const auto& p : specs[u].params) numels.push_back(p.numel());
    layouts.push_back(flat_layout(numels));
    SB_CHECK(layouts.back().numel == uh.numel, "checkpoint {}: unit {} ({}) has {} parameters, "
             "model '{}' has {}: it was written for another model", dir, u, specs[u].name,
             uh.numel, model.config().preset, layouts.back().numel);
    flats.push_back(torch::empty({(layout.params_sharded ? uh.size : uh.padded) * files}));
  }
  RankFile other;  // ranks 1..files-1, one at a time
  for (int r = 0; r < files; ++r) {
    if (r > 0)
      other = read_rank_file(rank_file(dir, r), fmt::format("the checkpoint was written by {} "
                                                            "ranks; every rank file is needed",
                                                            r0.h.world));
    const RankFile& rf = r == 0 ? r0 : other;
    const Header& h = rf.h;
    SB_CHECK(h.world == r0.h.world && h.strategy == r0.h.strategy && h.step == r0.h.step &&
                 h.rank == r && rf.units == r0.units,
             "{} does not belong with {}: rank {} of {} ranks, strategy {}, step {} (expected "
             "rank {} of {}, {}, step {})", rf.path, r0.path, h.rank, h.world, h.strategy,
             h.step, r, r0.h.world, r0.h.strategy, r0.h.step);
    std::size_t pos = rf.payload_pos;
    for (std::size_t u = 0; u < specs.size(); ++u) {
      const UnitHeader& uh = r0.units[u];
      const std::int64_t master_n = layout.params_sharded ? uh.size : uh.padded;
      std::memcpy(static_cast<char*>(flats[u].data_ptr()) + r * master_n * 4,
                  rf.buf.data() + pos, master_n * 4);
      pos += (master_n + 2 * uh.opt_n) * 4;  // master, then the two Adam moments
    }
  }
  models::UnitTensors out;
  for (std::size_t u = 0; u < specs.size(); ++u) {
    const FlatLayout& fl = layouts[u];
    std::vector<torch::Tensor> ps;
    for (std::size_t i = 0; i < fl.numels.size(); ++i)
      ps.push_back(flats[u].narrow(0, fl.offsets[i], fl.numels[i]).view(specs[u].params[i].shape).clone());
    out.push_back(std::move(ps));
  }
  return out;
}

void export_checkpoint(const std::string& dir, const models::Model& model,
                       const std::string& safetensors_path) {
  data::save_checkpoint(model, read_checkpoint_params(dir, model), safetensors_path);
}

}  // namespace sb::fsdp
