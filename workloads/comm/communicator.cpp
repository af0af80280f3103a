// Tensor collectives: groups, the checks and byte accounting of each plain collective, the
// choice of backend per (operation, size) (backend.h), the groups' communicators (a second
// one per group for chained collectives, Collective::chain_comm), and trace events. What the
// MPI calls are: backend_mpi.cpp; how they run: progress_engine.cpp.
#include "workloads/comm/communicator.h"

#include <algorithm>
#include <mutex>


#include "harness/core/check.h"
#include "harness/core/fault.h"
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
Communicator::Communicator(MPI_Comm world, int shard_group, bool async,
                           const BackendChoice& backend)
    : choice_(backend) {
  if (shard_group != 0) {  // checked before any collective, so every rank fails alike
    int n = 0;
    MPI_Comm_size(world, &n);
    SB_CHECK(shard_group >= 1 && n % shard_group == 0,
             "shard_group {} must be >= 1 and divide the world size {} (e.g. shard_group = {})",
             shard_group, n, n);
  }
  MPI_Comm_dup(world, &world_);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world_, &rank_[0]);
  MPI_Comm_size(world_, &size_[0]);
  const int r = rank_[0], n = size_[0];

  int s = shard_group;
  if (s == 0) {  // ranks per node; every node must hold the same number of ranks
    MPI_Comm node;
    MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &s);
    MPI_Comm_free(&node);
    int lo = s, hi = s;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, world_);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, world_);
    SB_CHECK(lo == hi, "nodes hold between {} and {} ranks; set shard_group explicitly to a "
             "divisor of the world size {}", lo, hi, n);
  }
  SB_CHECK(s >= 1 && n % s == 0, "shard_group {} must be >= 1 and divide the world size {} "
           "(e.g. shard_group = {})", s, n, n);
  // Shard groups are contiguous blocks of ranks (block placement puts one on each node).
  MPI_Comm_split(world_, r / s, r, &shard_);
  MPI_Comm_split(world_, r % s, r, &replica_);
  for (MPI_Comm c : {shard_, replica_}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(shard_, &rank_[1]);
  MPI_Comm_size(shard_, &size_[1]);
  MPI_Comm_rank(replica_, &rank_[2]);
  MPI_Comm_size(replica_, &size_[2]);
  const MPI_Comm groups[3] = {world_, shard_, replica_};
  for (int i = 0; i < 3; ++i) MPI_Comm_dup(groups[i], &chain_[i]);  // inherits MPI_ERRORS_RETURN

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
  const GroupComms comms{{world_, shard_, replica_}};
  for (const auto& name : names) {
    backends_.push_back(make_backend(name, comms));
    if (name == "mpi") mpi_ = backends_.back().get();
  }
  if (table_)
    for (const auto& op_routes : table_->routes()) {
      routes_.emplace_back();
      for (const auto& r : op_routes)
        for (auto& b : backends_)
          if (r.backend == b->name()) routes_.back().push_back({r.max_bytes, b.get()});
    }

  engine_ = std::make_unique<ProgressEngine>(async);
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
  engine_.reset();  // first: it completes (or, while unwinding, aborts) what is outstanding
  backends_.clear();  // before the communicators they were made over
  for (MPI_Comm* c : {&chain_[0], &chain_[1], &chain_[2], &shard_, &replica_, &world_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

int Communicator::rank(Group g) const { return rank_[static_cast<int>(g)]; }
int Communicator::size(Group g) const { return size_[static_cast<int>(g)]; }
MPI_Comm Communicator::mpi(Group g) const {
  return g == Group::World ? world_ : g == Group::Shard ? shard_ : replica_;
}


// The engine runs what the collective does; the communicator adds where (the group's
// communicators) and what it means: the trace event reported on completion (on the
// completing thread).
Request Communicator::issue(Collective c, Group g, const char* op, const std::string& kind,
                            std::uint64_t logical, std::uint64_t wire, bool sync,
                            const char* backend) {
  c.comm = mpi(g);
  c.chain_comm = chain_[static_cast<int>(g)];
  c.label = sb::heartbeat::issued({op, group_name(g), backend, kind});
  c.done = [this, op, g, kind, backend, logical, wire](double t0, double t1) {
    trace(op, g, kind, backend, logical, wire, t0, t1);
  };
  return engine_->issue(c, sync);
}

Request Communicator::issue(const Coll& c, bool sync) {
  Collective x;
  x.phases = {c.phase};
  x.reads = c.reads, x.writes = c.writes;
  return issue(std::move(x), c.g, c.op, c.kind, c.logical, c.wire, sync, c.backend);
}

void Communicator::set_trace_hook(TraceHook hook, double origin_wtime) {
  hook_ = std::move(hook);
  origin_ = origin_wtime;
}

void Communicator::trace(const char* op, Group g, const std::string& kind, const char* backend,
                         std::uint64_t logical_bytes, std::uint64_t wire, double t0, double t1) {
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
  hook_(e);
}

// Every plain collective: its buffers checked here, its bytes counted here (the same for
// every backend), its phase from the backend chosen for its size.
Request Communicator::run(const CollArgs& a, Group g, const std::string& kind, bool sync) {
  const char* op = coll_name(a.op);
  for (const torch::Tensor* t : {&a.in, &a.out})
    SB_CHECK(t->defined() && t->is_contiguous(), "{}: collective buffers must be defined and "
             "contiguous", op);
  const bool half = a.in.scalar_type() == torch::kBFloat16 || a.in.scalar_type() == torch::kFloat16;
  SB_CHECK(!half || a.red == ReduceOp::Sum, "{}: only sums are defined on {} tensors; reduce in "
           "float32", op, c10::toString(a.in.scalar_type()));
  // The nccl-tests size: all_gather's output, every other collective's input.
  const torch::Tensor& sized = a.op == CollOp::AllGather ? a.out : a.in;
  Backend* b = &pick(a.op, static_cast<std::uint64_t>(sized.nbytes()));
  std::string why = b->refuses(a);
  if (!why.empty() && a.in.device().is_cpu() && a.out.device().is_cpu()) {
    b = mpi_;  // host tensors a device backend refuses (a GPU run's loss and norm scalars)
    why = b->refuses(a);
  }
  SB_CHECK(why.empty(), "comm_backend = \"{}\"{}: {}", choice_.name,
           table_ ? fmt::format(" (the table {} routes {} of {} bytes to {})", choice_.table, op,
                                sized.nbytes(), b->name())
                  : "",
           why);
  Coll c{op, g, kind, b->phase(a, g), b->name()};
  c.reads = span(a.in), c.writes = span(a.out);
  c.logical = wire_bytes(op, fp32_bytes(sized), size(g));
  c.wire = wire_bytes(op, static_cast<std::uint64_t>(sized.nbytes()), size(g));
  return issue(c, sync);
}

Request Communicator::all_gather_impl(const torch::Tensor& shard, const torch::Tensor& full,
                                      Group g, const std::string& kind, bool sync) {
  SB_CHECK(shard.scalar_type() == full.scalar_type(), "all_gather: shard is {} but full is {}",
           c10::toString(shard.scalar_type()), c10::toString(full.scalar_type()));
  SB_CHECK(full.numel() == shard.numel() * size(g),
           "all_gather: full has {} elements, expected shard {} x {} ranks of the {} group",
           full.numel(), shard.numel(), size(g), group_name(g));
  return run({CollOp::AllGather, shard, full}, g, kind, sync);
}

Request Communicator::reduce_scatter_impl(const torch::Tensor& full, const torch::Tensor& shard,
                                          Group g, const std::string& kind, ReduceOp op,
                                          bool sync) {
  SB_CHECK(shard.scalar_type() == full.scalar_type(), "reduce_scatter: full is {} but shard is {}",
           c10::toString(full.scalar_type()), c10::toString(shard.scalar_type()));
  SB_CHECK(full.numel() == shard.numel() * size(g),
           "reduce_scatter: full has {} elements, expected shard {} x {} ranks of the {} group",
           full.numel(), shard.numel(), size(g), group_name(g));
  return run({CollOp::ReduceScatter, full, shard, op}, g, kind, sync);
}

Request Communicator::all_reduce_impl(const torch::Tensor& t, Group g, const std::string& kind,
                                      ReduceOp op, bool sync) {
  return run({CollOp::AllReduce, t, t, op}, g, kind, sync);
}

Request Communicator::broadcast_impl(const torch::Tensor& t, int root, Group g,
                                     const std::string& kind, bool sync) {
  SB_CHECK(root >= 0 && root < size(g), "broadcast: root {} is not a rank of the {} group (size {})",
           root, group_name(g), size(g));
  return run({CollOp::Broadcast, t, t, ReduceOp::Sum, root}, g, kind, sync);
}

Request Communicator::all_to_all_impl(const torch::Tensor& in_t, const torch::Tensor& out_t,
                                      Group g, const std::string& kind, bool sync) {
  SB_CHECK(in_t.scalar_type() == out_t.scalar_type() && in_t.numel() == out_t.numel() &&
               in_t.numel() % size(g) == 0,
           "all_to_all: in ({} elements) and out ({}) must have one dtype and equal sizes "
           "divisible by the {} group size {}", in_t.numel(), out_t.numel(), group_name(g), size(g));
  return run({CollOp::AllToAll, in_t, out_t}, g, kind, sync);
}

double Communicator::all_reduce_scalar(double v, Group g, ReduceOp op) {
  auto t = torch::full({1}, v, torch::kFloat64);
  all_reduce(t, g, "other", op);
  return t.item<double>();
}

}  // namespace sb::comm
