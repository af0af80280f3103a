// Sharded checkpoints. A save is a set dir/step-<N>/ (checkpoint_set.h): every rank writes its
// file rank<r>.sbck durably, then rank 0 writes the commit marker listing every file's
// checksum. A rank file (checkpoint_file.h) holds this rank's fp32 master slice and Adam
// moments per unit, their shard layout, and its compression state (error-feedback residuals,
// PowerSGD's Q, stochastic-rounding generators), with one checksum over header and payload.
// Loading is collective. On the mesh that wrote the set, every rank checks its own file
// against the marker and this run, all ranks compare what they read, and only when all agree
// is any tensor copied; otherwise every rank throws the same message naming the files, their
// steps and what to do. On another mesh, strategy or world, every rank assembles the whole
// parameters it needs from all files (checkpoint_reshard.h) and takes its part; state that
// belongs to the old shards (compression state) is reset, and the load says so.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "workloads/data/safetensors.h"
#include "workloads/fsdp/checkpoint_file.h"
#include "workloads/fsdp/checkpoint_reshard.h"
#include "workloads/fsdp/checkpoint_set.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/unit.h"
#include "workloads/models/dtype.h"

namespace sb::fsdp {
namespace {

using Units = std::vector<std::unique_ptr<Engine::Unit>>;
using ckpt::Header;
using ckpt::RankFile;
using ckpt::UnitHeader;

// This run's header (everything but the payload fields), with the shard layout of each unit.
Header run_header(comm::Communicator& c, comm::Group shard_group, const EngineConfig& cfg,
                  const std::string& strategy, const Units& units,
                  const std::vector<models::UnitSpec>& specs, bool params_sharded,
                  std::int64_t step) {
  Header h;
  h.world = c.size();
  h.group = c.size(shard_group);
  h.rank = c.rank();
  h.step = step;
  h.strategy = strategy;
  h.dtype = models::dtype_name(cfg.param_dtype);
  h.compression = cfg.compression.describe();
  for (std::size_t u = 0; u < units.size(); ++u) {
    const Engine::Unit& U = *units[u];
    const models::UnitSpec& spec = specs[u];
    h.units.push_back({U.flat.numel, U.range.padded, U.range.size, U.opt_off, U.opt_n});
    ckpt::UnitLayout L;
    L.whole = spec.whole(static_cast<int>(u));
    L.pp_copy = spec.pp_copy;
    L.master_begin = params_sharded ? U.range.offset : 0;
    L.master_n = U.master_n;
    for (const models::ParamSpec& p : spec.params)
      L.params.push_back({p.name, static_cast<std::int32_t>(p.tp), p.tp_rank, p.tp_size, p.shape,
                          p.full_shape.empty() ? p.shape : p.full_shape});
    h.layouts.push_back(std::move(L));
  }
  return h;
}

// The tensors a rank file holds, in payload order (per unit master, m, v), as parts that
// stream between the file and where they live: the engine's tensors, or the optimizer's
// offload file (straight from file to file, never a copy of the state in memory). save:
// the parts fill the file's pieces; else they take them.
std::vector<ckpt::PayloadPart> payload_parts(const Units& units, OffloadStore* store, bool save) {
  std::vector<ckpt::PayloadPart> out;
  const auto in_memory = [&](const torch::Tensor& t) {
    if (!t.is_cpu()) {  // a device tensor: each piece copied through the host buffer (its bytes)
      const torch::Tensor bytes = t.view({-1}).view(torch::kUInt8);
      return ckpt::PayloadPart{t.nbytes(), [bytes, save](std::uint64_t off, std::uint64_t n, char* buf) {
                                 const auto o = static_cast<std::int64_t>(off), k = static_cast<std::int64_t>(n);
                                 const auto host = torch::from_blob(buf, {k}, torch::kUInt8);
                                 if (save)
                                   host.copy_(bytes.narrow(0, o, k));
                                 else
                                   bytes.narrow(0, o, k).copy_(host);  // synchronous: buf is reused
                               }};
    }
    char* p = static_cast<char*>(t.data_ptr());
    return ckpt::PayloadPart{t.nbytes(), [p, save](std::uint64_t off, std::uint64_t n, char* buf) {
                               if (save)
                                 std::memcpy(buf, p + off, n);
                               else
                                 std::memcpy(p + off, buf, n);
                             }};
  };
  const auto on_disk = [&](int u, int array) {
    return ckpt::PayloadPart{4 * static_cast<std::uint64_t>(store->size(u)),
                             [store, u, array, save](std::uint64_t off, std::uint64_t n, char* buf) {
                               const auto e = static_cast<std::int64_t>(off / 4), k = static_cast<std::int64_t>(n / 4);
                               if (save) {
                                 store->read_array(u, array, e, k, buf);
                               } else {  // the region's padding past n gets zeros, not stale bytes
                                 std::memset(buf + n, 0, models::DirectFile::round_up(n) - n);
                                 store->write_array(u, array, e, k, buf);
                               }
                             }};
  };
  for (std::size_t i = 0; i < units.size(); ++i) {
    const auto& U = units[i];
    const int u = static_cast<int>(i);
    out.push_back(U->master.defined() ? in_memory(U->master) : on_disk(u, OffloadStore::kP));
    out.push_back(store ? on_disk(u, OffloadStore::kM) : in_memory(U->exp_avg));
    out.push_back(store ? on_disk(u, OffloadStore::kV) : in_memory(U->exp_avg_sq));
  }
  return out;
}

// What a set and this run must share whatever their meshes (empty: nothing differs): the
// parameters' dtype and the compression policy (whose state is resumed on the same mesh).
std::vector<std::string> run_diffs(const ckpt::Marker& m, const Header& run) {
  std::vector<std::string> d;
  auto cmp = [&](const auto& have, const auto& mine, const char* what) {
    if (have != mine) d.push_back(fmt::format("{} {} (this run: {})", what, have, mine));
  };
  cmp(m.dtype, run.dtype, "param dtype");
  cmp(m.compression, run.compression, "compression");
  return d;
}

// Whether this rank's own file of the set holds exactly what this run does (same world,
// strategy, sharding group, units and shard layouts): then it is read as it is. rf: that file,
// checked against the marker.
bool same_layout(const std::string& set, const ckpt::Marker& m, const Header& run, RankFile& rf) {
  if (m.world != run.world || m.strategy != run.strategy || m.group != run.group) return false;
  // Its header only: the payload streams into the engine once every rank agrees.
  rf = ckpt::read_rank_head(ckpt::rank_file(set, run.rank),
                            fmt::format("the commit marker lists it for rank {}", run.rank));
  ckpt::check_in_set(rf, m, run.rank, set);
  return rf.h.units == run.units && rf.h.layouts == run.layouts;
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
  updates_.drain();
  const bool root = comm_.rank() == 0;
  const std::string set = ckpt::set_dir(dir, step_), what = fmt::format("saving checkpoint "
                                                                       "step {} in {}", step_, dir);
  exchange(comm_, what, root ? attempt([&] { ckpt::prepare_set(dir, step_); }) : "");
  // Every rank's file, durable before anything is committed.
  Header h = run_header(comm_, shard_group_, cfg_, cfg_.strategy, units_, model_.units(),
                        layout_.params_sharded, step_);
  std::uint64_t file_bytes = 0;
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
    file_bytes = ckpt::write_rank_file(ckpt::rank_file(set, comm_.rank()), h,
                                       payload_parts(units_, store_.get(), /*save=*/true), state);
  });
  const auto entries =
      exchange(comm_, what, err, fmt::format("{:016x} {}", h.checksum, file_bytes));
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

Engine::Loaded Engine::load(const std::string& dir) {
  updates_.drain();
  // Rank 0 picks the newest committed set; every rank reads that one.
  ckpt::Chosen chosen;
  const std::string pick_err =
      comm_.rank() == 0 ? attempt([&] { chosen = ckpt::choose_set(dir); }) : "";
  const std::string set =
      exchange(comm_, fmt::format("resuming from {}", dir), pick_err, chosen.set_dir)[0];
  if (!chosen.warning.empty()) std::fprintf(stderr, "warning: %s\n", chosen.warning.c_str());

  const Header run = run_header(comm_, shard_group_, cfg_, cfg_.strategy, units_, model_.units(),
                                layout_.params_sharded, 0);
  ckpt::Marker m;
  RankFile rf;
  comm::StateDict state;  // compression and engine state, after the units' tensors
  bool same = false;
  const std::string err = attempt([&] {
    m = ckpt::read_marker(set);
    const auto diffs = run_diffs(m, run);
    SB_CHECK(diffs.empty(), "checkpoint {} does not match this run: it has {}; resume with the "
             "configuration it was written with", set, fmt::join(diffs, ", "));
    same = same_layout(set, m, run, rf);
  });
  // One exchange: every rank's verdict (its own file as it is, or resharding) and the save it
  // read, which must be the same on every rank (the marker makes this so on a shared file
  // system; ranks with diverging views of the directory would not be).
  const auto how = exchange(comm_, fmt::format("resuming from {}", set), err,
                            fmt::format("{} (step {}, {} ranks, {}, group {}, {}, {})",
                                        same ? "same" : "other", m.step, m.world, m.strategy,
                                        m.group, m.dtype, m.compression));
  for (const auto& s : how)
    if (s.substr(s.find(" (")) != how[0].substr(how[0].find(" (")))
      SB_FAIL("the ranks read different saves of {}: {}; every rank must see the same "
              "checkpoint_dir (a shared file system). Delete {} and rerun from the start", set,
              fmt::join(how, "; "), set);
  const bool reshard =
      std::any_of(how.begin(), how.end(), [](const std::string& s) { return s.starts_with("other"); });
  Loaded loaded;
  if (reshard) {
    loaded = load_resharded(set, m, run);
  } else {  // a rank's unreadable file fails every rank
    exchange(comm_, fmt::format("resuming from {}", set), attempt([&] { load_same_layout(rf, state); }));
  }
  step_ = m.step;
  refresh_replicas();
  return loaded;
}

// The set was written by this mesh: this rank's file streams into the engine as it is (its
// master and moments into the tensors or the offload file, piece by piece), then its state
// is decoded. Not collective: every rank agreed before.
void Engine::load_same_layout(const ckpt::RankFile& agreed, comm::StateDict& state) {
  const RankFile rf = ckpt::read_rank_file_streamed(agreed.path, "the commit marker lists it",
                                                    payload_parts(units_, store_.get(), /*save=*/false));
  // The file the ranks agreed on (its header read first), not one put in its place since.
  SB_CHECK(rf.h.checksum == agreed.h.checksum && rf.h.step == agreed.h.step &&
               rf.h.layouts == agreed.h.layouts,
           "checkpoint {} changed while it was being resumed (checksum {:016x}, then {:016x}); "
           "nothing may write checkpoint_dir during a resume: rerun", agreed.path,
           agreed.h.checksum, rf.h.checksum);
  state = ckpt::decode_state(rf);
  restore_learned(state, units_, last_acquire_order_, rf.path);
  restore_loss_scale(state, rf.path);
  coll_->load_compression_state(state);
}

// Another mesh, strategy or world wrote the set. With the tensor-parallel layout unchanged a
// unit's flat buffer means the same elements in every file holding its block, so each rank
// streams the byte ranges of its own shard (load_streamed): memory holds one 64 MiB piece.
// Otherwise every rank assembles the whole parameters of its units from all the files and
// takes its part (load_assembled). What belongs to the old shards is not carried over: the
// compression state (error-feedback residuals, PowerSGD's Q, stochastic-rounding generators)
// starts fresh, and what the engine learned about unit use is learned again on the first
// forward. Loss scaling's state carries over.
Engine::Loaded Engine::load_resharded(const std::string& set, const ckpt::Marker& m, const ckpt::Header& run) {
  Loaded loaded;
  comm::StateDict state;
  const auto& specs = model_.units();
  const std::string err = attempt([&] {
    // Each rank's file holds its ep rank's experts; reassembling them is not built.
    SB_CHECK(std::none_of(specs.begin(), specs.end(), [](const models::UnitSpec& u) { return u.expert; }),
             "checkpoint {} was written by another mesh, strategy or world ({} ranks, {}); a mixture "
             "of experts' checkpoint is loaded only by the configuration that wrote it (resharding "
             "experts is not built): resume with that configuration", set, m.world, m.strategy);
    const std::string hint = fmt::format("the set was written by {} ranks; every rank file is needed to "
                                         "read it on another mesh", m.world);
    // The pieces go into the tensors (payload_parts: host or device) or the offload file.
    const auto src = ckpt::flat_sources(set, m, run.layouts, hint);
    if (!src) {
      load_assembled(set, m, state);
      return;
    }
    load_streamed(set, *src);
    // The sources were read by byte range, unchecked: rank j checks the old files j, j + this
    // world, ... whole (streamed through one piece, their checksums; a failure fails every
    // rank), and every rank takes rank 0's state entries.
    for (int r = comm_.rank(); r < m.world; r += comm_.size())
      ckpt::check_in_set(ckpt::verify_rank_file(ckpt::rank_file(set, r), hint), m, r, set);  // not replaced since
    const ckpt::RankFile rf0 = ckpt::read_rank_state(ckpt::rank_file(set, 0), hint);
    ckpt::check_in_set(rf0, m, 0, set);
    state = ckpt::decode_state(rf0);
    loaded.streamed = true;
  });
  exchange(comm_, fmt::format("resuming from {} on another mesh", set), err);
  std::vector<std::string> reset;
  for (const auto& [name, t] : state)
    if (!name.starts_with("engine/")) reset.push_back(name);
  restore_loss_scale(state, ckpt::rank_file(set, 0));
  loaded.resharded_from = fmt::format("{} ranks, {}, sharding groups of {}", m.world,
                                      m.strategy, m.group);
  if (!reset.empty())
    loaded.reset = fmt::format("the compression state of the old shards ({} entries: {}) was "
                               "reset: error-feedback residuals, PowerSGD's Q and stochastic-"
                               "rounding generators belong to the mesh that wrote them",
                               reset.size(), fmt::join(reset, ", "));
  if (!loaded.reset.empty() && comm_.rank() == 0)
    std::fprintf(stderr, "warning: resuming %s on another mesh: %s\n", set.c_str(),
                 loaded.reset.c_str());
  return loaded;
}

// Each unit's master and moments, piece by piece, from the byte ranges of the files that hold
// this rank's shard of them (ckpt::FlatReader) into the tensors or the offload file.
void Engine::load_streamed(const std::string& set, const std::vector<ckpt::FlatSources>& src) {
  const auto& specs = model_.units();
  SB_CHECK(src.size() == units_.size(), "checkpoint {}: {} units' sources for {} units", set, src.size(),
           units_.size());
  const auto parts = payload_parts(units_, store_.get(), /*save=*/false);
  const auto buf = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(4096, ckpt::kStreamPiece)), std::free);
  SB_CHECK(buf != nullptr, "cannot allocate the {}-byte buffer to resume from {}", ckpt::kStreamPiece, set);
  ckpt::FlatReader reader(comm_.rank());  // replicas: rank r reads the r-th (mod their number)
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Unit& U = *units_[u];
    const std::string what = fmt::format("checkpoint {}, unit {}", set, specs[u].name);
    SB_CHECK(!src[u].kind[0].empty(), "{}: no rank file of the set holds it: it was written for another model, "
             "or the set is incomplete", what);
    SB_CHECK(src[u].numel == U.flat.numel, "{}: it holds {} elements there, {} in this model: it was written "
             "for another model", what, src[u].numel, U.flat.numel);
    const std::int64_t begin = layout_.params_sharded ? U.range.offset : 0;
    for (int k = 0; k < 3; ++k) {
      const ckpt::PayloadPart& part = parts[3 * u + static_cast<std::size_t>(k)];
      const std::int64_t first = k == 0 ? begin : begin + U.opt_off, n = k == 0 ? U.master_n : U.opt_n;
      SB_CHECK(part.bytes == static_cast<std::uint64_t>(n) * 4, "{}: {} bytes where its shard has {} elements",
               what, part.bytes, n);
      for (std::uint64_t off = 0; off < part.bytes; off += ckpt::kStreamPiece) {
        const auto bytes = std::min<std::uint64_t>(ckpt::kStreamPiece, part.bytes - off);
        reader.read(src[u], k, first + static_cast<std::int64_t>(off / 4), static_cast<std::int64_t>(bytes / 4),
                    buf.get(), what);
        part.io(off, bytes, buf.get());
        sb::heartbeat::tick();
      }
    }
  }
}

// Every rank assembles the whole parameters of its units from the files that hold them, one
// unit at a time (ckpt::verified_files, then ckpt::assemble_from per unit), and takes its part
// (its tp blocks, its shard).
void Engine::load_assembled(const std::string& set, const ckpt::Marker& m, comm::StateDict& state) {
  const auto& specs = model_.units();
  std::set<int> wanted;
  for (std::size_t u = 0; u < specs.size(); ++u) wanted.insert(specs[u].whole(static_cast<int>(u)));
  // The files' checksums split over the ranks, as on the streamed path (a failure on one
  // fails every rank: load_resharded's exchange).
  const std::vector<ckpt::RankFile> files = ckpt::verified_files(set, m, wanted, &state, comm_.rank(), comm_.size());
  // One unit whole at a time (12 bytes a parameter of the largest unit, not of all the rank's:
  // under tp a rank's units are every unit of the model).
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& U = *units_[u];
    const int whole = specs[u].whole(static_cast<int>(u));
    const ckpt::Logical lg = ckpt::assemble_from(files, {whole}, /*moments=*/true, set);
    const std::int64_t begin = layout_.params_sharded ? U.range.offset : 0;
    const auto p = ckpt::unit_flat(lg, whole, specs[u], 0, U.range.padded, set).narrow(0, begin, U.master_n);
    if (U.master.defined())
      U.master.copy_(p);
    else  // offload_master
      store_->set_master(static_cast<int>(u), p);
    auto mo = ckpt::unit_flat(lg, whole, specs[u], 1, U.range.padded, set).narrow(0, begin + U.opt_off, U.opt_n);
    auto v = ckpt::unit_flat(lg, whole, specs[u], 2, U.range.padded, set).narrow(0, begin + U.opt_off, U.opt_n);
    if (store_) {
      store_->set_moments(static_cast<int>(u), mo, v);
    } else {
      U.exp_avg.copy_(mo);
      U.exp_avg_sq.copy_(v);
    }
  }
}

// Loss scaling's state (engine/loss_scale), when this run scales (else ignored; absent when
// the saving run did not scale: this run starts from loss_scale_init).
void Engine::restore_loss_scale(comm::StateDict& state, const std::string& path) {
  auto it = state.find("engine/loss_scale");
  if (it == state.end()) return;
  const torch::Tensor ls = it->second;
  SB_CHECK(ls.numel() == 3 && ls.scalar_type() == torch::kDouble,
           "checkpoint {}: engine/loss_scale has {} values, expected 3", path, ls.numel());
  if (cfg_.loss_scaling) {
    scale_ = ls[0].item<double>();
    good_steps_ = static_cast<std::int64_t>(ls[1].item<double>());
    skipped_ = static_cast<std::int64_t>(ls[2].item<double>());
    SB_CHECK(std::isfinite(scale_) && scale_ > 0, "checkpoint {}: engine/loss_scale holds "
             "the scale {}; delete the set or resume = false", path, scale_);
  }
  state.erase(it);
}

std::int64_t committed_checkpoint_step(const std::string& dir) {
  return ckpt::committed_step(dir);
}

// Offline: the fp32 master parameters of the newest committed set, assembled in one process
// from the shard layouts of all its files (any strategy, world and mesh: tp blocks joined,
// pipeline stages put together) in the one-process model's units.
models::UnitTensors read_checkpoint_params(const std::string& dir, const models::Model& model) {
  const ckpt::Chosen chosen = ckpt::choose_set(dir);
  if (!chosen.warning.empty()) std::fprintf(stderr, "warning: %s\n", chosen.warning.c_str());
  const std::string& set = chosen.set_dir;
  const ckpt::Marker m = ckpt::read_marker(set);
  const ckpt::Logical lg = ckpt::assemble(set, m, {}, /*moments=*/false);
  const auto& specs = model.units();
  std::set<int> in_set;
  for (const auto& [key, p] : lg) in_set.insert(key.first);
  SB_CHECK(in_set.size() == specs.size(), "checkpoint {} has {} units, model '{}' has {}: it was "
           "written for another model", set, in_set.size(), model.config().preset, specs.size());
  models::UnitTensors out;
  for (std::size_t u = 0; u < specs.size(); ++u) {
    std::vector<torch::Tensor> ps;
    for (const models::ParamSpec& p : specs[u].params)
      ps.push_back(param_of(lg, static_cast<int>(u), specs[u].name, p, 0, set));
    out.push_back(std::move(ps));
  }
  return out;
}

void export_checkpoint(const std::string& dir, const models::Model& model,
                       const std::string& safetensors_path) {
  data::save_checkpoint(model, read_checkpoint_params(dir, model), safetensors_path);
}

}  // namespace sb::fsdp
