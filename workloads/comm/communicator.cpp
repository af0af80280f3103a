// Tensor collectives over MPI: groups, what each collective is (its blocking and non-blocking
// MPI calls, what follows completion), dtype mapping (bf16 and fp16 sums as user-defined MPI
// ops), host staging of device tensors, the groups' communicators (a second one per group
// for chained collectives, Collective::chain_comm), and trace events. How they run:
// progress_engine.cpp.
#include "workloads/comm/communicator.h"

#include <mutex>

#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT (Open MPI)

#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"

namespace sb::comm {

const char* group_name(Group g) {
  switch (g) {
    case Group::World: return "world";
    case Group::Shard: return "shard";
    case Group::Replica: return "replica";
  }
  return "?";
}

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

// ---- dtypes ------------------------------------------------------------------------------
MPI_Datatype g_bf16 = MPI_DATATYPE_NULL, g_fp16 = MPI_DATATYPE_NULL;
MPI_Op g_sum_bf16 = MPI_OP_NULL, g_sum_fp16 = MPI_OP_NULL;
std::once_flag g_types_once;

// Half-precision sums accumulate in fp32 and round once per pair (what NCCL does too).
template <typename H>
void sum_half(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = H(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

void init_types() {
  std::call_once(g_types_once, [] {
    MPI_Type_contiguous(2, MPI_BYTE, &g_bf16);
    MPI_Type_commit(&g_bf16);
    MPI_Type_contiguous(2, MPI_BYTE, &g_fp16);
    MPI_Type_commit(&g_fp16);
    MPI_Op_create(&sum_half<c10::BFloat16>, /*commute=*/1, &g_sum_bf16);
    MPI_Op_create(&sum_half<c10::Half>, /*commute=*/1, &g_sum_fp16);
  });
}

MPI_Datatype mpi_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return MPI_FLOAT;
    case torch::kFloat64: return MPI_DOUBLE;
    case torch::kInt64: return MPI_INT64_T;
    case torch::kInt32: return MPI_INT32_T;
    case torch::kUInt8: return MPI_UINT8_T;
    case torch::kInt8: return MPI_INT8_T;
    case torch::kBFloat16: return g_bf16;
    case torch::kFloat16: return g_fp16;
    default:
      SB_FAIL("collective on a {} tensor: supported dtypes are float32, float64, int64, int32, "
              "uint8, int8, bfloat16, float16", c10::toString(t.scalar_type()));
  }
}

MPI_Op mpi_op(const torch::Tensor& t, ReduceOp op) {
  const bool half = t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kFloat16;
  if (half) {
    SB_CHECK(op == ReduceOp::Sum, "only sums are defined on {} tensors; reduce in float32",
             c10::toString(t.scalar_type()));
    return t.scalar_type() == torch::kBFloat16 ? g_sum_bf16 : g_sum_fp16;
  }
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

// The one place device tensors meet MPI: without CUDA-aware MPI, a device tensor is copied
// to a host buffer before the call and (for outputs) back afterwards.
struct Staged {
  torch::Tensor orig, host;
  bool out = false;
  Staged(const torch::Tensor& t, bool is_output, bool cuda_aware) : orig(t), out(is_output) {
    SB_CHECK(t.defined() && t.is_contiguous(), "collective buffers must be defined and contiguous");
    host = (t.device().is_cpu() || cuda_aware) ? t : t.to(torch::kCPU);
  }
  void* ptr() const { return host.data_ptr(); }
  void finish() {
    if (out && !host.is_same(orig)) orig.copy_(host);
  }
};

int as_count(std::int64_t n) {
  SB_CHECK(n <= INT32_MAX, "collective of {} elements exceeds MPI's int count; split it", n);
  return static_cast<int>(n);
}

}  // namespace

// ---- Communicator ------------------------------------------------------------------------
Communicator::Communicator(MPI_Comm world, int shard_group, bool async) {
  init_types();
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

#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif

  engine_ = std::make_unique<ProgressEngine>(async);
}

Communicator::~Communicator() {
  engine_.reset();  // first: it completes (or, while unwinding, aborts) what is outstanding
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
                            std::uint64_t logical, std::uint64_t wire, bool sync) {
  c.comm = mpi(g);
  c.chain_comm = chain_[static_cast<int>(g)];
  c.done = [this, op, g, kind, logical, wire](double t0, double t1) {
    trace(op, g, kind, logical, wire, t0, t1);
  };
  return engine_->issue(c, sync);
}

Request Communicator::issue(const Coll& c, bool sync) {
  Collective x;
  x.phases = {c.phase};
  x.reads = c.reads, x.writes = c.writes;
  return issue(std::move(x), c.g, c.op, c.kind, c.logical, c.wire, sync);
}

void Communicator::set_trace_hook(TraceHook hook, double origin_wtime) {
  hook_ = std::move(hook);
  origin_ = origin_wtime;
}

void Communicator::trace(const char* op, Group g, const std::string& kind,
                         std::uint64_t logical_bytes, std::uint64_t wire, double t0, double t1) {
  sb::fault_point("collective");  // on the thread that completes it (tests/mpi/failure_paths.sh)
  if (!hook_) return;
  sb::CommEvent e;
  e.step = step_;
  e.rank = rank_[0];
  e.op = op;
  e.group = group_name(g);
  e.kind = kind;
  e.logical_bytes = logical_bytes;
  e.wire_bytes = wire;
  e.start_s = t0 - origin_;
  e.duration_s = t1 - t0;
  hook_(e);
}

// Each collective is described once (Coll): its blocking MPI call, its non-blocking one, and
// what follows completion; issue() picks how it runs.
Request Communicator::all_gather_impl(const torch::Tensor& shard, const torch::Tensor& full,
                                      Group g, const std::string& kind, bool sync) {
  SB_CHECK(shard.scalar_type() == full.scalar_type(), "all_gather: shard is {} but full is {}",
           c10::toString(shard.scalar_type()), c10::toString(full.scalar_type()));
  SB_CHECK(full.numel() == shard.numel() * size(g),
           "all_gather: full has {} elements, expected shard {} x {} ranks of the {} group",
           full.numel(), shard.numel(), size(g), group_name(g));
  auto in = std::make_shared<Staged>(shard, false, cuda_aware_);
  auto out = std::make_shared<Staged>(full, true, cuda_aware_);
  const MPI_Datatype ty = mpi_type(in->host);
  const int n = as_count(in->host.numel());
  Coll c{"all_gather", g, kind, {"MPI_Allgather", "MPI_Iallgather"}};
  c.reads = span(shard), c.writes = span(full);
  c.phase.blocking = [=](MPI_Comm comm) {
    return MPI_Allgather(in->ptr(), n, ty, out->ptr(), n, ty, comm);
  };
  c.phase.start = [=](MPI_Comm comm, MPI_Request* r) {
    return MPI_Iallgather(in->ptr(), n, ty, out->ptr(), n, ty, comm, r);
  };
  c.phase.after = [out] { out->finish(); };
  c.logical = wire_bytes("all_gather", fp32_bytes(out->host), size(g));
  c.wire = wire_bytes("all_gather", out->host.nbytes(), size(g));
  return issue(c, sync);
}

Request Communicator::reduce_scatter_impl(const torch::Tensor& full, const torch::Tensor& shard,
                                          Group g, const std::string& kind, ReduceOp op,
                                          bool sync) {
  SB_CHECK(shard.scalar_type() == full.scalar_type(), "reduce_scatter: full is {} but shard is {}",
           c10::toString(full.scalar_type()), c10::toString(shard.scalar_type()));
  SB_CHECK(full.numel() == shard.numel() * size(g),
           "reduce_scatter: full has {} elements, expected shard {} x {} ranks of the {} group",
           full.numel(), shard.numel(), size(g), group_name(g));
  auto in = std::make_shared<Staged>(full, false, cuda_aware_);
  auto out = std::make_shared<Staged>(shard, true, cuda_aware_);
  const MPI_Op mop = mpi_op(full, op);
  const MPI_Datatype ty = mpi_type(in->host);
  const int n = as_count(out->host.numel());
  Coll c{"reduce_scatter", g, kind, {"MPI_Reduce_scatter_block", "MPI_Ialltoall"}};
  c.reads = span(full), c.writes = span(shard);
  c.phase.blocking = [=](MPI_Comm comm) {
    return MPI_Reduce_scatter_block(in->ptr(), out->ptr(), n, ty, mop, comm);
  };
  c.phase.after = [out] { out->finish(); };
  // Non-blocking: an all-to-all of the blocks (one round, the same bytes on the wire as a
  // reduce-scatter) and a local reduction over ranks. Open MPI's Ireduce_scatter_block takes
  // many rounds, each moving only when both ranks call into MPI: with inline progress it
  // finished a unit boundary or more late (measured: gpt2 full_shard backward 6.1 s vs 3.7).
  const int ranks = size(g);
  auto tmp = std::make_shared<torch::Tensor>();  // allocated only on this path
  c.phase.start = [=](MPI_Comm comm, MPI_Request* r) {
    *tmp = torch::empty_like(in->host);
    return MPI_Ialltoall(in->ptr(), n, ty, tmp->data_ptr(), n, ty, comm, r);
  };
  c.phase.after_nb = [=] {
    auto blocks = tmp->view({ranks, n});  // row j: rank j's block for me
    const bool half = blocks.scalar_type() == torch::kBFloat16 ||
                      blocks.scalar_type() == torch::kFloat16;
    torch::Tensor red;
    if (op == ReduceOp::Sum)
      red = half ? blocks.sum(0, false, torch::kFloat).to(blocks.scalar_type()) : blocks.sum(0);
    else
      red = op == ReduceOp::Max ? std::get<0>(blocks.max(0)) : std::get<0>(blocks.min(0));
    out->host.copy_(red);
    *tmp = torch::Tensor();
    out->finish();
  };
  c.logical = wire_bytes("reduce_scatter", fp32_bytes(in->host), size(g));
  c.wire = wire_bytes("reduce_scatter", in->host.nbytes(), size(g));
  return issue(c, sync);
}

Request Communicator::all_reduce_impl(const torch::Tensor& t, Group g, const std::string& kind,
                                      ReduceOp op, bool sync) {
  auto io = std::make_shared<Staged>(t, true, cuda_aware_);
  const MPI_Op mop = mpi_op(t, op);
  const MPI_Datatype ty = mpi_type(io->host);
  const int n = as_count(io->host.numel());
  Coll c{"all_reduce", g, kind, {"MPI_Allreduce", "MPI_Iallreduce"}};
  c.reads = c.writes = span(t);
  c.phase.blocking = [=](MPI_Comm comm) {
    return MPI_Allreduce(MPI_IN_PLACE, io->ptr(), n, ty, mop, comm);
  };
  c.phase.start = [=](MPI_Comm comm, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, io->ptr(), n, ty, mop, comm, r);
  };
  c.phase.after = [io] { io->finish(); };
  c.logical = wire_bytes("all_reduce", fp32_bytes(io->host), size(g));
  c.wire = wire_bytes("all_reduce", io->host.nbytes(), size(g));
  return issue(c, sync);
}

Request Communicator::broadcast_impl(const torch::Tensor& t, int root, Group g,
                                     const std::string& kind, bool sync) {
  SB_CHECK(root >= 0 && root < size(g), "broadcast: root {} is not a rank of the {} group (size {})",
           root, group_name(g), size(g));
  auto io = std::make_shared<Staged>(t, true, cuda_aware_);
  const MPI_Datatype ty = mpi_type(io->host);
  const int n = as_count(io->host.numel());
  Coll c{"broadcast", g, kind, {"MPI_Bcast", "MPI_Ibcast"}};
  c.reads = c.writes = span(t);
  c.phase.blocking = [=](MPI_Comm comm) { return MPI_Bcast(io->ptr(), n, ty, root, comm); };
  c.phase.start = [=](MPI_Comm comm, MPI_Request* r) {
    return MPI_Ibcast(io->ptr(), n, ty, root, comm, r);
  };
  c.phase.after = [io] { io->finish(); };
  c.logical = wire_bytes("broadcast", fp32_bytes(io->host), size(g));
  c.wire = wire_bytes("broadcast", io->host.nbytes(), size(g));
  return issue(c, sync);
}

Request Communicator::all_to_all_impl(const torch::Tensor& in_t, const torch::Tensor& out_t,
                                      Group g, const std::string& kind, bool sync) {
  SB_CHECK(in_t.scalar_type() == out_t.scalar_type() && in_t.numel() == out_t.numel() &&
               in_t.numel() % size(g) == 0,
           "all_to_all: in ({} elements) and out ({}) must have one dtype and equal sizes "
           "divisible by the {} group size {}", in_t.numel(), out_t.numel(), group_name(g), size(g));
  auto in = std::make_shared<Staged>(in_t, false, cuda_aware_);
  auto out = std::make_shared<Staged>(out_t, true, cuda_aware_);
  const MPI_Datatype ty = mpi_type(in->host);
  const int n = as_count(in->host.numel() / size(g));
  Coll c{"all_to_all", g, kind, {"MPI_Alltoall", "MPI_Ialltoall"}};
  c.reads = span(in_t), c.writes = span(out_t);
  c.phase.blocking = [=](MPI_Comm comm) {
    return MPI_Alltoall(in->ptr(), n, ty, out->ptr(), n, ty, comm);
  };
  c.phase.start = [=](MPI_Comm comm, MPI_Request* r) {
    return MPI_Ialltoall(in->ptr(), n, ty, out->ptr(), n, ty, comm, r);
  };
  c.phase.after = [out] { out->finish(); };
  c.logical = wire_bytes("all_to_all", fp32_bytes(in->host), size(g));
  c.wire = wire_bytes("all_to_all", in->host.nbytes(), size(g));
  return issue(c, sync);
}

double Communicator::all_reduce_scalar(double v, Group g, ReduceOp op) {
  auto t = torch::full({1}, v, torch::kFloat64);
  all_reduce(t, g, "other", op);
  return t.item<double>();
}

}  // namespace sb::comm
