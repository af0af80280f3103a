// PowerSGD all-reduce: two small uncompressed all-reduces (of P and Q) instead of one of M,
// described as phases for the progress engine.
#include "workloads/comm/compress_powersgd.h"

#include <cmath>
#include <functional>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/compressed_collectives.h"

namespace sb::comm {
namespace {

// Logical bytes of an uncompressed fp32 all-reduce of n elements.
std::int64_t all_reduce_logical_bytes(std::int64_t n, int world) {
  return static_cast<std::int64_t>(wire_bytes("all_reduce", static_cast<std::uint64_t>(4 * n), world));
}

void check_matrix(const std::string& key, const torch::Tensor& m) {
  SB_CHECK(m.dim() == 2 && m.scalar_type() == torch::kFloat,
           "powersgd \"{}\": expects a 2-D fp32 matrix, got {} of shape {}; use all_reduce_flat "
           "for flat buffers", key, c10::toString(m.scalar_type()), c10::str(m.sizes()));
}

// Its record: a whole all-reduce with one setting, its state and wire bytes from the sizes.
const sb::Registrar registrar([] {
  CompressorInfo info;
  info.form = CompressorForm::WholeAllReduce;
  info.why_whole = "needs an all-reduce between its two halves (P and Q)";
  info.settings = {{"rank", KeyType::Int, 4, 1, std::numeric_limits<double>::infinity(), false,
                    "rank"}};
  info.make_all_reduce = [](const CompressorConfig& c) {
    return std::make_unique<PowerSGD>(c.get_int("rank"), c.seed, c.error_feedback);
  };
  info.state_bytes = [](const CompressorConfig& c, std::int64_t n) {
    return PowerSGD::flat_state_bytes(n, c.get_int("rank"), c.error_feedback);
  };
  info.wire_bytes = [](const CompressorConfig& c, std::int64_t n, int world) {
    return PowerSGD::flat_wire_bytes(n, c.get_int("rank"), world);
  };
  register_compressor("powersgd",
                      "rank-r PowerSGD with error feedback and warm start (gradient all-reduce only)",
                      std::move(info));
});

}  // namespace

PowerSGD::PowerSGD(std::int64_t rank, std::uint64_t seed, bool error_feedback)
    : rank_(rank), seed_(seed), error_feedback_(error_feedback),
      none_(make_compressor(CompressorConfig{})) {
  SB_CHECK(rank_ >= 1, "powersgd: rank = {} must be at least 1 (key compress.allreduce.rank)", rank_);
}

std::vector<CompositePhase> PowerSGD::exact_phases(Source input, std::vector<std::int64_t> shape,
                                          int world, Sink deliver, CollectiveStats* bytes) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return comm::all_reduce_phases([input] { return input().reshape({-1}).contiguous(); }, n,
                           none_.get(), nullptr, {}, world,
                           [deliver, shape](const torch::Tensor& r) { deliver(r.view(shape)); },
                           bytes);
}

// The phases share M, P and Q_local; the warm start and the residual are read in the first
// prepare and written after the last phase, all on the thread that runs this kind.
std::vector<CompositePhase> PowerSGD::phases(const std::string& key, Source input, std::int64_t rows,
                                    std::int64_t cols, int world, Sink deliver,
                                    CollectiveStats* bytes) {
  if (std::min(rows, cols) <= rank_) return exact_phases(input, {rows, cols}, world, deliver, bytes);
  struct State {
    torch::Tensor M, P, Q_local;  // (rows, cols), (rows, r), (cols, r)
  };
  auto st = std::make_shared<State>();
  const std::int64_t r = rank_;
  auto p_local = [this, st, key, input, cols, r] {  // M_i Q, M_i = G_i + E_i
    const auto m = input();
    st->M = m;
    if (error_feedback_) {
      auto it = residual_.find(key);
      if (it != residual_.end()) {
        SB_CHECK(it->second.sizes() == m.sizes(),
                 "powersgd \"{}\": shape changed from {} to {}; use one key per buffer", key,
                 c10::str(it->second.sizes()), c10::str(m.sizes()));
        st->M = m + it->second;
      }
    }
    auto& Q = q_[key];  // (cols, r), warm start
    if (!Q.defined() || Q.size(0) != cols) {
      // Identical on every rank: same seed, same key.
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ ^ std::hash<std::string>{}(key));
      Q = torch::randn({cols, r}, gen, torch::kFloat);
    }
    return st->M.mm(Q);
  };
  auto keep_p = [st](const torch::Tensor& P) { st->P = P; };  // sum_i M_i Q
  auto q_local = [st] {
    st->P = std::get<0>(torch::linalg_qr(st->P, "reduced"));  // orthonormal columns
    st->Q_local = st->M.t().mm(st->P);                         // M_i^T P
    return st->Q_local;
  };
  auto finish = [this, st, key, deliver](const torch::Tensor& Q) {  // sum_i M_i^T P
    q_[key] = Q;
    auto out = st->P.mm(Q.t());  // (rows, cols)
    if (error_feedback_) residual_[key] = st->M - st->P.mm(st->Q_local.t());
    *st = State();
    deliver(out);
  };
  CollectiveStats inner;
  auto v = exact_phases(p_local, {rows, r}, world, keep_p, &inner);
  auto w = exact_phases(q_local, {cols, r}, world, finish, &inner);
  v.insert(v.end(), w.begin(), w.end());
  if (bytes) {
    bytes->logical_bytes += all_reduce_logical_bytes(rows * cols, world);
    bytes->wire_bytes += inner.wire_bytes;
  }
  return v;
}

std::vector<CompositePhase> PowerSGD::all_reduce_flat_phases(const std::string& key, Source input,
                                                    std::int64_t n, int world, Sink deliver,
                                                    CollectiveStats* bytes) {
  const auto [rows, c] = flat_shape(n);
  auto matrix = [input, n, rows, c] {  // (rows, c), zero-padded
    auto x = input();
    check_compress_input(x, "powersgd");
    auto padded = rows * c == n ? x : torch::constant_pad_nd(x, {0, rows * c - n});
    return padded.view({rows, c});
  };
  auto flat = [deliver, n](const torch::Tensor& out) {
    deliver(out.reshape({-1}).narrow(0, 0, n).contiguous());
  };
  // Logical bytes of the flat n elements (the plain all-reduce's), not of the padded matrix.
  CollectiveStats inner;
  auto v = phases(key, matrix, rows, c, world, flat, &inner);
  if (bytes) {
    bytes->logical_bytes += all_reduce_logical_bytes(n, world);
    bytes->wire_bytes += inner.wire_bytes;
  }
  return v;
}

torch::Tensor PowerSGD::all_reduce(const std::string& key, const torch::Tensor& m,
                                   Communicator& comm, Group g, CollectiveStats* stats) {
  check_matrix(key, m);
  torch::Tensor out;
  CompressedOp op;
  op.run.phases = phases(key, [m] { return m; }, m.size(0), m.size(1), comm.size(g),
                         [&out](const torch::Tensor& r) { out = r; }, &op.bytes);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "all_reduce");
  return out;
}

torch::Tensor PowerSGD::all_reduce_flat(const std::string& key, const torch::Tensor& x,
                                        Communicator& comm, Group g, CollectiveStats* stats) {
  check_compress_input(x, "powersgd");
  torch::Tensor out;
  CompressedOp op;
  op.run.phases = all_reduce_flat_phases(key, [x] { return x; }, x.numel(), comm.size(g),
                                         [&out](const torch::Tensor& r) { out = r; }, &op.bytes);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "all_reduce");
  return out;
}

std::pair<std::int64_t, std::int64_t> PowerSGD::flat_shape(std::int64_t n) {
  const auto c = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(std::sqrt(double(n)))));
  return {(n + c - 1) / c, c};
}

std::int64_t PowerSGD::flat_state_bytes(std::int64_t n, std::int64_t rank, bool error_feedback) {
  const auto [rows, cols] = flat_shape(n);
  if (std::min(rows, cols) <= rank) return 0;  // all-reduced exactly (phases())
  return 4 * cols * rank + (error_feedback ? 4 * rows * cols : 0);
}

std::int64_t PowerSGD::flat_wire_bytes(std::int64_t n, std::int64_t rank, int world) {
  if (world <= 1) return 0;
  const auto w = static_cast<std::int64_t>(world);
  // exact_phases: 4-byte elements, a chunk of ceil(m / world) to each other rank, twice.
  const auto exact = [w](std::int64_t m) { return 2 * (w - 1) * 4 * ((m + w - 1) / w); };
  const auto [rows, cols] = flat_shape(n);
  if (std::min(rows, cols) <= rank) return exact(rows * cols);
  return exact(rows * rank) + exact(cols * rank);
}

std::int64_t PowerSGD::state_bytes() const {
  std::int64_t b = 0;
  for (const auto& [k, q] : q_) b += 4 * q.numel();
  for (const auto& [k, r] : residual_) b += 4 * r.numel();
  return b;
}

void PowerSGD::save_state(StateDict& out, const std::string& prefix) const {
  for (const auto& [k, q] : q_) out[prefix + "q/" + k] = q;
  for (const auto& [k, r] : residual_) out[prefix + "residual/" + k] = r;
}

void PowerSGD::load_state(const StateDict& in, const std::string& prefix) {
  q_.clear();
  residual_.clear();
  for (auto* m : {&q_, &residual_}) {
    const std::string sub = prefix + (m == &q_ ? "q/" : "residual/");
    for (const auto& [k, t] : state_with_prefix(in, sub)) {
      SB_CHECK(t.scalar_type() == torch::kFloat && t.dim() == 2 &&
                   (m != &q_ || t.size(1) == rank_),
               "powersgd state \"{}{}\" is {} of shape {}; expected a 2-D fp32 matrix{}", sub,
               k, c10::toString(t.scalar_type()), c10::str(t.sizes()),
               m == &q_ ? fmt::format(" of {} columns (the rank)", rank_) : "");
      (*m)[k] = t.clone();
    }
  }
}

}  // namespace sb::comm
