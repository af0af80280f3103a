// Compressed all-gather, reduce-scatter (all-to-all + local fp32 sum) and all-reduce.
#include "workloads/comm/compressed_collectives.h"

#include <chrono>
#include <climits>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"

namespace sb::comm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int comm_size(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  return n;
}

// MPI counts are int: refuse larger chunks instead of silently truncating.
int mpi_count(std::int64_t bytes, const char* what) {
  SB_CHECK(bytes <= INT_MAX, "{}: {} bytes per rank exceed MPI's int count; split the buffer", what,
           bytes);
  return static_cast<int>(bytes);
}

}  // namespace

CollectiveStats& CollectiveStats::operator+=(const CollectiveStats& o) {
  logical_bytes += o.logical_bytes;
  wire_bytes += o.wire_bytes;
  seconds += o.seconds;
  codec_seconds += o.codec_seconds;
  return *this;
}

namespace {
// All-gathers an already compressed shard (wire: wire_bytes(s) uint8) -> (world * s) fp32.
// t0 is when the caller started compressing, codec the seconds it spent on that.
torch::Tensor all_gather_wire(const torch::Tensor& wire, std::int64_t s, const Compressor& c,
                              MPI_Comm comm, CollectiveStats* stats, Clock::time_point t0,
                              double codec) {
  const int world = comm_size(comm);
  const std::int64_t wb = c.wire_bytes(s);
  auto all = torch::empty({world * wb}, torch::kUInt8);  // (world * wb)
  sb::check_mpi(MPI_Allgather(wire.data_ptr(), mpi_count(wb, "compressed all-gather"), MPI_BYTE,
                       all.data_ptr(), static_cast<int>(wb), MPI_BYTE, comm),
         "MPI_Allgather (compressed all-gather)");
  const auto t1 = Clock::now();
  auto out = torch::empty({world * s}, torch::kFloat);  // (world * s)
  for (int r = 0; r < world; ++r)
    out.narrow(0, r * s, s).copy_(c.decompress(all.narrow(0, r * wb, wb), s));
  codec += since(t1);
  if (stats) {
    stats->logical_bytes += 4 * s;
    stats->wire_bytes += wb;
    stats->codec_seconds += codec;
    stats->seconds += since(t0);
  }
  return out;
}
}  // namespace

torch::Tensor compressed_all_gather(const torch::Tensor& shard, Compressor& c, MPI_Comm comm,
                                    CollectiveStats* stats) {
  const auto t0 = Clock::now();
  auto wire = c.compress(shard);  // (wire_bytes(s)) uint8
  return all_gather_wire(wire, shard.numel(), c, comm, stats, t0, since(t0));
}

torch::Tensor compressed_reduce_scatter(const torch::Tensor& full, Compressor& c, MPI_Comm comm,
                                        CollectiveStats* stats, ErrorFeedback* ef,
                                        const std::string& key) {
  const auto t0 = Clock::now();
  const int world = comm_size(comm);
  check_compress_input(full, "compressed reduce-scatter");
  const std::int64_t n = full.numel();
  SB_CHECK(n % world == 0,
           "compressed reduce-scatter: {} elements do not split evenly over {} ranks; pad the "
           "flat buffer to a multiple of the world size", n, world);
  const std::int64_t s = n / world, wb = c.wire_bytes(s);
  auto e = ef ? ef->corrected(key, full) : full;                // (world * s)
  auto send = torch::empty({world * wb}, torch::kUInt8);       // (world * wb): chunk q -> rank q
  torch::Tensor sent = ef ? torch::empty({n}, torch::kFloat) : torch::Tensor();
  for (int q = 0; q < world; ++q) {
    auto w = c.compress(e.narrow(0, q * s, s).contiguous());
    send.narrow(0, q * wb, wb).copy_(w);
    if (ef) sent.narrow(0, q * s, s).copy_(c.decompress(w, s));
  }
  if (ef) ef->keep(key, e, sent);
  double codec = since(t0);
  auto recv = torch::empty({world * wb}, torch::kUInt8);  // chunk from rank q at q * wb
  sb::check_mpi(MPI_Alltoall(send.data_ptr(), mpi_count(wb, "compressed reduce-scatter"), MPI_BYTE,
                      recv.data_ptr(), static_cast<int>(wb), MPI_BYTE, comm),
         "MPI_Alltoall (compressed gradient reduce-scatter)");
  const auto t1 = Clock::now();
  auto out = torch::zeros({s}, torch::kFloat);  // (s), summed in rank order
  for (int q = 0; q < world; ++q) c.decompress_add(recv.narrow(0, q * wb, wb), out);
  codec += since(t1);
  if (stats) {
    stats->logical_bytes += 4 * n;
    stats->wire_bytes += world * wb;
    stats->codec_seconds += codec;
    stats->seconds += since(t0);
  }
  return out;
}

torch::Tensor compressed_all_reduce(const torch::Tensor& x, Compressor& c, MPI_Comm comm,
                                    CollectiveStats* stats, ErrorFeedback* ef,
                                    const std::string& key) {
  const int world = comm_size(comm);
  check_compress_input(x, "compressed all-reduce");
  const std::int64_t n = x.numel(), padded = (n + world - 1) / world * world;
  auto xp = padded == n ? x : torch::constant_pad_nd(x, {0, padded - n});  // (padded)
  auto chunk = compressed_reduce_scatter(xp, c, comm, stats, ef, key);       // (padded / world)
  // The reduced chunk is compressed again for the all-gather; with error feedback its own
  // residual (key + "/gather") keeps what that second compression dropped.
  const auto t0 = Clock::now();
  torch::Tensor wire;
  if (ef) {
    auto e = ef->corrected(key + "/gather", chunk);
    wire = c.compress(e);
    ef->keep(key + "/gather", e, c.decompress(wire, e.numel()));
  } else {
    wire = c.compress(chunk);
  }
  auto all = all_gather_wire(wire, chunk.numel(), c, comm, stats, t0, since(t0));  // (padded)
  return padded == n ? all : all.narrow(0, 0, n).contiguous();
}

namespace {
std::unique_ptr<Compressor> make_for(CompressorConfig cfg, int rank) {
  // Ranks must round independently (else their rounding errors correlate and add up).
  cfg.seed = cfg.seed * 1000003ULL + static_cast<std::uint64_t>(rank);
  return make_compressor(cfg);
}
}  // namespace

CompressedCollectives::CompressedCollectives(const Policy& policy, int rank) : policy_(policy) {
  param_ = make_for(policy.param_all_gather, rank);
  grad_ = make_for(policy.grad_reduce_scatter, rank);
  const auto& ar = policy.grad_all_reduce;
  if (ar.name == "powersgd") {
    // Same seed on every rank: the initial Q must be identical everywhere.
    powersgd_ = std::make_unique<PowerSGD>(ar.rank, ar.seed, ar.error_feedback);
  } else {
    allreduce_ = make_for(ar, rank);
  }
}

torch::Tensor CompressedCollectives::all_gather_params(const torch::Tensor& shard, MPI_Comm comm,
                                                       CollectiveStats* stats) {
  return compressed_all_gather(shard, *param_, comm, stats);
}

torch::Tensor CompressedCollectives::reduce_scatter_grads(const std::string& key,
                                                          const torch::Tensor& full, MPI_Comm comm,
                                                          CollectiveStats* stats) {
  ErrorFeedback* ef = policy_.grad_reduce_scatter.error_feedback ? &grad_ef_ : nullptr;
  return compressed_reduce_scatter(full, *grad_, comm, stats, ef, key);
}

torch::Tensor CompressedCollectives::all_reduce_grads(const std::string& key, const torch::Tensor& x,
                                                      MPI_Comm comm, CollectiveStats* stats) {
  if (powersgd_) return powersgd_->all_reduce_flat(key, x, comm, stats);
  ErrorFeedback* ef = policy_.grad_all_reduce.error_feedback ? &allreduce_ef_ : nullptr;
  return compressed_all_reduce(x, *allreduce_, comm, stats, ef, key);
}

std::int64_t CompressedCollectives::state_bytes() const {
  return grad_ef_.residual_bytes() + allreduce_ef_.residual_bytes() +
         (powersgd_ ? powersgd_->state_bytes() : 0);
}

StateDict CompressedCollectives::state() const {
  StateDict s;
  param_->save_state(s, "param/");
  grad_->save_state(s, "grad/");
  if (allreduce_) allreduce_->save_state(s, "allreduce/");
  grad_ef_.save_state(s, "grad_ef/");
  allreduce_ef_.save_state(s, "allreduce_ef/");
  if (powersgd_) powersgd_->save_state(s, "powersgd/");
  return s;
}

void CompressedCollectives::load_state(const StateDict& s) {
  const char* known[] = {"param/", "grad/", "allreduce/", "grad_ef/", "allreduce_ef/",
                         "powersgd/"};
  for (const auto& [name, t] : s) {
    bool ok = false;
    for (const char* k : known) ok = ok || name.rfind(k, 0) == 0;
    SB_CHECK(ok, "compression state entry \"{}\" belongs to no part of policy {}; the state "
             "was saved by another version", name, policy_.describe());
  }
  param_->load_state(s, "param/");
  grad_->load_state(s, "grad/");
  if (allreduce_) allreduce_->load_state(s, "allreduce/");
  grad_ef_.load_state(s, "grad_ef/");
  allreduce_ef_.load_state(s, "allreduce_ef/");
  if (powersgd_) powersgd_->load_state(s, "powersgd/");
}

}  // namespace sb::comm
