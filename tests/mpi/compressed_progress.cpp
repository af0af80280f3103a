// Compressed collectives issued through the communicator (Communicator::issue of a
// CompressedCollectives description) in every progress mode and on every backend this build
// and machine has (mpi, gloo; nccl with a GPU, else skipped with the reason): the bits of
// the blocking API on mpi, one trace event each with the blocking API's bytes, every event
// on the backend chosen (nccl: the host wires on mpi), and under inline no forced completion
// of the requests they do not touch.
#include <algorithm>
#include <mutex>
#include <set>
#include <tuple>

#include <torch/types.h>

#include "harness/core/mpi_context.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/compressed_collectives.h"
#include "workloads/models/device.h"

using namespace sb::comm;

namespace {

// Why `name` cannot run here ("" when it can); the same on every rank.
std::string unavailable(const std::string& name) {
  const BackendInfo* b = find_backend(name);
  if (!b->available) return b->unavailable_why;
  if (name == "nccl" && sb::models::visible_gpus() == 0) return "nccl needs a GPU; none is visible";
  return "";
}

class OnBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string why = unavailable(GetParam());
    if (!why.empty()) GTEST_SKIP() << GetParam() << ": " << why;
    if (GetParam() == "nccl")  // NCCL binds to the current device
      sb::models::resolve_device("cuda", sb::node_local_rank(MPI_COMM_WORLD));
  }
  BackendChoice backend() const { return {GetParam(), ""}; }
  // The backend the compressed collectives' host wires run on: nccl refuses host tensors.
  std::string host_backend() const { return GetParam() == "nccl" ? "mpi" : GetParam(); }
};
std::string backend_label(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

const ProgressMode kAllModes[] = {ProgressMode::Thread, ProgressMode::Poll, ProgressMode::Inline};

// Rank q's input of n elements at `step`, known to every rank.
torch::Tensor input_of(int q, std::int64_t n, int step) {
  auto gen = at::detail::createCPUGenerator(7919 * q + 31 * step + n);
  return torch::randn({n}, gen, torch::kFloat);
}

// State that depends on call order in every kind: bf16 parameters, int8 + error feedback on
// the reduce-scatter, and on the all-reduce either stochastic int8 + error feedback (its two
// phases draw from one generator, across collectives in flight) or PowerSGD (four phases).
Policy stateful(const std::string& all_reduce) {
  Policy p = policy_preset("hybrid");
  p.preset = "custom";
  p.grad_all_reduce.name = all_reduce;
  p.grad_all_reduce.error_feedback = true;
  p.grad_all_reduce.set("stochastic", all_reduce == "int8");
  p.grad_all_reduce.set("block", 64);
  p.grad_all_reduce.set("rank", 2);
  return p;
}

using Event = std::tuple<std::string, std::string, std::string, std::uint64_t, std::uint64_t>;
struct Results {
  std::vector<torch::Tensor> out;
  std::vector<Event> events;  // (op, group, kind, logical, wire), sorted
  std::set<std::string> backends;  // that ran them
};

constexpr int kSteps = 3, kBuffers = 3;

// Per step and buffer: a parameter gather, a gradient reduce-scatter, an all-reduce and a
// second one of its result (it reads what the first writes), and a plain all-reduce among
// them; all in flight at once, waited for in reverse order.
Results run_issued(ProgressMode mode, const Policy& p, const BackendChoice& b) {
  Communicator comm(MPI_COMM_WORLD, 0, true, b);
  comm.set_progress(mode);
  CompressedCollectives cc(p, comm.rank());
  std::mutex m;
  Results res;
  comm.set_trace_hook(
      [&](const sb::CommEvent& e) {
        std::lock_guard<std::mutex> l(m);
        if (e.kind != "other")
          res.events.emplace_back(e.op, e.group, e.kind, e.logical_bytes, e.wire_bytes);
        res.backends.insert(e.backend);
      },
      MPI_Wtime());
  const int n = comm.size(), r = comm.rank();
  const auto g = Group::World;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Request> reqs;
    std::vector<torch::Tensor> outs;
    for (int b = 0; b < kBuffers; ++b) {
      auto shard = input_of(r, 100 + b, step), full = torch::empty({n * (100 + b)});
      auto grad = input_of(r, n * (200 + b), step), gshard = torch::empty({200 + b});
      auto x = input_of(r, 301 + b, step);  // not a multiple of the world: padded
      auto plain = torch::full({64}, static_cast<float>(r));
      const std::string key = "b" + std::to_string(b);
      auto ag = cc.all_gather_params_op(shard, full, n);
      reqs.push_back(comm.issue(std::move(ag.run), g, "all_gather", "param_all_gather",
                                ag.bytes.logical_bytes, ag.bytes.wire_bytes));
      auto rs = cc.reduce_scatter_grads_op(key, grad, gshard, n);
      reqs.push_back(comm.issue(std::move(rs.run), g, "reduce_scatter", "grad_reduce_scatter",
                                rs.bytes.logical_bytes, rs.bytes.wire_bytes));
      reqs.push_back(comm.all_reduce_async(plain, g));
      for (const char* k : {"", "/again"}) {
        auto ar = cc.all_reduce_grads_op(key + k, x, n);
        reqs.push_back(comm.issue(std::move(ar.run), g, "all_reduce", "grad_all_reduce",
                                  ar.bytes.logical_bytes, ar.bytes.wire_bytes));
      }
      comm.progress();
      outs.insert(outs.end(), {full, gshard, x, plain});
    }
    for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) it->wait();
    res.out.insert(res.out.end(), outs.begin(), outs.end());
  }
  comm.set_trace_hook(nullptr, 0);
  std::sort(res.events.begin(), res.events.end());
  return res;
}

// The same calls, one after another, through the blocking API on mpi.
Results run_blocking_api(const Policy& p) {
  Communicator comm(MPI_COMM_WORLD, 0);
  CompressedCollectives cc(p, world_rank());
  const int n = world_size(), r = world_rank();
  const auto g = Group::World;
  Results res;
  for (int step = 0; step < kSteps; ++step) {
    for (int b = 0; b < kBuffers; ++b) {
      auto shard = input_of(r, 100 + b, step), full = torch::empty({n * (100 + b)});
      auto ag = cc.all_gather_params_op(shard, full, n);
      res.events.emplace_back("all_gather", "world", "param_all_gather", ag.bytes.logical_bytes,
                              ag.bytes.wire_bytes);
      run_on(std::move(ag), comm, g, "all_gather");
      const std::string key = "b" + std::to_string(b);
      CollectiveStats rs, ar1, ar2;
      auto gshard = cc.reduce_scatter_grads(key, input_of(r, n * (200 + b), step), comm, g, &rs);
      auto x = cc.all_reduce_grads(key, input_of(r, 301 + b, step), comm, g, &ar1);
      x = cc.all_reduce_grads(key + "/again", x, comm, g, &ar2);
      res.events.emplace_back("reduce_scatter", "world", "grad_reduce_scatter", rs.logical_bytes,
                              rs.wire_bytes);
      for (const auto& s : {ar1, ar2})
        res.events.emplace_back("all_reduce", "world", "grad_all_reduce", s.logical_bytes,
                                s.wire_bytes);
      auto plain = torch::full({64}, static_cast<float>(n * (n - 1) / 2));
      res.out.insert(res.out.end(), {full, gshard, x, plain});
    }
  }
  std::sort(res.events.begin(), res.events.end());
  return res;
}

}  // namespace

// Thread and poll run each collective's phases on the communication thread in issue order;
// inline starts them on the caller, chained ones in issue order (on the chain lane): every
// mode on every backend gives the blocking API's bits on mpi (compressor state included) and
// its bytes, one event per collective, each on the backend chosen.
TEST_P(OnBackend, EveryModeGivesTheBlockingBitsAndEvents) {
  for (const std::string all_reduce : {"int8", "powersgd"}) {
    const Policy p = stateful(all_reduce);
    const Results want = run_blocking_api(p);
    for (auto mode : kAllModes) {
      SCOPED_TRACE(all_reduce + " " + progress_name(mode));
      const Results got = run_issued(mode, p, backend());
      ASSERT_EQ(got.out.size(), want.out.size());
      for (std::size_t i = 0; i < want.out.size(); ++i)
        EXPECT_TRUE(torch::equal(got.out[i], want.out[i])) << "output " << i;
      EXPECT_EQ(got.events, want.events);
      EXPECT_EQ(got.backends, std::set<std::string>{host_backend()});
    }
  }
}

// Under inline, issuing a compressed collective (one phase or chained) leaves an outstanding
// plain request alone unless it touches the plain one's buffers; then it waits for it and
// reads what it wrote. A chained all-reduce completes through progress() and test() alone.
TEST_P(OnBackend, InlineWaitsOnlyForWhatItTouches) {
  Communicator comm(MPI_COMM_WORLD, 0, true, backend());
  comm.set_progress(ProgressMode::Inline);
  Policy p = stateful("int8");
  p.grad_all_reduce.name = "bf16";  // exact on the small integers below
  CompressedCollectives cc(p, comm.rank());
  std::vector<std::string> events;
  comm.set_trace_hook([&](const sb::CommEvent& e) { events.push_back(e.op + "/" + e.kind); },
                      MPI_Wtime());
  const int n = comm.size(), r = comm.rank();
  const std::int64_t len = 1 << 16;
  auto mine = torch::full({len}, static_cast<float>(r)), gathered = torch::empty({n * len});
  auto plain = comm.all_gather_async(mine, gathered, Group::World, "other");

  auto shard = input_of(r, 1000, 0), full = torch::empty({n * 1000});
  auto gather = comm.issue(cc.all_gather_params_op(shard, full, n).run, Group::World,
                           "all_gather", "param_all_gather", 0, 0);
  auto x = torch::full({5000}, 1.0f);
  auto chained = comm.issue(cc.all_reduce_grads_op("x", x, n).run, Group::World, "all_reduce",
                            "grad_all_reduce", 0, 0);
  EXPECT_TRUE(events.empty()) << "issuing compressed collectives completed " << events[0];

  // Reads and writes `gathered`: the plain all-gather completes first.
  auto touching = comm.issue(cc.all_reduce_grads_op("g", gathered, n).run, Group::World,
                             "all_reduce", "grad_all_reduce", 0, 0);
  EXPECT_NE(std::find(events.begin(), events.end(), "all_gather/other"), events.end());
  while (!chained.test()) comm.progress();
  EXPECT_TRUE(torch::all(x == static_cast<float>(n)).item<bool>());
  touching.wait();
  gather.wait();
  plain.wait();
  for (int j = 0; j < n; ++j)  // block j held rank j's value on every rank, then summed
    EXPECT_TRUE(torch::all(gathered.narrow(0, j * len, len) == static_cast<float>(n * j))
                    .item<bool>()) << "block " << j;
  EXPECT_EQ(events.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(CompressedProgress, OnBackend, ::testing::Values("mpi", "gloo", "nccl"),
                         backend_label);
