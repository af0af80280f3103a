// The `nccl` backend (backend.h): NCCL on device tensors, the CUDA build only (SB_WITH_CUDA;
// the default build registers the name as unavailable, so suites get a clear error).
// Bootstrapped over MPI as llm.c does: each group's rank 0 makes the unique id, MPI
// broadcasts it, every rank calls ncclCommInitRank. Collectives run on one dedicated stream:
// it waits for an event recorded on the issuing thread's stream when the transfer is made
// (the compute that produced the inputs), and completion is an event the compute stream
// waits on, so the host never synchronises inside a step; Request::test() queries the
// event. Plain lane only: the compressed collectives' chained phases carry host wire
// buffers (their codecs run on the host), which the Communicator runs on mpi. The caching allocator is
// told the tensors are in use on the NCCL stream (recordStream), so their memory is not
// reused before the transfer ends. A watchdog thread checks every second for NCCL's
// asynchronous errors and for a collective outstanding longer than 300 s (a dead or stuck
// peer: NCCL kernels would otherwise spin forever) and ends every rank (sb::abort_all). NCCL's headers and library are the torch wheel's
// (nvidia-nccl), the ones libtorch_cuda itself loads: one NCCL per process.
#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/backend.h"

#ifdef SB_WITH_CUDA
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include "harness/core/mpi_context.h"
#endif

namespace sb::comm {
namespace {

#ifdef SB_WITH_CUDA

void check_nccl(ncclResult_t r, const char* what) {
  SB_CHECK(r == ncclSuccess, "{} failed: {} ({})", what, ncclGetErrorString(r),
           ncclGetLastError(nullptr));
}

ncclDataType_t nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return ncclFloat32;
    case torch::kFloat64: return ncclFloat64;
    case torch::kFloat16: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kInt64: return ncclInt64;
    case torch::kInt32: return ncclInt32;
    case torch::kInt8: return ncclInt8;
    case torch::kUInt8: return ncclUint8;
    default:
      SB_FAIL("nccl collective on a {} tensor: supported dtypes are float32, float64, float16, "
              "bfloat16, int64, int32, int8, uint8", c10::toString(t.scalar_type()));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

class NcclBackend;

// What every NCCL transfer shares (see the top): made on the issuing thread, which records its
// stream so the backend's stream waits for the compute issued so far; launch() enqueues on
// the backend's stream; completion is an event the waiting stream waits on.
class NcclWork : public Transfer {
 public:
  void run() override {
    start();
    wait();
  }
  bool test() override {
    check_async();
    return done_->query();
  }
  void wait() override {
    check_async();
    done_->block(compute_);  // the waiting stream waits; the host does not
  }

 protected:
  NcclWork(NcclBackend& b, Group g, const char* what);
  // Enqueues on the backend's stream after the issuing compute, keeps the tensors' memory
  // from reuse until the stream passes, records completion and tells the watchdog.
  void launch(const std::function<void(cudaStream_t)>& enqueue,
              std::initializer_list<const torch::Tensor*> tensors);
  void check_async() const {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check_nccl(async, fmt::format("an NCCL {} (a peer rank died?)", what_).c_str());
  }

  NcclBackend& b_;
  ncclComm_t comm_;
  int ranks_;
  const char* what_;
  c10::cuda::CUDAStream compute_;
  std::shared_ptr<at::cuda::CUDAEvent> ready_, done_;
};

// One collective.
class NcclTransfer final : public NcclWork {
 public:
  NcclTransfer(NcclBackend& b, const CollArgs& a, Group g)
      : NcclWork(b, g, coll_name(a.op)), a_(a) {}
  void start() override;

 private:
  CollArgs a_;
};

// One send or receive. NCCL runs a rank's sends and receives on the backend's one stream in
// issue order, and a send waits for its receiver: a rank that sends and then receives, facing
// a peer that does the same, deadlocks (as with NCCL itself); pipeline schedules issue each
// pair in the order that matches (receive first on one side). Tags are not NCCL's: order
// matches.
class NcclP2P final : public NcclWork {
 public:
  NcclP2P(NcclBackend& b, const P2PArgs& a, Group g) : NcclWork(b, g, p2p_name(a.op)), a_(a) {}
  void start() override;

 private:
  P2PArgs a_;
};

class NcclBackend : public Backend {
 public:
  explicit NcclBackend(const GroupComms& groups)
      : device_(static_cast<c10::DeviceIndex>(c10::cuda::current_device())),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_)) {
    for (Group g : kGroupList) {
      const MPI_Comm comm = groups.of(g);
      int rank = 0, size = 1;
      MPI_Comm_rank(comm, &rank);
      MPI_Comm_size(comm, &size);
      ncclUniqueId id{};
      int status = ncclSuccess;  // rank 0's, so that no rank waits for an id that never comes
      if (rank == 0) status = ncclGetUniqueId(&id);
      sb::check_mpi(MPI_Bcast(&status, 1, MPI_INT, 0, comm), "MPI_Bcast (NCCL status)");
      check_nccl(static_cast<ncclResult_t>(status), "ncclGetUniqueId (on the group's rank 0)");
      sb::check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm), "MPI_Bcast (NCCL unique id)");
      c10::cuda::CUDAGuard guard(device_);
      check_nccl(ncclCommInitRank(&comms_[static_cast<int>(g)], size, id, rank),
                 "ncclCommInitRank");
      ranks_[static_cast<int>(g)] = size;
    }
    watchdog_ = std::thread([this] { watch(); });
  }
  ~NcclBackend() override {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    for (ncclComm_t c : comms_)
      if (c) std::uncaught_exceptions() ? ncclCommAbort(c) : ncclCommDestroy(c);
  }

  const char* name() const override { return "nccl"; }

  std::string refuses(const CollArgs& a, Lane lane) const override {
    for (const torch::Tensor* t : {&a.in, &a.out})
      if (!t->is_cuda() || t->device().index() != device_)
        return fmt::format("nccl runs collectives on tensors of this rank's GPU (cuda:{}), this "
                           "{} has one on {}: set device = \"cuda\", or comm_backend = \"mpi\" "
                           "or \"gloo\" for host tensors", device_, coll_name(a.op),
                           t->device().str());
    if (lane == Lane::Chain)
      return "nccl runs no chained (multi-phase compressed) collective: compression runs its "
             "codecs on host tensors; on device = \"cuda\" use compression = \"none\"";
    return "";
  }

  std::unique_ptr<Transfer> transfer(const CollArgs& a, Channel ch) override {
    return std::make_unique<NcclTransfer>(*this, a, ch.group);
  }

  std::string refuses_p2p(const P2PArgs& a) const override {
    if (!a.t.is_cuda() || a.t.device().index() != device_)
      return fmt::format("nccl sends tensors of this rank's GPU (cuda:{}), this {} is on {}: set "
                         "device = \"cuda\", or comm_backend = \"mpi\" or \"gloo\" for host "
                         "tensors", device_, p2p_name(a.op), a.t.device().str());
    return "";
  }
  std::unique_ptr<Transfer> p2p(const P2PArgs& a, Group g) override {
    return std::make_unique<NcclP2P>(*this, a, g);
  }

 private:
  friend class NcclWork;
  friend class NcclTransfer;
  static void enqueue(const CollArgs& a, ncclComm_t comm, int ranks, cudaStream_t s) {
    const ncclDataType_t ty = nccl_type(a.in);
    const void* in = a.in.data_ptr();
    void* out = a.out.data_ptr();
    switch (a.op) {
      case CollOp::AllGather:
        check_nccl(ncclAllGather(in, out, a.in.numel(), ty, comm, s), "ncclAllGather");
        return;
      case CollOp::ReduceScatter:
        check_nccl(ncclReduceScatter(in, out, a.out.numel(), ty, nccl_op(a.red), comm, s),
                   "ncclReduceScatter");
        return;
      case CollOp::AllReduce:
        check_nccl(ncclAllReduce(in, out, a.in.numel(), ty, nccl_op(a.red), comm, s),
                   "ncclAllReduce");
        return;
      case CollOp::Broadcast:
        check_nccl(ncclBroadcast(in, out, a.in.numel(), ty, a.root, comm, s), "ncclBroadcast");
        return;
      case CollOp::AllToAll: {  // NCCL has none: grouped sends and receives of equal blocks
        const std::int64_t n = a.in.numel() / ranks;
        const std::size_t bytes = static_cast<std::size_t>(n) * a.in.element_size();
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        for (int r = 0; r < ranks; ++r) {
          check_nccl(ncclSend(static_cast<const char*>(in) + r * bytes, n, ty, r, comm, s), "ncclSend");
          check_nccl(ncclRecv(static_cast<char*>(out) + r * bytes, n, ty, r, comm, s), "ncclRecv");
        }
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        return;
      }
    }
  }

  // The watchdog (see the top): outstanding collectives, oldest first.
  struct Outstanding {
    std::shared_ptr<at::cuda::CUDAEvent> done;
    const char* what;
    std::chrono::steady_clock::time_point since;
  };
  void watch_add(std::shared_ptr<at::cuda::CUDAEvent> done, const char* what) {
    std::lock_guard<std::mutex> lk(m_);
    outstanding_.push_back({std::move(done), what, std::chrono::steady_clock::now()});
  }
  void watch() {
    c10::cuda::CUDAGuard guard(device_);
    std::unique_lock<std::mutex> lk(m_);
    while (!cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stop_; })) {
      while (!outstanding_.empty() && outstanding_.front().done->query()) outstanding_.pop_front();
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        if (c && ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress)
          sb::abort_all(fmt::format("NCCL reported an asynchronous error: {} ({}); ending every "
                                    "rank", ncclGetErrorString(async), ncclGetLastError(c)));
      }
      if (!outstanding_.empty() &&
          std::chrono::steady_clock::now() - outstanding_.front().since > kTimeout)
        sb::abort_all(fmt::format("an NCCL {} has not completed in {} s (a peer rank died or "
                                  "stopped calling?); ending every rank",
                                  outstanding_.front().what, kTimeout.count()));
    }
  }
  static constexpr std::chrono::seconds kTimeout{300};

  c10::DeviceIndex device_;
  c10::cuda::CUDAStream stream_;
  ncclComm_t comms_[kGroups] = {};
  int ranks_[kGroups] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<Outstanding> outstanding_;
  std::thread watchdog_;  // last: started when everything above exists
};

NcclWork::NcclWork(NcclBackend& b, Group g, const char* what)
    : b_(b), comm_(b.comms_[static_cast<int>(g)]), ranks_(b.ranks_[static_cast<int>(g)]),
      what_(what), compute_(c10::cuda::getCurrentCUDAStream(b.device_)),
      ready_(std::make_shared<at::cuda::CUDAEvent>()) {
  ready_->record(compute_);
}

void NcclWork::launch(const std::function<void(cudaStream_t)>& enqueue,
                      std::initializer_list<const torch::Tensor*> tensors) {
  c10::cuda::CUDAGuard guard(b_.device_);
  ready_->block(b_.stream_);
  enqueue(b_.stream_);
  for (const torch::Tensor* t : tensors)
    c10::cuda::CUDACachingAllocator::recordStream(t->storage().data_ptr(), b_.stream_);
  done_ = std::make_shared<at::cuda::CUDAEvent>();
  done_->record(b_.stream_);
  b_.watch_add(done_, what_);
}

void NcclTransfer::start() {
  launch([&](cudaStream_t s) { NcclBackend::enqueue(a_, comm_, ranks_, s); }, {&a_.in, &a_.out});
}

void NcclP2P::start() {
  launch([&](cudaStream_t s) {
    const ncclDataType_t ty = nccl_type(a_.t);
    if (a_.op == P2POp::Send)
      check_nccl(ncclSend(a_.t.data_ptr(), a_.t.numel(), ty, a_.peer, comm_, s), "ncclSend");
    else
      check_nccl(ncclRecv(a_.t.data_ptr(), a_.t.numel(), ty, a_.peer, comm_, s), "ncclRecv");
  }, {&a_.t});
}

const sb::Registrar kRegister([] {
  register_backend({"nccl", "NCCL on GPU tensors (device = \"cuda\"), its own stream and events",
                    true, "", [](const GroupComms& g) { return std::make_unique<NcclBackend>(g); },
                    /*alone=*/true});
});

#else

const sb::Registrar kRegister([] {
  register_backend({"nccl", "NCCL on GPU tensors (device = \"cuda\"; the CUDA build only)", false,
                    "NCCL needs the CUDA build of shardbench (cmake --preset cuda && cmake --build "
                    "--preset cuda, then build-cuda/shardbench); this one was built with the "
                    "default (CPU) preset", nullptr, /*alone=*/true});
});

#endif

}  // namespace
}  // namespace sb::comm
