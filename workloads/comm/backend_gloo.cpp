// The `gloo` backend (backend.h): LibTorch's c10d ProcessGroupGloo on host tensors, one
// process group per Communicator channel (group and lane). Bootstrapped over MPI: world rank
// 0 serves a c10d::TCPStore on a free port, MPI broadcasts its host and port, and each
// channel's ranks rendezvous under their own prefix. Gloo runs every collective on the
// group's worker thread in the order it was started (the order every rank starts them on
// the channel, so they match), whatever the progress mode; a peer that dies closes its
// sockets and the survivors' collectives throw, which ends every rank through the usual
// failure path.
//
// The wheel ships c10d's headers but not Gloo's; Debian's libgloo-dev provides them. Only
// opaque Gloo types (shared pointers to a device and a context) cross our code, and nothing
// links Debian's libgloo: Gloo itself comes from libtorch_cpu. (docs/DEVELOPERS.md)
#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/backend.h"

#ifdef SB_WITH_GLOO
#include <chrono>
#include <cstdlib>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "harness/core/mpi_context.h"
#endif

namespace sb::comm {
namespace {

#ifdef SB_WITH_GLOO

// How long a Gloo collective may wait for its peers. A dead peer is noticed at once (its
// sockets close); this bounds a live peer that stopped calling, as MPI's would not.
constexpr std::chrono::seconds kGlooTimeout{300};

// A tensor over the same memory without autograd history or a shared version counter: the
// collectives write raw memory (communicator.h), so autograd must not see them.
torch::Tensor raw(const torch::Tensor& t) {
  return torch::from_blob(t.data_ptr(), t.sizes(), t.options().requires_grad(false));
}

c10d::ReduceOp gloo_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

// One collective on one process group: start() hands it to Gloo's worker, test() and wait()
// ask the work. It holds the caller's tensors until it is destroyed (after completion).
class GlooTransfer final : public Transfer {
 public:
  GlooTransfer(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, const CollArgs& a, Group g)
      : pg_(std::move(pg)), a_(a), group_(group_name(g)) {}

  void run() override {
    start();
    wait();
  }

  void start() override {
    const char* what = coll_name(a_.op);
    torch::Tensor in = raw(a_.in), out = raw(a_.out);
    try {
      switch (a_.op) {
        case CollOp::AllGather: work_ = pg_->_allgather_base(out, in); break;
        case CollOp::ReduceScatter: {
          c10d::ReduceScatterOptions o;
          o.reduceOp = gloo_op(a_.red);
          work_ = pg_->_reduce_scatter_base(out, in, o);
          break;
        }
        case CollOp::AllReduce: {
          std::vector<at::Tensor> v{out};
          c10d::AllreduceOptions o;
          o.reduceOp = gloo_op(a_.red);
          work_ = pg_->allreduce(v, o);
          break;
        }
        case CollOp::Broadcast: {
          std::vector<at::Tensor> v{out};
          c10d::BroadcastOptions o;
          o.rootRank = a_.root;
          work_ = pg_->broadcast(v, o);
          break;
        }
        case CollOp::AllToAll: {
          std::vector<std::int64_t> even;  // equal blocks
          work_ = pg_->alltoall_base(out, in, even, even);
          break;
        }
      }
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} on the {} group failed to start: {}", what, group_, e.what());
    }
  }

  bool test() override {
    if (!completed()) return false;
    wait();
    return true;
  }

  void wait() override {
    try {
      work_->wait();  // rethrows the transfer's error
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} on the {} group failed (a peer rank died or stopped calling?): {}",
              coll_name(a_.op), group_, e.what());
    }
  }

 private:
  bool completed() {
    try {
      return work_->isCompleted();
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} on the {} group failed: {}", coll_name(a_.op), group_, e.what());
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  CollArgs a_;
  const char* group_;
  c10::intrusive_ptr<c10d::Work> work_;
};

// One send or receive on the group's plain-lane process group. Gloo posts it at once on the
// pair's unbound buffer (not through the group's worker thread, so it never waits behind a
// collective) under a slot of its own (send/recv slots never match a collective's).
class GlooP2P final : public Transfer {
 public:
  GlooP2P(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, const P2PArgs& a, Group g)
      : pg_(std::move(pg)), a_(a), group_(group_name(g)) {}
  void run() override {
    start();
    wait();
  }
  void start() override {
    std::vector<at::Tensor> v{raw(a_.t)};
    try {
      work_ = a_.op == P2POp::Send ? pg_->send(v, a_.peer, a_.tag) : pg_->recv(v, a_.peer, a_.tag);
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} to/from rank {} of the {} group failed to start: {}", p2p_name(a_.op),
              a_.peer, group_, e.what());
    }
  }
  bool test() override {
    bool done = false;
    try {
      done = work_->isCompleted();
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} with rank {} of the {} group failed: {}", p2p_name(a_.op), a_.peer, group_,
              e.what());
    }
    if (done) wait();
    return done;
  }
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      SB_FAIL("gloo {} with rank {} of the {} group failed (the peer died or stopped calling?): {}",
              p2p_name(a_.op), a_.peer, group_, e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  P2PArgs a_;
  const char* group_;
  c10::intrusive_ptr<c10d::Work> work_;
};

class GlooBackend : public Backend {
 public:
  explicit GlooBackend(const GroupComms& groups) {
    const MPI_Comm world = groups.of(Group::World);
    int rank = 0, size = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    sb::check_mpi(MPI_Bcast(host, sizeof host, MPI_CHAR, 0, world), "MPI_Bcast (gloo store host)");
    c10d::TCPStoreOptions o;
    o.port = 0;  // a free one, chosen by the server
    o.numWorkers = size;
    o.waitWorkers = false;
    o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kGlooTimeout);
    int port = 0;
    std::string err;
    if (rank == 0) {
      try {
        o.isServer = true;
        store_ = c10::make_intrusive<c10d::TCPStore>(host, o);
        port = store_->getPort();
      } catch (const std::exception& e) {
        err = e.what();
        port = -1;
      }
    }
    sb::check_mpi(MPI_Bcast(&port, 1, MPI_INT, 0, world), "MPI_Bcast (gloo store port)");
    SB_CHECK(port > 0, "comm_backend = \"gloo\": rank 0 could not serve the rendezvous store on "
             "{}: {}", host, err.empty() ? "see rank 0's log" : err);
    if (rank != 0) {
      o.isServer = false;
      o.port = static_cast<std::uint16_t>(port);
      store_ = c10::make_intrusive<c10d::TCPStore>(host, o);
    }
    for (Lane l : {Lane::Plain, Lane::Chain})
      for (Group g : kGroupList) make_group(world, groups.of(g, l), g, l);
  }

  const char* name() const override { return "gloo"; }

  std::string refuses(const CollArgs& a, Lane) const override {
    if (!a.in.device().is_cpu() || !a.out.device().is_cpu())
      return fmt::format("gloo runs collectives on host tensors, this {} is on {}: set "
                         "comm_backend = \"nccl\" (or \"mpi\") for device tensors",
                         coll_name(a.op), (a.in.device().is_cpu() ? a.out : a.in).device().str());
    return "";
  }

  std::unique_ptr<Transfer> transfer(const CollArgs& a, Channel ch) override {
    return std::make_unique<GlooTransfer>(pg_[static_cast<int>(ch.lane)][static_cast<int>(ch.group)],
                                          a, ch.group);
  }

  std::string refuses_p2p(const P2PArgs& a) const override {
    if (!a.t.device().is_cpu())
      return fmt::format("gloo sends host tensors, this {} is on {}: set comm_backend = "
                         "\"nccl\" (or \"mpi\") for device tensors", p2p_name(a.op),
                         a.t.device().str());
    return "";
  }
  std::unique_ptr<Transfer> p2p(const P2PArgs& a, Group g) override {
    return std::make_unique<GlooP2P>(pg_[static_cast<int>(Lane::Plain)][static_cast<int>(g)], a, g);
  }

 private:
  // A process group of the ranks of comm, under a prefix only they share (the lane, the
  // group and the world rank of their first rank).
  void make_group(MPI_Comm world, MPI_Comm comm, Group g, Lane l) {
    int world_rank = 0, first = 0, rank = 0, size = 1;
    MPI_Comm_rank(world, &world_rank);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    first = world_rank;
    sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm),
                  "MPI_Allreduce (gloo group prefix)");
    auto opts = c10d::ProcessGroupGloo::Options::create(
        std::chrono::duration_cast<std::chrono::milliseconds>(kGlooTimeout));
    // Multi-node: GLOO_SOCKET_IFNAME names the interface (as in PyTorch); else the address
    // the host name resolves to, or loopback.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    opts->devices.push_back(ifname && *ifname
                                ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;  // one worker: collectives run in issue order, one core for compute
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("{}{}/{}", l == Lane::Chain ? "chain/" : "", group_name(g), first), store_);
    pg_[static_cast<int>(l)][static_cast<int>(g)] =
        c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, opts);
  }

  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_[2][kGroups];  // [lane][group]
};

const sb::Registrar kRegister([] {
  register_backend({"gloo", "LibTorch's c10d ProcessGroupGloo: host tensors over TCP", true, "",
                    [](const GroupComms& g) { return std::make_unique<GlooBackend>(g); },
                    /*alone=*/true});
});

#else

const sb::Registrar kRegister([] {
  register_backend({"gloo", "LibTorch's c10d ProcessGroupGloo: host tensors over TCP", false,
                    "this shardbench was built without Gloo's headers (apt install libgloo-dev, "
                    "then reconfigure and rebuild)", nullptr, /*alone=*/true});
});

#endif

}  // namespace
}  // namespace sb::comm
