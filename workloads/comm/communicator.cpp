// Tensor collectives: groups, the checks and byte accounting of each collective, the choice
// of backend per (operation, size) (backend.h), the groups' communicators (a second one per
// group for chained collectives: the chain lane), and trace events. What a library does:
// backend_*.cpp; how collectives progress: progress_engine.h.
#include "workloads/comm/communicator.h"

#include <algorithm>
#include <mutex>


#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"
#include "workloads/comm/backend_table.h"

namespace sb::comm {

double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0.0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(n - 1) / n;
}

// In integers, so that equal inputs give equal counts on every path (a compressed collective's
// logical bytes equal the plain one's to the byte).
std::uint64_t wire_bytes(const std::string& op, std::uint64_t bytes, int n) {
  if (n <= 1) return 0;
  const auto m = static_cast<std::uint64_t>(n);
  if (op == "broadcast") return bytes;
  if (op == "all_reduce") return bytes * 2 * (m - 1) / m;
  return bytes * (m - 1) / m;
}

// 16-bit floats count as fp32; fp64 (loss and norm scalars) and integers as they are.
std::uint64_t fp32_bytes(const torch::Tensor& t) {
  const bool half = t.is_floating_point() && t.element_size() < 4;
  return half ? static_cast<std::uint64_t>(t.numel()) * 4 : static_cast<std::uint64_t>(t.nbytes());
}

namespace {
// The file's text on every rank of comm, read by rank 0 (collective); rank 0's error, if
// any, thrown on every rank.
std::string broadcast_file(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string text, err;
  if (rank == 0) {
    try {
      text = read_table_file(path);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  long long len[2] = {static_cast<long long>(text.size()), static_cast<long long>(err.size())};
  sb::check_mpi(MPI_Bcast(len, 2, MPI_LONG_LONG, 0, comm), "MPI_Bcast (tuning table)");
  text.resize(static_cast<std::size_t>(len[0]));
  err.resize(static_cast<std::size_t>(len[1]));
  sb::check_mpi(MPI_Bcast(text.data(), static_cast<int>(len[0]), MPI_CHAR, 0, comm),
                "MPI_Bcast (tuning table)");
  sb::check_mpi(MPI_Bcast(err.data(), static_cast<int>(len[1]), MPI_CHAR, 0, comm),
                "MPI_Bcast (tuning table)");
  if (!err.empty()) throw sb::Error(err);
  return text;
}

}  // namespace

// ---- Communicator ------------------------------------------------------------------------
namespace {

// shard_group's mesh: dp_shard = shard_group and the replicas the rest; 0 = a node's ranks.
sb::Mesh shard_group_mesh(MPI_Comm world, int shard_group) {
  int n = 0;
  MPI_Comm_size(world, &n);
  // Checked before any collective, so every rank fails alike.
  SB_CHECK(shard_group == 0 || (shard_group >= 1 && n % shard_group == 0),
           "shard_group {} must be >= 1 and divide the world size {} (e.g. shard_group = {})",
           shard_group, n, n);
  sb::Mesh m;
  m.dp_shard = shard_group;
  m.dp_replicate = shard_group == 0 ? 0 : n / shard_group;
  return m;
}

}  // namespace

Communicator::Communicator(MPI_Comm world, int shard_group, bool async,
                           const BackendChoice& backend)
    : Communicator(world, shard_group_mesh(world, shard_group), async, backend) {}

Communicator::Communicator(MPI_Comm world, const sb::Mesh& mesh, bool async,
                           const BackendChoice& backend)
    : choice_(backend) {
  build(world, mesh, async);
}

void Communicator::build(MPI_Comm world, sb::Mesh mesh, bool async) {
  int n = 0;
  MPI_Comm_size(world, &n);
  // Checked before any collective, so every rank fails alike.
  SB_CHECK(!mesh.resolved() || mesh.world() == n,
           "the process mesh {} has {} ranks but the world has {}: dp_replicate x dp_shard x tp "
           "x pp x sp must equal the world size", mesh.str(), mesh.world(), n);
  MPI_Comm_dup(world, &world_);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world_, &rank_[0]);
  MPI_Comm_size(world_, &size_[0]);
  const int r = rank_[0];

  if (!mesh.resolved()) {  // the shard group is a node's ranks; every node must hold as many
    MPI_Comm node;
    MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node);
    int s = 0;
    MPI_Comm_size(node, &s);
    MPI_Comm_free(&node);
    int lo = s, hi = s;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, world_);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, world_);
    SB_CHECK(lo == hi, "nodes hold between {} and {} ranks; set shard_group explicitly to a "
             "divisor of the world size {}", lo, hi, n);
    const std::string why = mesh.resolve_node_local(n, s);
    SB_CHECK(why.empty(), "{}", why);
  }
  mesh_ = mesh;
  // One communicator per mesh dimension, by the mesh's placement (mesh.h: dp_shard inside
  // dp_replicate, so a shard group is contiguous ranks, on one node when it fits; tp
  // innermost). Made for every dimension, size 1 included, so code never asks which exist.
  groups_.comm[0] = world_;
  const sb::MeshDim dims[] = {sb::MeshDim::dp_shard, sb::MeshDim::dp_replicate,
                              sb::MeshDim::tp, sb::MeshDim::pp, sb::MeshDim::sp};
  // The shard group spans dp_shard x sp: sequence-parallel ranks hold the same parameters and
  // each a share of every gradient (Ulysses' sequence-data-parallel group; torchtitan's
  // dp_shard_cp), so FSDP shards and reduces over both (models/sequence_parallel.h).
  const auto group_dims = [&](int i) {
    return i == 1 ? std::vector<sb::MeshDim>{sb::MeshDim::dp_shard, sb::MeshDim::sp}
                  : std::vector<sb::MeshDim>{dims[i - 1]};
  };
  // Ep and Edp (the last two) are not mesh dimensions but a split of the shard group.
  const int kMeshGroups = kGroups - 2;
  const auto members = [&](int i) {
    return i < kMeshGroups ? mesh_.group(r, group_dims(i)) : mesh_.expert_group(r, i == kMeshGroups);
  };
  for (int i = 1; i < kGroups; ++i) {
    const int color = i < kMeshGroups ? mesh_.color(r, group_dims(i)) : members(i).front();
    MPI_Comm_split(world_, color, r, &groups_.comm[i]);
    MPI_Comm_set_errhandler(groups_.comm[i], MPI_ERRORS_RETURN);
    MPI_Comm_rank(groups_.comm[i], &rank_[i]);
    MPI_Comm_size(groups_.comm[i], &size_[i]);
  }
  for (int i = 0; i < kGroups; ++i)  // the chain lane; inherits MPI_ERRORS_RETURN
    MPI_Comm_dup(groups_.comm[i], &groups_.chain[i]);
  // Each group's members as world ranks, once (a point-to-point trace row names its peer's).
  members_[0].resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) members_[0][static_cast<std::size_t>(i)] = i;
  for (int i = 1; i < kGroups; ++i) members_[i] = members(i);

  // The backends, made in the same order on every rank (each bootstraps collectively).
  std::vector<std::string> names{choice_.name};
  if (choice_.name == "auto") {
    // Rank 0 reads, every rank parses the same text: ranks never disagree about the table
    // (no shared file system, a file re-tuned on one node), and a missing file fails all.
    auto t = std::make_shared<BackendTable>(
        parse_table(broadcast_file(choice_.table, world_), choice_.table));
    check_table_fits(*t, choice_.table, n, host_set(world_));
    names = t->backends;
    table_ = std::move(t);
  }
  // mpi always: it also runs what a device backend refuses on the host (nccl: the loss and
  // norm scalars of a GPU run).
  if (std::find(names.begin(), names.end(), "mpi") == names.end()) names.push_back("mpi");
  const GroupComms& comms = groups_;
  for (const auto& name : names) {
    backends_.push_back(make_backend(name, comms));
    alone_.push_back(find_backend(name)->alone);
    if (name == "mpi") mpi_ = backends_.back().get();
  }
  if (table_)
    for (const auto& op_routes : table_->routes()) {
      routes_.emplace_back();
      for (const auto& r : op_routes)
        for (auto& b : backends_)
          if (r.backend == b->name()) routes_.back().push_back({r.max_bytes, b.get()});
    }

  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  async_ = async && provided == MPI_THREAD_MULTIPLE;  // MPI transfers on a second thread
  set_progress("thread");
}

namespace {
double wtime() { return MPI_Wtime(); }
}  // namespace

void Communicator::set_progress(const std::string& name) {
  progress_ = &find_progress(name);
  engine_.reset();  // before its successor starts a thread of its own
  engine_ = progress_->make({async_, &wtime});
}

std::string Communicator::progress_label() const {
  return progress_->needs_thread && !async_ ? "blocking" : progress_->name;
}

std::string Communicator::backend_source() const {
  if (!table_) return "";
  return fmt::format("{} (measured {} by {}, commit {})", choice_.table, table_->created,
                     table_->source, table_->git_commit);
}

Backend& Communicator::pick(CollOp op, std::uint64_t bytes) {
  if (!table_) return *backends_.front();
  const auto& r = routes_[static_cast<std::size_t>(op)];
  SB_CHECK(!r.empty(), "comm_tuning: the table {} has no entry for {}; {}", choice_.table,
           coll_name(op), kMakeTable);
  for (const auto& [max_bytes, b] : r)
    if (bytes <= max_bytes) return *b;
  return *r.back().second;
}

Communicator::~Communicator() {
  // A failure on this rank is unwinding: a peer may be dead or waiting for us, so completing
  // our requests (or a thread blocked in one) could hang. End every rank instead.
  sb::abort_if_unwinding("the communicator's progress engine");
  engine_.reset();  // first: it completes what is outstanding
  backends_.clear();  // before the communicators they were made over
  for (int i = kGroups - 1; i >= 0; --i)  // world (comm[0]) last
    for (MPI_Comm* c : {&groups_.chain[i], &groups_.comm[i]})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  world_ = MPI_COMM_NULL;
}

int Communicator::rank(Group g) const { return rank_[static_cast<int>(g)]; }
int Communicator::size(Group g) const { return size_[static_cast<int>(g)]; }
MPI_Comm Communicator::mpi(Group g) const {
  return groups_.of(g);
}


// The engine runs what the collective does; the communicator adds where (the channel of its
// group and lane, through the backend's transfers) and what it means: the trace event
// reported on completion (on the completing thread).
std::function<void(double, double)> Communicator::traced(const char* op, Group g,
                                                         const std::string& kind,
                                                         std::function<std::string()> backend,
                                                         std::uint64_t logical,
                                                         std::uint64_t wire, int peer) {
  return [this, op, g, kind, backend = std::move(backend), logical, wire, peer](double t0,
                                                                                double t1) {
    trace(op, g, kind, backend(), logical, wire, t0, t1, peer);
  };
}

Request Communicator::issue(Composite x, Group g, const char* op, const std::string& kind,
                            std::uint64_t logical, std::uint64_t wire, bool sync) {
  const Lane lane = x.phases.size() > 1 ? Lane::Chain : Lane::Plain;
  // The backends its phases ran on, in order of first use; written by the thread that runs
  // the phases, read after the last one on the same thread.
  auto ran = std::make_shared<std::string>();
  Collective c;
  c.name = op;
  c.reads = x.reads, c.writes = x.writes;
  for (CompositePhase& p : x.phases) {
    Phase e;
    e.prepare = std::move(p.prepare);
    e.after = std::move(p.after);
    e.transfer = [this, args = std::move(p.args), g, lane, ran]() -> std::shared_ptr<Transfer> {
      const CollArgs a = args();
      check(a, g);
      Backend& b = route(a, lane);
      const std::string name = b.name();
      if (ran->empty())
        *ran = name;
      else if (("+" + *ran + "+").find("+" + name + "+") == std::string::npos)
        *ran += "+" + name;
      return b.transfer(a, {g, lane});
    };
    c.phases.push_back(std::move(e));
  }
  c.done = traced(op, g, kind, [ran] { return *ran; }, logical, wire);
  // Its phases are routed as they start: the heartbeat names comm_backend as given.
  c.label = sb::heartbeat::issued({op, group_name(g), choice_.name, kind});
  return engine_->issue(c, sync);
}

void Communicator::set_trace_hook(TraceHook hook, double origin_wtime) {
  hook_ = std::move(hook);
  origin_ = origin_wtime;
}

void Communicator::trace(const char* op, Group g, const std::string& kind, const std::string& backend,
                         std::uint64_t logical_bytes, std::uint64_t wire, double t0, double t1,
                         int peer) {
  sb::fault_point("collective");  // on the thread that completes it (tests/mpi/failure_paths.sh)
  if (!hook_) return;
  sb::CommEvent e;
  e.step = step_;
  e.rank = rank_[0];
  e.op = op;
  e.group = group_name(g);
  e.kind = kind;
  e.backend = backend;
  e.logical_bytes = logical_bytes;
  e.wire_bytes = wire;
  e.start_s = t0 - origin_;
  e.duration_s = t1 - t0;
  e.peer = peer;
  e.dim = group_dim(g);
  hook_(e);
}

void Communicator::check(const CollArgs& a, Group g) const {
  switch (a.op) {
    case CollOp::AllGather:
      SB_CHECK(a.in.scalar_type() == a.out.scalar_type(), "all_gather: shard is {} but full is {}",
               c10::toString(a.in.scalar_type()), c10::toString(a.out.scalar_type()));
      SB_CHECK(a.out.numel() == a.in.numel() * size(g),
               "all_gather: full has {} elements, expected shard {} x {} ranks of the {} group",
               a.out.numel(), a.in.numel(), size(g), group_name(g));
      break;
    case CollOp::ReduceScatter:
      SB_CHECK(a.out.scalar_type() == a.in.scalar_type(), "reduce_scatter: full is {} but shard is {}",
               c10::toString(a.in.scalar_type()), c10::toString(a.out.scalar_type()));
      SB_CHECK(a.in.numel() == a.out.numel() * size(g),
               "reduce_scatter: full has {} elements, expected shard {} x {} ranks of the {} group",
               a.in.numel(), a.out.numel(), size(g), group_name(g));
      break;
    case CollOp::AllReduce: break;
    case CollOp::Broadcast:
      SB_CHECK(a.root >= 0 && a.root < size(g), "broadcast: root {} is not a rank of the {} group "
               "(size {})", a.root, group_name(g), size(g));
      break;
    case CollOp::AllToAll:
      SB_CHECK(a.in.scalar_type() == a.out.scalar_type() && a.in.numel() == a.out.numel() &&
                   a.in.numel() % size(g) == 0,
               "all_to_all: in ({} elements) and out ({}) must have one dtype and equal sizes "
               "divisible by the {} group size {}", a.in.numel(), a.out.numel(), group_name(g),
               size(g));
      break;
  }
  const char* op = coll_name(a.op);
  for (const torch::Tensor* t : {&a.in, &a.out})
    SB_CHECK(t->defined() && t->is_contiguous(), "{}: collective buffers must be defined and "
             "contiguous", op);
  const bool half = a.in.scalar_type() == torch::kBFloat16 || a.in.scalar_type() == torch::kFloat16;
  SB_CHECK(!half || a.red == ReduceOp::Sum, "{}: only sums are defined on {} tensors; reduce in "
           "float32", op, c10::toString(a.in.scalar_type()));
}

// The nccl-tests size: all_gather's output, every other collective's input.
namespace {
const torch::Tensor& sized(const CollArgs& a) { return a.op == CollOp::AllGather ? a.out : a.in; }
}  // namespace

bool Communicator::alone(const Backend& b) const {
  for (std::size_t i = 0; i < backends_.size(); ++i)
    if (backends_[i].get() == &b) return alone_[i];
  return false;
}

Backend& Communicator::route(const CollArgs& a, Lane lane) {
  const char* op = coll_name(a.op);
  Backend* b = &pick(a.op, static_cast<std::uint64_t>(sized(a).nbytes()));
  std::string why = b->refuses(a, lane);
  if (!why.empty() && a.in.device().is_cpu() && a.out.device().is_cpu()) {
    b = mpi_;  // host tensors a device backend refuses (a GPU run's loss and norm scalars)
    why = b->refuses(a, lane);
  }
  SB_CHECK(why.empty(), "comm_backend = \"{}\"{}: {}", choice_.name,
           table_ ? fmt::format(" (the table {} routes {} of {} bytes to {})", choice_.table, op,
                                sized(a).nbytes(), b->name())
                  : "",
           why);
  return *b;
}

// Every plain collective: its buffers checked here, its bytes counted here (the same for
// every backend), its transfer made now, on the issuing thread, by the backend routed to.
Request Communicator::run(const CollArgs& a, Group g, const std::string& kind, bool sync) {
  check(a, g);
  Backend& b = route(a, Lane::Plain);
  const char* op = coll_name(a.op);
  Phase p;
  p.transfer = [t = std::shared_ptr<Transfer>(b.transfer(a, {g, Lane::Plain}))] { return t; };
  p.alone = alone(b);
  Collective c;
  c.name = op;
  c.phases = {std::move(p)};
  c.reads = span(a.in), c.writes = span(a.out);
  const std::uint64_t logical = wire_bytes(op, fp32_bytes(sized(a)), size(g));
  const std::uint64_t wire = wire_bytes(op, static_cast<std::uint64_t>(sized(a).nbytes()), size(g));
  const char* name = b.name();
  c.done = traced(op, g, kind, [name] { return std::string(name); }, logical, wire);
  c.label = sb::heartbeat::issued({op, group_name(g), name, kind});
  return engine_->issue(c, sync);
}

Request Communicator::all_gather_impl(const torch::Tensor& shard, const torch::Tensor& full,
                                      Group g, const std::string& kind, bool sync) {
  return run({CollOp::AllGather, shard, full}, g, kind, sync);
}

Request Communicator::reduce_scatter_impl(const torch::Tensor& full, const torch::Tensor& shard,
                                          Group g, const std::string& kind, ReduceOp op,
                                          bool sync) {
  return run({CollOp::ReduceScatter, full, shard, op}, g, kind, sync);
}

Request Communicator::all_reduce_impl(const torch::Tensor& t, Group g, const std::string& kind,
                                      ReduceOp op, bool sync) {
  return run({CollOp::AllReduce, t, t, op}, g, kind, sync);
}

Request Communicator::broadcast_impl(const torch::Tensor& t, int root, Group g,
                                     const std::string& kind, bool sync) {
  return run({CollOp::Broadcast, t, t, ReduceOp::Sum, root}, g, kind, sync);
}

Request Communicator::all_to_all_impl(const torch::Tensor& in_t, const torch::Tensor& out_t,
                                      Group g, const std::string& kind, bool sync) {
  return run({CollOp::AllToAll, in_t, out_t}, g, kind, sync);
}

// A point-to-point transfer: checked and counted here like a collective, on the backend
// named by comm_backend (an "auto" table has no point-to-point entries: mpi), always started
// on the caller (Phase::alone: see send_async).
Request Communicator::p2p_impl(const P2PArgs& a, Group g, const std::string& kind, bool sync) {
  const char* op = p2p_name(a.op);
  SB_CHECK(a.t.defined() && a.t.is_contiguous(), "{}: the tensor must be defined and contiguous",
           op);
  SB_CHECK(a.peer >= 0 && a.peer < size(g) && a.peer != rank(g),
           "{}: peer {} is not another rank of the {} group (ranks 0..{}, this one is {})", op,
           a.peer, group_name(g), size(g) - 1, rank(g));
  SB_CHECK(a.tag >= 0 && a.tag <= 32767, "{}: tag {} is outside 0..32767 (the tags MPI "
           "guarantees)", op, a.tag);
  Backend* b = table_ ? mpi_ : backends_.front().get();
  std::string why = b->refuses_p2p(a);
  if (!why.empty() && a.t.device().is_cpu()) {
    b = mpi_;  // host tensors a device backend refuses
    why = b->refuses_p2p(a);
  }
  SB_CHECK(why.empty(), "comm_backend = \"{}\": {}", choice_.name, why);
  Phase p;
  p.transfer = [t = std::shared_ptr<Transfer>(b->p2p(a, g))] { return t; };
  p.alone = true;  // on the caller, whatever the backend (see send_async)
  Collective c;
  c.name = op;
  c.phases = {std::move(p)};
  (a.op == P2POp::Send ? c.reads : c.writes) = span(a.t);
  const char* name = b->name();
  c.done = traced(op, g, kind, [name] { return std::string(name); },
                  a.logical_bytes ? a.logical_bytes : fp32_bytes(a.t),
                  static_cast<std::uint64_t>(a.t.nbytes()), world_rank(g, a.peer));
  c.label = sb::heartbeat::issued({op, group_name(g), name, kind});
  return engine_->issue(c, sync);
}

double Communicator::all_reduce_scalar(double v, Group g, ReduceOp op) {
  auto t = torch::full({1}, v, torch::kFloat64);
  all_reduce(t, g, "other", op);
  return t.item<double>();
}

}  // namespace sb::comm
