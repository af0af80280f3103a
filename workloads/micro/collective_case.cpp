// Collective benchmark cases: buffers, one call per implementation, the correctness check.
#include "workloads/micro/collective_case.h"

#include <algorithm>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/compressed_collectives.h"
#include "workloads/comm/compressor.h"
#include "workloads/micro/python_twin.h"

namespace sb::micro {
namespace {

// Rank q's deterministic input: small integers in [-15, 15], so every sum of a few ranks is
// exact in fp32 and the uncompressed result can be compared for equality.
torch::Tensor values(int q, std::int64_t count, std::int64_t salt) {
  auto i = torch::arange(count, torch::kInt64);
  return ((i * 7 + q * 13 + salt) % 31 - 15).to(torch::kFloat32);
}

}  // namespace

Op op_from_name(const std::string& name) { return comm::coll_from_name(name); }
const char* op_name(Op op) { return comm::coll_name(op); }
std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (Op op : comm::kCollOps) v.push_back(comm::coll_name(op));
  return v;
}
const std::vector<std::pair<std::string, std::string>>& plain_impls() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"mpi", "raw MPI (the baseline)"},
      {"ours", "sb::comm::Communicator's synchronous calls (blocking MPI on the caller)"},
      {"ours-async", "sb::comm::Communicator's requests, run by its communication thread"}};
  return v;
}

bool is_compressed(const std::string& impl) {
  for (const auto& [name, doc] : plain_impls())
    if (impl == name) return false;
  return !is_python(impl);
}

std::vector<std::string> impl_names() {
  std::vector<std::string> v;
  for (const auto& [name, doc] : plain_impls()) v.push_back(name);
  for (const auto& c : comm::compressor_names())
    if (!comm::compressor_info(c).identity) v.push_back(c);
  return v;
}

PlainSizes plain_sizes(Op op, std::int64_t bytes, int ranks) {
  PlainSizes s;
  const std::int64_t requested = std::max<std::int64_t>(bytes / 4, 1);
  const bool split = op != Op::AllReduce && op != Op::Broadcast;
  s.count = split ? (requested + ranks - 1) / ranks * ranks : requested;
  s.size_bytes = s.count * 4;
  s.wire_bytes = static_cast<std::int64_t>(comm::wire_bytes(op_name(op), static_cast<std::uint64_t>(s.size_bytes), ranks));
  s.logical_bytes = comm::wire_bytes(op_name(op), static_cast<std::uint64_t>(split ? s.size_bytes : requested * 4), ranks);
  return s;
}

CollectiveCase::CollectiveCase(const CaseConfig& cfg, MPI_Comm world, comm::Communicator* c)
    : cfg_(cfg), world_(world), comm_(c) {
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &n_);
  const bool compressed = is_compressed(cfg.impl);
  if (!compressed && cfg.impl != "mpi")
    SB_CHECK(comm_ != nullptr, "implementation \"{}\" needs a Communicator", cfg.impl);
  if (compressed) {
    SB_CHECK(cfg.op == Op::AllGather || cfg.op == Op::ReduceScatter || cfg.op == Op::AllReduce,
             "compressed collectives exist for all_gather, reduce_scatter and all_reduce, not {}",
             op_name(cfg.op));
    comm::CompressorConfig cc;
    cc.name = cfg.impl;
    cc.set("block", static_cast<double>(cfg.block)).set("ratio", cfg.ratio);
    compressor_ = comm::make_compressor(cc);  // unknown names are reported by the registry
  } else {
    SB_CHECK(std::find(impl_names().begin(), impl_names().end(), cfg.impl) != impl_names().end(),
             "unknown implementation \"{}\"; known: {}", cfg.impl, fmt::join(impl_names(), ", "));
  }
  // Split ops (and compressed ones) need a whole number of fp32 elements per rank.
  count_ = plain_sizes(compressed ? Op::AllGather : cfg.op, cfg.bytes, n_).count;
  const std::int64_t s = count_ / n_;
  switch (cfg.op) {
    case Op::AllGather: in_ = torch::zeros({s}); out_ = torch::zeros({count_}); break;
    case Op::ReduceScatter: in_ = torch::zeros({count_}); out_ = torch::zeros({s}); break;
    case Op::AllToAll: in_ = torch::zeros({count_}); out_ = torch::zeros({count_}); break;
    default: in_ = torch::zeros({count_}); break;
  }
  fill(0);
}

CollectiveCase::~CollectiveCase() = default;

void CollectiveCase::fill(std::int64_t salt) {
  const std::int64_t s = count_ / n_;
  if (cfg_.op == Op::AllGather) in_.copy_(values(rank_, s, salt));
  else in_.copy_(values(rank_, count_, salt));
}

void CollectiveCase::run() {
  const auto& impl = cfg_.impl;
  float* in = in_.data_ptr<float>();
  const int cnt = static_cast<int>(count_), s = static_cast<int>(count_ / n_);
  if (impl == "mpi") {
    switch (cfg_.op) {
      case Op::AllGather:
        MPI_Allgather(in, s, MPI_FLOAT, out_.data_ptr<float>(), s, MPI_FLOAT, world_); break;
      case Op::ReduceScatter:
        MPI_Reduce_scatter_block(in, out_.data_ptr<float>(), s, MPI_FLOAT, MPI_SUM, world_); break;
      case Op::AllReduce: MPI_Allreduce(MPI_IN_PLACE, in, cnt, MPI_FLOAT, MPI_SUM, world_); break;
      case Op::Broadcast: MPI_Bcast(in, cnt, MPI_FLOAT, 0, world_); break;
      case Op::AllToAll:
        MPI_Alltoall(in, s, MPI_FLOAT, out_.data_ptr<float>(), s, MPI_FLOAT, world_); break;
    }
    return;
  }
  if (impl == "ours-async") {  // issued as a request on the communication thread, then waited
    using G = comm::Group;
    comm::Request r;
    switch (cfg_.op) {
      case Op::AllGather: r = comm_->all_gather_async(in_, out_, G::World); break;
      case Op::ReduceScatter: r = comm_->reduce_scatter_async(in_, out_, G::World); break;
      case Op::AllReduce: r = comm_->all_reduce_async(in_, G::World); break;
      case Op::Broadcast: r = comm_->broadcast_async(in_, 0, G::World); break;
      case Op::AllToAll: r = comm_->all_to_all_async(in_, out_, G::World); break;
    }
    r.wait();
    return;
  }
  if (impl == "ours") {
    using G = comm::Group;
    switch (cfg_.op) {
      case Op::AllGather: comm_->all_gather(in_, out_, G::World); break;
      case Op::ReduceScatter: comm_->reduce_scatter(in_, out_, G::World); break;
      case Op::AllReduce: comm_->all_reduce(in_, G::World); break;
      case Op::Broadcast: comm_->broadcast(in_, 0, G::World); break;
      case Op::AllToAll: comm_->all_to_all(in_, out_, G::World); break;
    }
    return;
  }
  // Compressed (checked in the constructor), on the communicator's backend.
  SB_CHECK(comm_ != nullptr, "implementation \"{}\" needs a Communicator", impl);
  using G = comm::Group;
  switch (cfg_.op) {
    case Op::AllGather: out_ = comm::compressed_all_gather(in_, *compressor_, *comm_, G::World); break;
    case Op::ReduceScatter:
      out_ = comm::compressed_reduce_scatter(in_, *compressor_, *comm_, G::World);
      break;
    default: out_ = comm::compressed_all_reduce(in_, *compressor_, *comm_, G::World); break;
  }
}

std::int64_t CollectiveCase::wire_bytes() const {
  if (!compressor_) return plain_sizes(cfg_.op, cfg_.bytes, n_).wire_bytes;
  const std::int64_t s = count_ / n_;
  // Per rank: all_gather sends its compressed shard to n-1 ranks; reduce_scatter one
  // compressed chunk to each of n-1 ranks; all_reduce does both (docs/METRICS.md).
  const std::int64_t chunk = compressor_->wire_bytes(s) * (n_ - 1);
  return cfg_.op == Op::AllReduce ? 2 * chunk : chunk;
}

std::uint64_t CollectiveCase::logical_bytes() const {
  // A compressed case's buffer is padded like a split op's; its baseline is the op's own.
  const PlainSizes s = plain_sizes(cfg_.op, cfg_.bytes, n_);
  const bool unpadded = cfg_.op == Op::AllReduce || cfg_.op == Op::Broadcast;
  return unpadded ? s.logical_bytes
                  : comm::wire_bytes(op_name(cfg_.op), static_cast<std::uint64_t>(size_bytes()), n_);
}

std::int64_t CollectiveCase::check() {
  const std::int64_t salt = 5;
  fill(salt);
  run();
  const std::int64_t s = count_ / n_;
  torch::Tensor expected, got = cfg_.op == Op::AllReduce || cfg_.op == Op::Broadcast
                                    ? (compressor_ ? out_ : in_)
                                    : out_;
  // D(C(x)) as every rank sees it: the compressors are deterministic (no stochastic rounding).
  auto dc = [&](const torch::Tensor& x) {
    if (!compressor_) return x;
    auto c = x.contiguous();
    return compressor_->decompress(compressor_->compress(c), c.numel());
  };
  switch (cfg_.op) {
    case Op::AllGather: {
      std::vector<torch::Tensor> parts;
      for (int q = 0; q < n_; ++q) parts.push_back(dc(values(q, s, salt)));
      expected = torch::cat(parts);
      break;
    }
    case Op::ReduceScatter: {
      expected = torch::zeros({s});
      for (int q = 0; q < n_; ++q) expected += dc(values(q, count_, salt).slice(0, rank_ * s, (rank_ + 1) * s));
      break;
    }
    case Op::AllReduce: {
      if (!compressor_) {
        expected = torch::zeros({count_});
        for (int q = 0; q < n_; ++q) expected += values(q, count_, salt);
      } else {  // compressed reduce-scatter, then compressed all-gather of the reduced chunks
        std::vector<torch::Tensor> parts;
        for (int r = 0; r < n_; ++r) {
          auto chunk = torch::zeros({s});
          for (int q = 0; q < n_; ++q) chunk += dc(values(q, count_, salt).slice(0, r * s, (r + 1) * s));
          parts.push_back(dc(chunk));
        }
        expected = torch::cat(parts);
      }
      break;
    }
    case Op::Broadcast: expected = values(0, count_, salt); break;
    case Op::AllToAll: {
      std::vector<torch::Tensor> parts;
      for (int q = 0; q < n_; ++q) parts.push_back(values(q, count_, salt).slice(0, rank_ * s, (rank_ + 1) * s));
      expected = torch::cat(parts);
      break;
    }
  }
  SB_CHECK(got.numel() == expected.numel(), "result has {} elements, expected {}", got.numel(),
           expected.numel());
  std::int64_t wrong = got.ne(expected).sum().item<std::int64_t>();
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, world_);
  fill(0);
  return wrong;
}

Timing time_case(CollectiveCase& c, int warmup, int iters, MPI_Comm world) {
  for (int i = 0; i < warmup; ++i) c.run();
  Timing t;
  double local_sum = 0;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(world);
    const double t0 = MPI_Wtime();
    c.run();
    double dt = MPI_Wtime() - t0;
    local_sum += dt;
    t.local_call_s.push_back(dt);
    t.start_wtime.push_back(t0);
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, world);  // outside the timed call
    t.per_call_s.push_back(dt);
  }
  double sum = 0;
  for (double v : t.per_call_s) sum += v;
  t.mean_s = iters ? sum / iters : 0;
  double mine = iters ? local_sum / iters : 0;
  MPI_Allreduce(&mine, &t.rank_min_s, 1, MPI_DOUBLE, MPI_MIN, world);
  MPI_Allreduce(&mine, &t.rank_max_s, 1, MPI_DOUBLE, MPI_MAX, world);
  return t;
}

int default_iterations(std::int64_t bytes) {
  if (bytes <= (64 << 10)) return 200;
  if (bytes <= (1 << 20)) return 50;
  if (bytes <= (16 << 20)) return 10;
  return 5;
}

}  // namespace sb::micro
