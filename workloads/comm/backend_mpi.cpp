// The `mpi` backend (backend.h): each collective as a transfer of blocking and non-blocking
// MPI calls on the channel's communicator, dtype mapping (bf16 and fp16 sums as user-defined
// MPI ops) and host staging of device tensors when MPI is not CUDA-aware.
#include <algorithm>
#include <mutex>

#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT (Open MPI)

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"
#include "workloads/comm/backend.h"

namespace sb::comm {
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
  if (half) return t.scalar_type() == torch::kBFloat16 ? g_sum_bf16 : g_sum_fp16;  // sums only
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
  Staged() = default;
  Staged(const torch::Tensor& t, bool is_output, bool cuda_aware) : orig(t), out(is_output) {
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

// One collective on one communicator. The blocking call is MPI's own (tuned algorithms);
// the non-blocking one is too, except for reduce-scatter (see start()).
class MpiTransfer final : public Transfer {
 public:
  MpiTransfer(const CollArgs& a, MPI_Comm comm, bool cuda_aware)
      : op_(a.op), red_(a.red), root_(a.root), comm_(comm), out_(a.out, true, cuda_aware) {
    const bool in_place = a.op == CollOp::AllReduce || a.op == CollOp::Broadcast;
    if (!in_place) in_ = Staged(a.in, false, cuda_aware);
    ty_ = mpi_type(out_.host);
    mop_ = mpi_op(a.out, a.red);
    switch (op_) {
      case CollOp::AllGather: count_ = as_count(in_.host.numel()); break;
      case CollOp::AllToAll: {
        int ranks = 1;
        MPI_Comm_size(comm, &ranks);
        count_ = as_count(in_.host.numel() / ranks);
        break;
      }
      default: count_ = as_count(out_.host.numel()); break;
    }
  }

  void run() override {
    switch (op_) {
      case CollOp::AllGather:
        check(MPI_Allgather(in_.ptr(), count_, ty_, out_.ptr(), count_, ty_, comm_), "MPI_Allgather");
        break;
      case CollOp::ReduceScatter:
        check(MPI_Reduce_scatter_block(in_.ptr(), out_.ptr(), count_, ty_, mop_, comm_),
              "MPI_Reduce_scatter_block");
        break;
      case CollOp::AllReduce:
        check(MPI_Allreduce(MPI_IN_PLACE, out_.ptr(), count_, ty_, mop_, comm_), "MPI_Allreduce");
        break;
      case CollOp::Broadcast:
        check(MPI_Bcast(out_.ptr(), count_, ty_, root_, comm_), "MPI_Bcast");
        break;
      case CollOp::AllToAll:
        check(MPI_Alltoall(in_.ptr(), count_, ty_, out_.ptr(), count_, ty_, comm_), "MPI_Alltoall");
        break;
    }
    out_.finish();
  }

  void start() override {
    switch (op_) {
      case CollOp::AllGather:
        check(MPI_Iallgather(in_.ptr(), count_, ty_, out_.ptr(), count_, ty_, comm_, &req_),
              started_ = "MPI_Iallgather");
        break;
      case CollOp::ReduceScatter:
        // An all-to-all of the blocks (one round, the same bytes on the wire as a
        // reduce-scatter) and a local reduction over ranks (finish()). Open MPI's
        // Ireduce_scatter_block takes many rounds, each moving only when both ranks call into
        // MPI: with inline progress it finished a unit boundary or more late (measured: gpt2
        // full_shard backward 6.1 s vs 3.7).
        blocks_ = torch::empty_like(in_.host);
        check(MPI_Ialltoall(in_.ptr(), count_, ty_, blocks_.data_ptr(), count_, ty_, comm_, &req_),
              started_ = "MPI_Ialltoall (reduce-scatter)");
        break;
      case CollOp::AllReduce:
        check(MPI_Iallreduce(MPI_IN_PLACE, out_.ptr(), count_, ty_, mop_, comm_, &req_),
              started_ = "MPI_Iallreduce");
        break;
      case CollOp::Broadcast:
        check(MPI_Ibcast(out_.ptr(), count_, ty_, root_, comm_, &req_), started_ = "MPI_Ibcast");
        break;
      case CollOp::AllToAll:
        check(MPI_Ialltoall(in_.ptr(), count_, ty_, out_.ptr(), count_, ty_, comm_, &req_),
              started_ = "MPI_Ialltoall");
        break;
    }
  }

  bool test() override {
    int flag = 0;
    check(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), started_);
    if (flag) finish();
    return flag != 0;
  }

  void wait() override {
    check(MPI_Wait(&req_, MPI_STATUS_IGNORE), started_);
    finish();
  }

 private:
  static void check(int rc, const char* what) { sb::check_mpi(rc, what); }

  // After a non-blocking call: reduce-scatter's local reduction of the received blocks in
  // rank order, then the staged output copied back.
  static constexpr std::int64_t kReducePiece = std::int64_t{1} << 20;
  void finish() {
    if (op_ == CollOp::ReduceScatter) {
      const auto ranks = blocks_.numel() / std::max<std::int64_t>(1, count_);
      auto blocks = blocks_.view({ranks, count_});  // row j: rank j's block for me
      const bool half = blocks.scalar_type() == torch::kBFloat16 ||
                        blocks.scalar_type() == torch::kFloat16;
      // Column by column in pieces of kReducePiece elements: each column's sum over ranks is
      // the same whatever the piece, and the temporaries (a half sum's fp32 one and its cast)
      // stay a piece's, not the shard's (gpt2-long's tied embedding at 2 ranks: 183 MiB
      // more at the step's peak, the last unit's reduction).
      for (std::int64_t c = 0; c < count_; c += kReducePiece) {
        const auto n = std::min<std::int64_t>(kReducePiece, count_ - c);
        const auto b = blocks.narrow(1, c, n);
        torch::Tensor r;
        if (red_ == ReduceOp::Sum)
          r = half ? b.sum(0, false, torch::kFloat) : b.sum(0);
        else
          r = red_ == ReduceOp::Max ? std::get<0>(b.max(0)) : std::get<0>(b.min(0));
        out_.host.narrow(0, c, n).copy_(r);  // a half sum rounded once, as before
      }
      blocks_ = torch::Tensor();
    }
    out_.finish();
  }

  CollOp op_;
  ReduceOp red_;
  int root_;
  MPI_Comm comm_;
  Staged in_, out_;  // in_: unset for the in-place all_reduce and broadcast
  MPI_Datatype ty_ = MPI_DATATYPE_NULL;
  MPI_Op mop_ = MPI_OP_NULL;
  int count_ = 0;  // elements per rank's block (all_reduce, broadcast: all of them)
  MPI_Request req_ = MPI_REQUEST_NULL;
  const char* started_ = "";  // the non-blocking call, for errors
  torch::Tensor blocks_;      // reduce-scatter's received blocks, while non-blocking
};

// One send or receive on the group's communicator (the plain lane's: MPI never matches a
// point-to-point message with a collective). Blocking: MPI_Send / MPI_Recv; non-blocking:
// MPI_Isend / MPI_Irecv, which Open MPI's shared-memory transport moves only inside MPI
// calls on some thread (test(), wait(), or a communication thread's collective).
class MpiP2P final : public Transfer {
 public:
  MpiP2P(const P2PArgs& a, MPI_Comm comm, bool cuda_aware)
      : send_(a.op == P2POp::Send), peer_(a.peer), tag_(a.tag), comm_(comm),
        buf_(a.t, /*is_output=*/!send_, cuda_aware), ty_(mpi_type(buf_.host)),
        count_(as_count(buf_.host.numel())) {}

  void run() override {
    if (send_)
      check_mpi(MPI_Send(buf_.ptr(), count_, ty_, peer_, tag_, comm_), "MPI_Send");
    else
      check_mpi(MPI_Recv(buf_.ptr(), count_, ty_, peer_, tag_, comm_, MPI_STATUS_IGNORE),
                "MPI_Recv");
    buf_.finish();
  }
  void start() override {
    if (send_)
      check_mpi(MPI_Isend(buf_.ptr(), count_, ty_, peer_, tag_, comm_, &req_), "MPI_Isend");
    else
      check_mpi(MPI_Irecv(buf_.ptr(), count_, ty_, peer_, tag_, comm_, &req_), "MPI_Irecv");
  }
  bool test() override {
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), send_ ? "MPI_Isend" : "MPI_Irecv");
    if (flag) buf_.finish();
    return flag != 0;
  }
  void wait() override {
    check_mpi(MPI_Wait(&req_, MPI_STATUS_IGNORE), send_ ? "MPI_Isend" : "MPI_Irecv");
    buf_.finish();
  }

 private:
  static void check_mpi(int rc, const char* what) { sb::check_mpi(rc, what); }
  bool send_;
  int peer_, tag_;
  MPI_Comm comm_;
  Staged buf_;
  MPI_Datatype ty_;
  int count_;
  MPI_Request req_ = MPI_REQUEST_NULL;
};

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(const GroupComms& groups) : groups_(groups) {
    init_types();
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
  }
  const char* name() const override { return "mpi"; }
  // Every dtype, device memory staged, both lanes (its own communicator each).
  std::string refuses(const CollArgs&, Lane) const override { return ""; }
  std::unique_ptr<Transfer> transfer(const CollArgs& a, Channel ch) override {
    return std::make_unique<MpiTransfer>(a, groups_.of(ch.group, ch.lane), cuda_aware_);
  }
  std::string refuses_p2p(const P2PArgs&) const override { return ""; }
  std::unique_ptr<Transfer> p2p(const P2PArgs& a, Group g) override {
    return std::make_unique<MpiP2P>(a, groups_.of(g), cuda_aware_);
  }

 private:
  GroupComms groups_;
  bool cuda_aware_ = false;
};

const sb::Registrar kRegister([] {
  register_backend({"mpi", "Open MPI: host memory, every dtype; the default", true, "",
                    [](const GroupComms& g) { return std::make_unique<MpiBackend>(g); },
                    /*alone=*/false});
});

}  // namespace
}  // namespace sb::comm
