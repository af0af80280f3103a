// Compressed collectives at 2, 3, 4 ranks, on every backend this build and machine has
// (mpi, gloo; nccl in the CUDA build with a GPU, else skipped with the reason): each result
// equals "decompress every rank's contribution, then reduce in fp32 in rank order" exactly
// (simulated locally from every rank's deterministic input), is bit-identical on all ranks,
// reports exact byte counts, and ran on the backend chosen (nccl: its host wires on mpi).
#include <gtest/gtest.h>
#include <torch/types.h>

#include <mutex>
#include <set>

#include "harness/core/mpi_context.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/compressed_collectives.h"
#include "workloads/models/device.h"

using namespace sb::comm;

namespace {

// Why `name` cannot run here ("" when it can); the same on every rank, so a skip never
// leaves a rank in a collective alone.
std::string unavailable(const std::string& name) {
  const BackendInfo* b = find_backend(name);
  if (!b->available) return b->unavailable_why;
  if (name == "nccl" && sb::models::visible_gpus() == 0) return "nccl needs a GPU; none is visible";
  return "";
}

// The test's communicator on one backend, recording which backends ran its collectives.
class OnBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string why = unavailable(GetParam());
    if (!why.empty()) GTEST_SKIP() << GetParam() << ": " << why;
    if (GetParam() == "nccl")  // NCCL binds to the current device
      sb::models::resolve_device("cuda", sb::node_local_rank(MPI_COMM_WORLD));
    comm_ = std::make_unique<Communicator>(MPI_COMM_WORLD, 0, true, BackendChoice{GetParam(), ""});
    comm_->set_trace_hook(
        [this](const sb::CommEvent& e) {
          std::lock_guard<std::mutex> l(m_);
          ran_.insert(e.backend);
        },
        MPI_Wtime());
  }
  void TearDown() override {
    if (!comm_) return;
    // Codecs make host wires: nccl refuses host tensors, and the Communicator runs them on mpi.
    const std::string want = GetParam() == "nccl" ? "mpi" : GetParam();
    EXPECT_EQ(ran_, std::set<std::string>{want});
    comm_.reset();
  }
  Communicator& comm() { return *comm_; }

 private:
  std::unique_ptr<Communicator> comm_;
  std::mutex m_;
  std::set<std::string> ran_;
};

std::string backend_label(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

int world() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int me() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Rank q's input at `step`: (n) fp32 with magnitudes varying per block, known to every rank.
torch::Tensor input_of(int q, std::int64_t n, int step = 0) {
  auto gen = at::detail::createCPUGenerator(1000 * q + step + 1);
  auto x = torch::randn({n}, gen, torch::kFloat);
  return x.mul_(torch::pow(4.0, torch::arange(n, torch::kFloat).div(64).floor().remainder(5).sub(2)));
}

// The configurations every collective is checked with. Stochastic int8 is seeded per rank,
// as CompressedCollectives does, so the reference re-creates rank q's compressor.
std::vector<CompressorConfig> configs() {
  std::vector<CompressorConfig> v;
  for (const char* name : {"none", "fp16", "bf16", "int8", "int8s", "topk"}) {
    CompressorConfig c;
    c.name = name;
    if (c.name == "int8s") c.name = "int8", c.set("stochastic", true);
    c.set("block", 64);
    c.set("ratio", 0.05);
    v.push_back(c);
  }
  return v;
}
CompressorConfig for_rank(CompressorConfig c, int q) {
  c.seed = 7 + q;
  return c;
}
std::string label(const CompressorConfig& c) { return c.name + (c.get_bool("stochastic") ? "-stochastic" : ""); }

// Every rank holds the same tensor (bit for bit)?
bool same_on_all_ranks(const torch::Tensor& t) {
  auto ref = t.clone();
  MPI_Bcast(ref.data_ptr(), static_cast<int>(ref.numel() * ref.element_size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  int ok = torch::equal(ref, t) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

}  // namespace

TEST_P(OnBackend, AllGatherEqualsDecompressedShards) {
  const int n = world(), r = me();
  for (const std::int64_t s : {1, 100, 1000}) {
    for (const auto& c : configs()) {
      auto mine = make_compressor(for_rank(c, r));
      CollectiveStats st;
      auto out = compressed_all_gather(input_of(r, s), *mine, comm(), Group::World, &st);  // (n * s)
      auto ref = torch::empty({n * s}, torch::kFloat);
      for (int q = 0; q < n; ++q) {
        auto cq = make_compressor(for_rank(c, q));
        ref.narrow(0, q * s, s).copy_(cq->decompress(cq->compress(input_of(q, s)), s));
      }
      EXPECT_TRUE(torch::equal(out, ref)) << label(c) << " s=" << s;
      EXPECT_TRUE(same_on_all_ranks(out)) << label(c);
      // To each of the n - 1 other ranks (the own shard is not on the wire).
      EXPECT_EQ(st.logical_bytes, 4 * s * (n - 1));
      EXPECT_EQ(st.wire_bytes, mine->wire_bytes(s) * (n - 1)) << label(c);
    }
  }
}

// Reference reduce-scatter for rank r from every rank's compressor and error-feedback state,
// advanced exactly as the ranks advance theirs (chunks compressed in order 0..n-1).
struct SimRank {
  std::unique_ptr<Compressor> c;
  ErrorFeedback ef;
};

TEST_P(OnBackend, ReduceScatterEqualsSumOfDecompressedChunks) {
  const int n = world(), r = me();
  const std::int64_t s = 250;
  for (const auto& c : configs()) {
    for (bool use_ef : {false, true}) {
      auto mine = make_compressor(for_rank(c, r));
      ErrorFeedback ef;
      std::vector<SimRank> sim(n);
      for (int q = 0; q < n; ++q) sim[q].c = make_compressor(for_rank(c, q));
      for (int step = 0; step < 3; ++step) {
        CollectiveStats st;
        auto out = compressed_reduce_scatter(input_of(r, n * s, step), *mine, comm(),
                                             Group::World, &st, use_ef ? &ef : nullptr, "g");
        auto ref = torch::zeros({s}, torch::kFloat);
        for (int q = 0; q < n; ++q) {
          auto e = use_ef ? sim[q].ef.corrected("g", input_of(q, n * s, step)) : input_of(q, n * s, step);
          auto sent = torch::empty({n * s});
          for (int d = 0; d < n; ++d) {
            auto w = sim[q].c->compress(e.narrow(0, d * s, s).contiguous());
            sent.narrow(0, d * s, s).copy_(sim[q].c->decompress(w, s));
          }
          if (use_ef) sim[q].ef.keep("g", e, sent);
          ref += sent.narrow(0, r * s, s);  // fp32, in rank order
        }
        EXPECT_TRUE(torch::equal(out, ref)) << label(c) << " ef=" << use_ef << " step=" << step;
        EXPECT_EQ(st.logical_bytes, 4 * s * (n - 1));
        EXPECT_EQ(st.wire_bytes, (n - 1) * mine->wire_bytes(s));
      }
      if (use_ef) EXPECT_TRUE(torch::equal(ef.residual("g"), sim[r].ef.residual("g"))) << label(c);
    }
  }
}

TEST_P(OnBackend, AllReduceEqualsReduceScatterThenAllGatherAndIsIdentical) {
  const int n = world(), r = me();
  const std::int64_t len = 1001;  // not a multiple of 2, 3 or 4: padded inside
  const std::int64_t padded = (len + n - 1) / n * n, s = padded / n;
  for (const auto& c : configs()) {
    auto mine = make_compressor(for_rank(c, r));
    CollectiveStats st;
    auto out = compressed_all_reduce(input_of(r, len), *mine, comm(), Group::World, &st);
    // Reference: every rank's compressor compresses its n chunks, then its reduced chunk.
    std::vector<std::unique_ptr<Compressor>> cs;
    std::vector<torch::Tensor> sent;  // (padded) per rank
    for (int q = 0; q < n; ++q) {
      cs.push_back(make_compressor(for_rank(c, q)));
      auto x = torch::constant_pad_nd(input_of(q, len), {0, padded - len});
      auto d = torch::empty({padded});
      for (int k = 0; k < n; ++k)
        d.narrow(0, k * s, s).copy_(cs[q]->decompress(cs[q]->compress(x.narrow(0, k * s, s).contiguous()), s));
      sent.push_back(d);
    }
    auto ref = torch::empty({padded});
    for (int q = 0; q < n; ++q) {
      auto chunk = torch::zeros({s});
      for (int p = 0; p < n; ++p) chunk += sent[p].narrow(0, q * s, s);
      ref.narrow(0, q * s, s).copy_(cs[q]->decompress(cs[q]->compress(chunk), s));
    }
    EXPECT_TRUE(torch::equal(out, ref.narrow(0, 0, len))) << label(c);
    EXPECT_TRUE(same_on_all_ranks(out)) << label(c);
    // Logical: the plain fp32 all-reduce of the unpadded len (2 (n-1)/n of its bytes); the
    // wire carries the padding.
    EXPECT_EQ(st.logical_bytes, 8 * len * (n - 1) / n);
    EXPECT_EQ(st.wire_bytes, 2 * (n - 1) * mine->wire_bytes(s));
  }
}

TEST_P(OnBackend, UncompressedPolicyIsTheExactSum) {
  const int n = world(), r = me();
  CompressedCollectives cc(policy_preset("none"), r);
  const std::int64_t len = 4096;
  auto out = cc.all_reduce_grads("b", input_of(r, len), comm(), Group::World);
  auto ref = torch::zeros({len});
  for (int q = 0; q < n; ++q) ref += input_of(q, len);
  EXPECT_TRUE(torch::equal(out, ref));
  auto rs = cc.reduce_scatter_grads("b", input_of(r, len * n), comm(), Group::World);
  auto ref_rs = torch::zeros({len});
  for (int q = 0; q < n; ++q) ref_rs += input_of(q, len * n).narrow(0, r * len, len);
  EXPECT_TRUE(torch::equal(rs, ref_rs));
  EXPECT_EQ(cc.state_bytes(), 0);
}

// A sum of rank-r matrices sharing their column space is rank r: PowerSGD reproduces it.
TEST_P(OnBackend, PowerSGDReproducesARankRMatrix) {
  const int n = world(), r = me();
  const std::int64_t rows = 48, cols = 40, rank = 3;
  auto A = torch::randn({rows, rank}, at::detail::createCPUGenerator(5));
  auto B = [&](int q) { return torch::randn({cols, rank}, at::detail::createCPUGenerator(100 + q)); };
  auto sum = torch::zeros({rows, cols});
  for (int q = 0; q < n; ++q) sum += A.mm(B(q).t());
  PowerSGD psgd(rank, 11);
  CollectiveStats st;
  auto out = psgd.all_reduce("w", A.mm(B(r).t()), comm(), Group::World, &st);
  EXPECT_LT((out - sum).abs().max().item<float>(), 1e-4f * sum.abs().max().item<float>());
  EXPECT_TRUE(same_on_all_ranks(out));
  // Wire: two exact all-reduces (reduce-scatter + all-gather, padded to n) of P (rows, r)
  // and Q (cols, r); logical: the plain fp32 all-reduce of M (rows, cols).
  auto ar_wire = [&](std::int64_t m) { return 2 * (n - 1) * 4 * ((m + n - 1) / n); };
  auto ar_logical = [&](std::int64_t m) { return 8 * m * (n - 1) / n; };
  EXPECT_EQ(st.wire_bytes, ar_wire(rows * rank) + ar_wire(cols * rank));
  EXPECT_EQ(st.logical_bytes, ar_logical(rows * cols));
  // The residual of an exactly representable matrix is (numerically) zero.
  EXPECT_GT(psgd.state_bytes(), 0);
}

// Through the policy: a full-rank gradient is approximated, and with error feedback the
// running sum of the outputs follows the running sum of the true all-reduce.
TEST_P(OnBackend, PowerSGDErrorFeedbackTracksTheSumOverSteps) {
  const int n = world(), r = me();
  Policy p;
  p.preset = "custom";
  p.grad_all_reduce.name = "powersgd";
  p.grad_all_reduce.set("rank", 2);
  p.grad_all_reduce.error_feedback = true;
  CompressedCollectives cc(p, r);
  const std::int64_t len = 900;  // folded into 30 x 30
  auto got = torch::zeros({len}, torch::kDouble), want = torch::zeros({len}, torch::kDouble);
  double first_err = 0;
  for (int step = 0; step < 40; ++step) {
    auto out = cc.all_reduce_grads("g", input_of(r, len, step), comm(), Group::World);
    got += out.to(torch::kDouble);
    for (int q = 0; q < n; ++q) want += input_of(q, len, step).to(torch::kDouble);
    const double err = (got - want).norm().item<double>() / want.norm().item<double>();
    if (step == 0) first_err = err;
    if (step == 39) EXPECT_LT(err, 0.5 * first_err);  // lag is bounded; the sum converges
  }
}

TEST(CompressedCollectives, UnevenReduceScatterIsAClearError) {
  auto c = make_compressor(CompressorConfig{});
  Communicator comm(MPI_COMM_WORLD, 0);
  std::string msg;
  try {
    compressed_reduce_scatter(torch::ones({1001}), *c, comm, Group::World);  // 1001 = 7 x 11 x 13
  } catch (const sb::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("do not split evenly over"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pad the flat buffer to a multiple of the world size"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(CompressedCollectives, OnBackend,
                         ::testing::Values("mpi", "gloo", "nccl"), backend_label);
