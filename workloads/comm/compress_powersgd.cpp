// PowerSGD all-reduce: two small uncompressed all-reduces (of P and Q) instead of one of M.
#include "workloads/comm/compress_powersgd.h"

#include <chrono>
#include <cmath>
#include <functional>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/compressed_collectives.h"

namespace sb::comm {
namespace {

// Deterministic fp32 all-reduce, bit-identical on every rank (Open MPI's MPI_Allreduce need
// not be): reduce-scatter + all-gather through the "none" compressor.
torch::Tensor exact_all_reduce(const torch::Tensor& x, MPI_Comm comm, CollectiveStats* stats) {
  static thread_local auto none = make_compressor(CompressorConfig{});
  auto shape = x.sizes().vec();
  return compressed_all_reduce(x.reshape({-1}).contiguous(), *none, comm, stats).view(shape);
}

// Logical bytes of an uncompressed all-reduce of n elements (reduce-scatter + all-gather).
std::int64_t all_reduce_logical_bytes(std::int64_t n, int world) {
  const std::int64_t padded = (n + world - 1) / world * world;
  return 4 * padded + 4 * (padded / world);
}

const sb::Registrar registrar([] {
  sb::register_name("compressor", "powersgd",
                    "rank-r PowerSGD with error feedback and warm start (gradient all-reduce only)");
});

}  // namespace

PowerSGD::PowerSGD(std::int64_t rank, std::uint64_t seed, bool error_feedback)
    : rank_(rank), seed_(seed), error_feedback_(error_feedback) {
  SB_CHECK(rank_ >= 1, "powersgd: rank = {} must be at least 1 (key compress.allreduce.rank)", rank_);
}

torch::Tensor PowerSGD::all_reduce(const std::string& key, const torch::Tensor& m, MPI_Comm comm,
                                   CollectiveStats* stats) {
  SB_CHECK(m.dim() == 2 && m.scalar_type() == torch::kFloat,
           "powersgd \"{}\": expects a 2-D fp32 matrix, got {} of shape {}; use all_reduce_flat "
           "for flat buffers", key, c10::toString(m.scalar_type()), c10::str(m.sizes()));
  const std::int64_t rows = m.size(0), cols = m.size(1);
  if (std::min(rows, cols) <= rank_) return exact_all_reduce(m, comm, stats);

  const auto t0 = std::chrono::steady_clock::now();
  int world = 1;
  MPI_Comm_size(comm, &world);
  CollectiveStats inner;
  torch::Tensor M = m;  // (rows, cols)
  if (error_feedback_) {
    auto it = residual_.find(key);
    if (it != residual_.end()) {
      SB_CHECK(it->second.sizes() == m.sizes(),
               "powersgd \"{}\": shape changed from {} to {}; use one key per buffer", key,
               c10::str(it->second.sizes()), c10::str(m.sizes()));
      M = m + it->second;
    }
  }
  auto& Q = q_[key];  // (cols, r), warm start
  if (!Q.defined() || Q.size(0) != cols) {
    // Identical on every rank: same seed, same key.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ ^ std::hash<std::string>{}(key));
    Q = torch::randn({cols, rank_}, gen, torch::kFloat);
  }
  auto P = exact_all_reduce(M.mm(Q), comm, &inner);       // (rows, r) = sum_i M_i Q
  P = std::get<0>(torch::linalg_qr(P, "reduced"));         // orthonormal columns
  auto Q_local = M.t().mm(P);                              // (cols, r)
  Q = exact_all_reduce(Q_local, comm, &inner);             // (cols, r) = sum_i M_i^T P
  auto out = P.mm(Q.t());                                  // (rows, cols)
  if (error_feedback_) residual_[key] = M - P.mm(Q_local.t());
  if (stats) {
    stats->logical_bytes += all_reduce_logical_bytes(rows * cols, world);
    stats->wire_bytes += inner.wire_bytes;
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double mpi = inner.seconds - inner.codec_seconds;
    stats->seconds += total;
    stats->codec_seconds += total - mpi;  // matmuls, QR and error feedback count as codec
  }
  return out;
}

torch::Tensor PowerSGD::all_reduce_flat(const std::string& key, const torch::Tensor& x,
                                        MPI_Comm comm, CollectiveStats* stats) {
  check_compress_input(x, "powersgd");
  const std::int64_t n = x.numel();
  const auto c = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(std::sqrt(double(n)))));
  const std::int64_t rows = (n + c - 1) / c;
  auto padded = rows * c == n ? x : torch::constant_pad_nd(x, {0, rows * c - n});
  auto out = all_reduce(key, padded.view({rows, c}), comm, stats);  // (rows, c)
  return out.reshape({-1}).narrow(0, 0, n).contiguous();
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
