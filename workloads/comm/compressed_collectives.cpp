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
// The wire of shard ((s), any float dtype). A cast wire is one cast from the shard's dtype
// (bf16 -> fp16 directly equals bf16 -> fp32 -> fp16: widening is exact); other formats
// compress the shard's fp32 values.
torch::Tensor wire_of(const torch::Tensor& shard, Compressor& c) {
  const auto d = c.cast_dtype();
  if (d == torch::ScalarType::Undefined)
    return c.compress(shard.scalar_type() == torch::kFloat ? shard : shard.to(torch::kFloat));
  SB_CHECK(shard.dim() == 1 && shard.is_floating_point(),
           "{}: a parameter shard is a 1-D float tensor, got {} of shape {}", c.name(),
           c10::toString(shard.scalar_type()), c10::str(shard.sizes()));
  auto wire = torch::empty({c.wire_bytes(shard.numel())}, torch::kUInt8);  // (wire_bytes(s))
  wire_view(wire, 0, shard.numel(), d).copy_(shard);
  return wire;
}

// All-gathers an already compressed shard (wire: wire_bytes(s) uint8) into full ((world * s),
// contiguous, any float dtype). A cast wire of full's dtype is received straight into full;
// another cast wire lands with one cast; other formats are decompressed per rank.
// t0 is when the caller started compressing, codec the seconds it spent on that.
void all_gather_wire(const torch::Tensor& wire, std::int64_t s, const Compressor& c,
                     const torch::Tensor& full, MPI_Comm comm, CollectiveStats* stats,
                     Clock::time_point t0, double codec) {
  const int world = comm_size(comm);
  const std::int64_t wb = c.wire_bytes(s);
  SB_CHECK(full.is_contiguous() && full.numel() == world * s,
           "compressed all-gather: the output must be contiguous with {} x {} elements (got {})",
           world, s, full.numel());
  const auto d = c.cast_dtype();
  const bool direct = d == full.scalar_type();
  auto all = direct ? full : torch::empty({world * wb}, torch::kUInt8);  // (world * wb) bytes
  sb::check_mpi(MPI_Allgather(wire.data_ptr(), mpi_count(wb, "compressed all-gather"), MPI_BYTE,
                              all.data_ptr(), static_cast<int>(wb), MPI_BYTE, comm),
                "MPI_Allgather (compressed all-gather)");
  const auto t1 = Clock::now();
  if (!direct && d != torch::ScalarType::Undefined) {
    full.copy_(wire_view(all, 0, world * s, d));  // the chunks are contiguous: one cast
  } else if (!direct) {
    for (int r = 0; r < world; ++r)
      full.narrow(0, r * s, s).copy_(c.decompress(all.narrow(0, r * wb, wb), s));
  }
  codec += since(t1);
  if (stats) {
    stats->logical_bytes += 4 * s;
    stats->wire_bytes += wb;
    stats->codec_seconds += codec;
    stats->seconds += since(t0);
  }
}
}  // namespace

void compressed_all_gather_into(const torch::Tensor& shard, const torch::Tensor& full,
                                Compressor& c, MPI_Comm comm, CollectiveStats* stats) {
  const auto t0 = Clock::now();
  auto wire = wire_of(shard, c);  // (wire_bytes(s)) uint8, never aliases full
  all_gather_wire(wire, shard.numel(), c, full, comm, stats, t0, since(t0));
}

torch::Tensor compressed_all_gather(const torch::Tensor& shard, Compressor& c, MPI_Comm comm,
                                    CollectiveStats* stats) {
  auto out = torch::empty({comm_size(comm) * shard.numel()}, torch::kFloat);  // (world * s)
  compressed_all_gather_into(shard, out, c, comm, stats);
  return out;
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
  auto all = torch::empty({padded}, torch::kFloat);  // (padded)
  all_gather_wire(wire, chunk.numel(), c, all, comm, stats, t0, since(t0));
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

void CompressedCollectives::all_gather_params(const torch::Tensor& shard,
                                              const torch::Tensor& full, MPI_Comm comm,
                                              CollectiveStats* stats) {
  // The compressor sees the parameters as the ranks compute with them: rounded once to
  // full's dtype. A cast wire of that dtype is that rounding itself; any other wire gets the
  // rounded values (bit-identical to casting on the caller, then compressing).
  const auto pd = full.scalar_type();
  const bool as_is = shard.scalar_type() == pd || param_->cast_dtype() == pd;
  compressed_all_gather_into(as_is ? shard : shard.to(pd), full, *param_, comm, stats);
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
