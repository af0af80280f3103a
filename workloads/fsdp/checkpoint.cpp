// Sharded checkpoints. A save is a set dir/step-<N>/ (checkpoint_set.h): every rank writes its
// file rank<r>.sbck durably, then rank 0 writes the commit marker listing every file's
// checksum. A rank file holds this rank's fp32 master slice and Adam moments per unit and its
// compression state (error-feedback residuals, PowerSGD's Q, stochastic-rounding generators),
// behind a header (magic, version, world size, sharding group, rank, step, strategy, dtype,
// compression policy, unit layout) and one checksum over header and payload.
// Loading is collective: every rank checks its file against the marker and this run, then all
// ranks compare what they read, and only when all agree is any tensor copied; otherwise every
// rank throws the same message naming the files, their steps and what to do.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/checkpoint_set.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/unit.h"
#include "workloads/models/dtype.h"

namespace sb::fsdp {
namespace {

constexpr char kMagic[8] = {'S', 'B', 'F', 'S', 'D', 'P', 'C', 'K'};
constexpr std::uint32_t kVersion = 2;  // 2: checksum over the header, compression state, sets
using Units = std::vector<std::unique_ptr<Engine::Unit>>;

struct UnitHeader {
  std::int64_t numel = 0, padded = 0, size = 0, opt_off = 0, opt_n = 0;
  bool operator!=(const UnitHeader& o) const { return !(*this == o); }
  bool operator==(const UnitHeader& o) const {
    return numel == o.numel && padded == o.padded && size == o.size && opt_off == o.opt_off &&
           opt_n == o.opt_n;
  }
};

// Byte layout, in this order: magic, version, world, group, rank, step (at byte 24), strategy,
// dtype, compression, unit count, units, state entry count, payload bytes, checksum (FNV-1a of
// every byte before it, continued over the payload), payload.
struct Header {
  std::uint32_t version = kVersion;
  std::int32_t world = 0, group = 0, rank = 0;
  std::int64_t step = 0;
  std::string strategy, dtype, compression;
  std::vector<UnitHeader> units;
  std::uint32_t n_state = 0;
  std::uint64_t payload_bytes = 0, checksum = 0;
};

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

// This run's header (everything but the payload fields).
Header run_header(comm::Communicator& c, comm::Group shard_group, const EngineConfig& cfg,
                  const std::string& strategy, const Units& units, std::int64_t step) {
  Header h;
  h.world = c.size();
  h.group = c.size(shard_group);
  h.rank = c.rank();
  h.step = step;
  h.strategy = strategy;
  h.dtype = models::dtype_name(cfg.param_dtype);
  h.compression = cfg.compression.describe();
  for (const auto& U : units)
    h.units.push_back({U->flat.numel, U->range.padded, U->range.size, U->opt_off, U->opt_n});
  return h;
}

// Payload: per unit master, exp_avg, exp_avg_sq (raw fp32); then per compression state entry
// name, dtype, rank, dims, byte count, bytes.
std::string encode_payload(const Units& units, const comm::StateDict& state) {
  std::string p;
  for (const auto& U : units)
    for (const torch::Tensor* t : {&U->master, &U->exp_avg, &U->exp_avg_sq})
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

// The whole file; sets h.payload_bytes and h.checksum.
std::string encode_file(Header& h, const std::string& payload) {
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
  put(out, h.n_state);
  h.payload_bytes = payload.size();
  put(out, h.payload_bytes);
  h.checksum = ckpt::fnv1a(payload.data(), payload.size(), ckpt::fnv1a(out.data(), out.size()));
  put(out, h.checksum);
  return out + payload;
}

// One rank's file, checked on its own (magic, version, size, checksum); payload_pos is where
// the payload starts in buf.
struct RankFile {
  std::string path, buf;
  Header h;
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
  h.step = rd.get<std::int64_t>();
  h.strategy = rd.get_str();
  h.dtype = rd.get_str();
  h.compression = rd.get_str();
  const auto nu = rd.get<std::uint32_t>();
  SB_CHECK(nu < 100000, "checkpoint {} is corrupt: {} units", path, nu);
  for (std::uint32_t u = 0; u < nu; ++u) h.units.push_back(rd.get<UnitHeader>());
  h.n_state = rd.get<std::uint32_t>();
  h.payload_bytes = rd.get<std::uint64_t>();
  const std::uint64_t head_sum = ckpt::fnv1a(buf.data(), rd.pos);
  h.checksum = rd.get<std::uint64_t>();
  SB_CHECK(rd.pos + h.payload_bytes == buf.size(), "checkpoint {} is truncated: {} payload bytes "
           "expected, {} present", path, h.payload_bytes, buf.size() - rd.pos);
  const std::uint64_t sum = ckpt::fnv1a(buf.data() + rd.pos, h.payload_bytes, head_sum);
  SB_CHECK(sum == h.checksum, "checkpoint {} is corrupt: checksum {:016x}, header says {:016x}",
           path, sum, h.checksum);
  rf.payload_pos = rd.pos;
  return rf;
}

// The compression state after the units' tensors (starting at byte pos of the file).
comm::StateDict decode_state(const RankFile& rf, std::size_t pos) {
  comm::StateDict s;
  Reader rd{rf.buf, pos, rf.path};
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

// A rank file must be the file the set's commit marker lists for its rank.
void check_in_set(const RankFile& rf, const ckpt::Marker& m, int rank, const std::string& set) {
  const Header& h = rf.h;
  const ckpt::FileEntry& e = m.files.at(rank);
  const bool listed = h.rank == rank && h.step == m.step && h.world == m.world &&
                      h.group == m.group && h.strategy == m.strategy && h.dtype == m.dtype &&
                      h.compression == m.compression && h.checksum == e.checksum &&
                      rf.buf.size() == e.bytes;
  if (!listed)
    SB_FAIL("{} is not the rank-{} file the commit marker of {} lists: the file is rank {} of "
            "step {} ({} ranks, {}, checksum {:016x}), the marker lists step {} ({} ranks, {}, "
            "checksum {:016x}); the set mixes files from different saves. Delete {} (an older "
            "complete set, if any, is then used) or rerun from the start", rf.path, rank, set,
            h.rank, h.step, h.world, h.strategy, h.checksum, m.step, m.world, m.strategy,
            e.checksum, set);
}

// What differs between a set and this run (empty: nothing).
std::vector<std::string> run_diffs(const ckpt::Marker& m, const Header& run) {
  std::vector<std::string> d;
  auto cmp = [&](const auto& have, const auto& mine, const char* what) {
    if (have != mine) d.push_back(fmt::format("{} {} (this run: {})", what, have, mine));
  };
  cmp(m.world, run.world, "world size");
  cmp(m.strategy, run.strategy, "strategy");
  cmp(m.group, run.group, "sharding group of");
  cmp(m.dtype, run.dtype, "param dtype");
  cmp(m.compression, run.compression, "compression");
  return d;
}

// This rank's file of `set`, checked against the marker and this run; no tensor is touched.
RankFile read_for_run(const std::string& set, const Header& run) {
  const ckpt::Marker m = ckpt::read_marker(set);
  const auto diffs = run_diffs(m, run);
  SB_CHECK(diffs.empty(), "checkpoint {} does not match this run: it has {}; resume with the "
           "configuration it was written with", set, fmt::join(diffs, ", "));
  RankFile rf = read_rank_file(ckpt::rank_file(set, run.rank),
                               fmt::format("the commit marker lists it for rank {}", run.rank));
  check_in_set(rf, m, run.rank, set);
  SB_CHECK(rf.h.units.size() == run.units.size(), "checkpoint {} has {} units, this model has "
           "{}: it was written for another model", rf.path, rf.h.units.size(), run.units.size());
  for (std::size_t u = 0; u < run.units.size(); ++u) {
    const UnitHeader &uh = rf.h.units[u], &mine = run.units[u];
    SB_CHECK(uh == mine, "checkpoint {}: unit {} has {} parameters in shards of {} (this run: "
             "{} in shards of {}); it was written for another model or layout", rf.path, u,
             uh.numel, uh.size, mine.numel, mine.size);
  }
  return rf;
}

// ---- collective agreement ------------------------------------------------------------------
// Every rank's string, in rank order, on every rank (collective over the world group).
std::vector<std::string> all_gather_strings(comm::Communicator& c, const std::string& mine) {
  const int n = c.size();
  auto len = torch::full({1}, static_cast<std::int64_t>(mine.size()), torch::kInt64);
  auto lens = torch::empty({n}, torch::kInt64);
  c.all_gather(len, lens, comm::Group::World);
  const std::int64_t width = std::max<std::int64_t>(1, lens.max().item<std::int64_t>());
  auto buf = torch::zeros({width}, torch::kUInt8);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  auto all = torch::empty({n * width}, torch::kUInt8);
  c.all_gather(buf, all, comm::Group::World);
  std::vector<std::string> out;
  const auto* p = reinterpret_cast<const char*>(all.data_ptr<std::uint8_t>());
  for (int r = 0; r < n; ++r) out.emplace_back(p + r * width, lens[r].item<std::int64_t>());
  return out;
}

// Runs f; "" when it succeeded, else its error message (so that the error can be shared
// before any rank leaves the collective sequence).
std::string attempt(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return std::string(e.what()).empty() ? "unknown error" : e.what();
  }
  return "";
}

// Collective: every rank's `value`, in rank order, unless some rank has an `error`: then every
// rank throws one message naming each failing rank's error, so no rank goes on alone.
std::vector<std::string> exchange(comm::Communicator& c, const std::string& what,
                                  const std::string& error, const std::string& value = "") {
  auto all = all_gather_strings(c, error.empty() ? "+" + value : "!" + error);
  std::vector<std::string> errors, values;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r][0] == '!') errors.push_back(fmt::format("rank {}: {}", r, all[r].substr(1)));
    values.push_back(all[r].substr(1));
  }
  if (!errors.empty()) SB_FAIL("{} failed: {}", what, fmt::join(errors, " | "));
  return values;
}

// Takes the engine's entries (engine/*, see Engine::save) out of state and restores them.
void restore_learned(comm::StateDict& state, Units& units, std::vector<int>& acquire_order,
                     const std::string& path) {
  auto take = [&](const char* name) {
    auto it = state.find(name);
    SB_CHECK(it != state.end(), "checkpoint {} has no \"{}\"", path, name);
    torch::Tensor t = it->second;
    state.erase(it);
    return t;
  };
  const torch::Tensor pinned = take("engine/pinned"), order = take("engine/acquire_order");
  SB_CHECK(pinned.numel() == static_cast<std::int64_t>(units.size()) &&
               pinned.scalar_type() == torch::kByte && order.scalar_type() == torch::kLong,
           "checkpoint {}: engine state does not fit this model's {} units", path, units.size());
  for (std::size_t u = 0; u < units.size(); ++u)
    units[u]->pinned = pinned[u].item<std::uint8_t>() != 0;
  acquire_order.clear();
  for (std::int64_t i = 0; i < order.numel(); ++i) {
    const auto v = order[i].item<std::int64_t>();
    SB_CHECK(v >= 0 && v < static_cast<std::int64_t>(units.size()), "checkpoint {}: engine "
             "state names unit {} of {}", path, v, units.size());
    acquire_order.push_back(static_cast<int>(v));
  }
}

}  // namespace

void Engine::save(const std::string& dir) const {
  const bool root = comm_.rank() == 0;
  const std::string set = ckpt::set_dir(dir, step_), what = fmt::format("saving checkpoint "
                                                                       "step {} in {}", step_, dir);
  exchange(comm_, what, root ? attempt([&] { ckpt::prepare_set(dir, step_); }) : "");
  // Every rank's file, durable before anything is committed.
  Header h = run_header(comm_, shard_group_, cfg_, cfg_.strategy, units_, step_);
  std::string file;
  const std::string err = attempt([&] {
    comm::StateDict state = coll_->compression_state();
    // What the engine learned about the model's use of its units (which are used twice per
    // forward, in which order): it decides how often and in which order units are gathered,
    // and with stochastic rounding on the parameter all-gather every gather draws random
    // numbers, so a resumed engine must gather exactly as the uninterrupted one would.
    auto pinned = torch::zeros({static_cast<std::int64_t>(units_.size())}, torch::kByte);
    for (std::size_t u = 0; u < units_.size(); ++u)
      pinned.data_ptr<std::uint8_t>()[u] = units_[u]->pinned ? 1 : 0;
    state["engine/pinned"] = pinned;
    state["engine/acquire_order"] =
        torch::tensor(std::vector<std::int64_t>(last_acquire_order_.begin(),
                                                last_acquire_order_.end()), torch::kLong);
    // Loss scaling: the scale, the good steps since it last changed, the skipped steps.
    if (cfg_.loss_scaling)
      state["engine/loss_scale"] = torch::tensor(
          {scale_, static_cast<double>(good_steps_), static_cast<double>(skipped_)},
          torch::kDouble);
    h.n_state = static_cast<std::uint32_t>(state.size());
    file = encode_file(h, encode_payload(units_, state));
    ckpt::write_durably(ckpt::rank_file(set, comm_.rank()), file);
  });
  const auto entries =
      exchange(comm_, what, err, fmt::format("{:016x} {}", h.checksum, file.size()));
  // Rank 0 commits: the marker, written last and atomically, lists every file.
  std::string warning;
  const std::string commit_err = !root ? "" : attempt([&] {
    ckpt::Marker m{step_, h.world, h.group, h.strategy, h.dtype, h.compression, {}};
    for (const auto& e : entries) {
      unsigned long long sum = 0, bytes = 0;
      std::sscanf(e.c_str(), "%llx %llu", &sum, &bytes);
      m.files.push_back({sum, bytes});
    }
    ckpt::write_durably(ckpt::marker_file(set), ckpt::encode_marker(m));
    warning = ckpt::remove_other_sets(dir, step_);
  });
  if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  exchange(comm_, what, commit_err);  // no rank returns before the set is committed
}

void Engine::load(const std::string& dir) {
  // Rank 0 picks the newest committed set; every rank reads that one.
  ckpt::Chosen chosen;
  const std::string pick_err =
      comm_.rank() == 0 ? attempt([&] { chosen = ckpt::choose_set(dir); }) : "";
  const std::string set =
      exchange(comm_, fmt::format("resuming from {}", dir), pick_err, chosen.set_dir)[0];
  if (!chosen.warning.empty()) std::fprintf(stderr, "warning: %s\n", chosen.warning.c_str());

  const Header run = run_header(comm_, shard_group_, cfg_, cfg_.strategy, units_, 0);
  RankFile rf;
  comm::StateDict state;  // compression and engine state, after the units' tensors
  const std::string err = attempt([&] {
    rf = read_for_run(set, run);
    std::size_t tensors = 0;
    for (const auto& U : units_)
      tensors += U->master.nbytes() + U->exp_avg.nbytes() + U->exp_avg_sq.nbytes();
    state = decode_state(rf, rf.payload_pos + tensors);
  });
  const Header& h = rf.h;
  const auto seen = exchange(comm_, fmt::format("resuming from {}", set), err,
                             fmt::format("{} (step {}, {} ranks, {}, group {}, {}, {})", rf.path,
                                         h.step, h.world, h.strategy, h.group, h.dtype,
                                         h.compression));
  // Every rank read a file of the same save (the marker makes this so on a shared file
  // system; ranks with diverging views of the directory would not be).
  for (const auto& s : seen)
    if (s.substr(s.find(" (")) != seen[0].substr(seen[0].find(" (")))
      SB_FAIL("the ranks read files of different saves: {}; every rank must see the same "
              "checkpoint_dir (a shared file system). Delete {} and rerun from the start",
              fmt::join(seen, "; "), set);

  std::size_t pos = rf.payload_pos;
  for (auto& U : units_)
    for (torch::Tensor* t : {&U->master, &U->exp_avg, &U->exp_avg_sq}) {
      std::memcpy(t->data_ptr(), rf.buf.data() + pos, t->nbytes());
      pos += t->nbytes();
    }
  restore_learned(state, units_, last_acquire_order_, rf.path);
  // Loss scaling's state, when this run scales (else ignored; absent when the saving run did
  // not scale: this run starts from loss_scale_init).
  if (auto it = state.find("engine/loss_scale"); it != state.end()) {
    const torch::Tensor ls = it->second;
    SB_CHECK(ls.numel() == 3 && ls.scalar_type() == torch::kDouble,
             "checkpoint {}: engine/loss_scale has {} values, expected 3", rf.path, ls.numel());
    if (cfg_.loss_scaling) {
      scale_ = ls[0].item<double>();
      good_steps_ = static_cast<std::int64_t>(ls[1].item<double>());
      skipped_ = static_cast<std::int64_t>(ls[2].item<double>());
      SB_CHECK(std::isfinite(scale_) && scale_ > 0, "checkpoint {}: engine/loss_scale holds "
               "the scale {}; delete the set or resume = false", rf.path, scale_);
    }
    state.erase(it);
  }
  coll_->load_compression_state(state);
  step_ = h.step;
  refresh_replicas();
}

std::int64_t committed_checkpoint_step(const std::string& dir) {
  return ckpt::committed_step(dir);
}

// Offline: the fp32 master parameters of the newest committed set, assembled in one process.
// With sharded parameters, ranks 0..group-1 (the first shard group: groups are contiguous
// blocks) hold shards 0..group-1 of every unit; otherwise rank 0 holds full replicas.
models::UnitTensors read_checkpoint_params(const std::string& dir, const models::Model& model) {
  const ckpt::Chosen chosen = ckpt::choose_set(dir);
  if (!chosen.warning.empty()) std::fprintf(stderr, "warning: %s\n", chosen.warning.c_str());
  const std::string& set = chosen.set_dir;
  const ckpt::Marker m = ckpt::read_marker(set);
  const Layout layout = strategy_info(m.strategy).layout;
  const auto& specs = model.units();
  const int files = layout.params_sharded ? m.group : 1;
  // Each unit's flat master buffer (all shards), filled one rank file at a time so that only
  // one file is in memory beside the parameters.
  std::vector<torch::Tensor> flats;
  std::vector<FlatLayout> layouts;
  std::vector<UnitHeader> units;
  for (int r = 0; r < files; ++r) {
    const RankFile rf = read_rank_file(
        ckpt::rank_file(set, r),
        fmt::format("the checkpoint was written by {} ranks; every rank file is needed", m.world));
    check_in_set(rf, m, r, set);
    if (r == 0) {
      units = rf.h.units;
      SB_CHECK(units.size() == specs.size(), "checkpoint {} has {} units, model '{}' has {}: it "
               "was written for another model", set, units.size(), model.config().preset,
               specs.size());
      for (std::size_t u = 0; u < specs.size(); ++u) {
        std::vector<std::int64_t> numels;
        for (const auto& p : specs[u].params) numels.push_back(p.numel());
        layouts.push_back(flat_layout(numels));
        SB_CHECK(layouts.back().numel == units[u].numel, "checkpoint {}: unit {} ({}) has {} "
                 "parameters, model '{}' has {}: it was written for another model", set, u,
                 specs[u].name, units[u].numel, model.config().preset, layouts.back().numel);
        flats.push_back(torch::empty(
            {(layout.params_sharded ? units[u].size : units[u].padded) * files}));
      }
    }
    SB_CHECK(rf.h.units == units, "{} has another unit layout than rank 0's file", rf.path);
    std::size_t pos = rf.payload_pos;
    for (std::size_t u = 0; u < specs.size(); ++u) {
      const std::int64_t master_n = layout.params_sharded ? units[u].size : units[u].padded;
      std::memcpy(static_cast<char*>(flats[u].data_ptr()) + r * master_n * 4,
                  rf.buf.data() + pos, master_n * 4);
      pos += (master_n + 2 * units[u].opt_n) * 4;  // master, then the two Adam moments
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
