// Point-to-point benchmark cases: buffers, one iteration per implementation, the check.
#include "workloads/micro/p2p_case.h"

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "workloads/comm/communicator.h"

namespace sb::micro {
namespace {

constexpr int kTagData = 1, kTagAck = 2;

// Rank q's byte pattern (differs between ranks and along the message).
torch::Tensor pattern(int q, std::int64_t n) {
  return ((torch::arange(n, torch::kInt64) * 7 + q * 13 + 1) % 251).to(torch::kUInt8);
}

void mpi_ok(int rc, const char* what) { sb::check_mpi(rc, what); }

}  // namespace

const std::vector<std::pair<std::string, std::string>>& p2p_benches() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"p2p_latency", "point-to-point ping-pong between rank pairs (osu_latency): one-way "
                      "latency = round trip / 2"},
      {"p2p_bw", "point-to-point bandwidth, a window of non-blocking sends one way (osu_bw)"},
      {"p2p_bibw", "point-to-point bandwidth, windows both ways at once (osu_bibw)"}};
  return v;
}

bool is_p2p(const std::string& op) {
  for (const auto& [name, doc] : p2p_benches())
    if (op == name) return true;
  return false;
}

P2PBench p2p_from_name(const std::string& name) {
  std::vector<std::string> known;
  for (std::size_t i = 0; i < p2p_benches().size(); ++i) {
    if (name == p2p_benches()[i].first) return static_cast<P2PBench>(i);
    known.push_back(p2p_benches()[i].first);
  }
  SB_FAIL("unknown point-to-point benchmark \"{}\"; known: {}", name, fmt::join(known, ", "));
}

const char* p2p_bench_name(P2PBench b) {
  return p2p_benches()[static_cast<std::size_t>(b)].first.c_str();
}

P2PCase::P2PCase(const P2PConfig& cfg, MPI_Comm world, comm::Communicator* c)
    : cfg_(cfg), world_(world), comm_(c) {
  int n = 1;
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &n);
  SB_CHECK(n % 2 == 0, "{}: the point-to-point benchmarks pair ranks (2i, 2i + 1); run an even "
           "number of ranks, not {}", p2p_bench_name(cfg.bench), n);
  SB_CHECK(cfg.impl == "mpi" || cfg.impl == "ours" || cfg.impl == "ours-async",
           "{}: implementation \"{}\" is not one of mpi, ours, ours-async (point-to-point "
           "messages are not compressed)", p2p_bench_name(cfg.bench), cfg.impl);
  SB_CHECK(cfg.impl == "mpi" || comm_ != nullptr, "implementation \"{}\" needs a Communicator",
           cfg.impl);
  SB_CHECK(cfg.bytes >= 1 && cfg.window >= 1, "{}: need bytes >= 1 and window >= 1",
           p2p_bench_name(cfg.bench));
  peer_ = rank_ ^ 1;
  lead_ = rank_ % 2 == 0;
  const int slots = cfg.bench == P2PBench::Latency ? 1 : cfg.window;
  send_ = torch::zeros({cfg.bytes}, torch::kUInt8);
  recv_ = torch::zeros({slots, cfg.bytes}, torch::kUInt8);
  ack_out_ = torch::zeros({4}, torch::kUInt8);
  ack_in_ = torch::zeros({4}, torch::kUInt8);
}

void P2PCase::run() {
  switch (cfg_.bench) {
    case P2PBench::Latency: latency(); return;
    case P2PBench::Bw: window(lead_, !lead_); return;
    case P2PBench::Bibw: window(true, true); return;
  }
}

void P2PCase::latency() {
  const auto g = comm::Group::World;
  torch::Tensor in = recv_[0];
  if (cfg_.impl == "mpi") {
    const auto n = static_cast<int>(cfg_.bytes);
    if (lead_) {
      mpi_ok(MPI_Send(send_.data_ptr(), n, MPI_BYTE, peer_, kTagData, world_), "MPI_Send");
      mpi_ok(MPI_Recv(in.data_ptr(), n, MPI_BYTE, peer_, kTagData, world_, MPI_STATUS_IGNORE),
             "MPI_Recv");
    } else {
      mpi_ok(MPI_Recv(in.data_ptr(), n, MPI_BYTE, peer_, kTagData, world_, MPI_STATUS_IGNORE),
             "MPI_Recv");
      mpi_ok(MPI_Send(send_.data_ptr(), n, MPI_BYTE, peer_, kTagData, world_), "MPI_Send");
    }
  } else if (cfg_.impl == "ours") {
    if (lead_) {
      comm_->send(send_, peer_, g, "micro", kTagData);
      comm_->recv(in, peer_, g, "micro", kTagData);
    } else {
      comm_->recv(in, peer_, g, "micro", kTagData);
      comm_->send(send_, peer_, g, "micro", kTagData);
    }
  } else {  // ours-async: the receive posted before the send, as a pipeline stage posts it
    comm::Request r = comm_->recv_async(in, peer_, g, "micro", kTagData);
    if (!lead_) r.wait();
    comm_->send_async(send_, peer_, g, "micro", kTagData).wait();
    if (lead_) r.wait();
  }
}

// A window of messages each way asked for, then the ack (the lead waits for it in p2p_bw,
// both exchange it in p2p_bibw), as OSU.
void P2PCase::window(bool send, bool recv) {
  const auto g = comm::Group::World;
  const int w = cfg_.window;
  if (cfg_.impl == "mpi") {
    const auto n = static_cast<int>(cfg_.bytes);
    std::vector<MPI_Request> reqs;
    reqs.reserve(2 * static_cast<std::size_t>(w));
    for (int i = 0; recv && i < w; ++i) {
      reqs.emplace_back();
      mpi_ok(MPI_Irecv(recv_[i].data_ptr(), n, MPI_BYTE, peer_, kTagData, world_, &reqs.back()),
             "MPI_Irecv");
    }
    for (int i = 0; send && i < w; ++i) {
      reqs.emplace_back();
      mpi_ok(MPI_Isend(send_.data_ptr(), n, MPI_BYTE, peer_, kTagData, world_, &reqs.back()),
             "MPI_Isend");
    }
    mpi_ok(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE),
           "MPI_Waitall");
    MPI_Request ack[2];
    int k = 0;
    if (!send || recv)  // the receiver of a window acks it
      mpi_ok(MPI_Isend(ack_out_.data_ptr(), 4, MPI_BYTE, peer_, kTagAck, world_, &ack[k++]), "MPI_Isend");
    if (send)
      mpi_ok(MPI_Irecv(ack_in_.data_ptr(), 4, MPI_BYTE, peer_, kTagAck, world_, &ack[k++]), "MPI_Irecv");
    mpi_ok(MPI_Waitall(k, ack, MPI_STATUSES_IGNORE), "MPI_Waitall");
    return;
  }
  std::vector<comm::Request> reqs;
  for (int i = 0; recv && i < w; ++i)
    reqs.push_back(comm_->recv_async(recv_[i], peer_, g, "micro", kTagData));
  for (int i = 0; send && i < w; ++i)
    reqs.push_back(comm_->send_async(send_, peer_, g, "micro", kTagData));
  for (auto& r : reqs) r.wait();
  const bool sync = cfg_.impl == "ours";
  if (sync && !(send && recv)) {  // p2p_bw through the blocking calls
    if (send)
      comm_->recv(ack_in_, peer_, g, "micro", kTagAck);
    else
      comm_->send(ack_out_, peer_, g, "micro", kTagAck);
    return;
  }
  comm::Request a, b;
  if (send) a = comm_->recv_async(ack_in_, peer_, g, "micro", kTagAck);
  if (!send || recv) b = comm_->send_async(ack_out_, peer_, g, "micro", kTagAck);
  a.wait();
  b.wait();
}

std::int64_t P2PCase::check() {
  send_.copy_(pattern(rank_, cfg_.bytes));
  recv_.zero_();
  MPI_Barrier(world_);
  run();
  // Who received: both ranks in the ping-pong and p2p_bibw; the odd rank in p2p_bw.
  const bool received = cfg_.bench != P2PBench::Bw || !lead_;
  if (!received) return 0;
  const torch::Tensor want = pattern(peer_, cfg_.bytes).unsqueeze(0).expand_as(recv_);
  return recv_.ne(want).sum().item<std::int64_t>();
}

double p2p_per_message_s(P2PBench b, int window, double iteration_s) {
  return b == P2PBench::Latency ? iteration_s / 2 : iteration_s / window;
}

double p2p_bandwidth(P2PBench b, std::int64_t bytes, int window, double iteration_s) {
  const double n = static_cast<double>(bytes);
  if (b == P2PBench::Latency) return n / p2p_per_message_s(b, window, iteration_s);
  return n * window * (b == P2PBench::Bibw ? 2 : 1) / iteration_s;
}

double P2PCase::per_message_s(double iteration_s) const {
  return p2p_per_message_s(cfg_.bench, cfg_.window, iteration_s);
}

double P2PCase::bandwidth(double iteration_s) const {
  return p2p_bandwidth(cfg_.bench, cfg_.bytes, cfg_.window, iteration_s);
}

P2PTiming time_p2p(P2PCase& c, int warmup, int iters, MPI_Comm world) {
  for (int i = 0; i < warmup; ++i) c.run();
  P2PTiming t;
  MPI_Barrier(world);
  double local_sum = 0;
  for (int i = 0; i < iters; ++i) {
    const double t0 = MPI_Wtime();
    c.run();
    const double dt = MPI_Wtime() - t0;
    local_sum += dt;
    t.local_s.push_back(dt);
    t.start_wtime.push_back(t0);
  }
  const double mine = iters ? local_sum / iters : 0;
  MPI_Allreduce(&mine, &t.mean_s, 1, MPI_DOUBLE, MPI_MAX, world);
  MPI_Allreduce(&mine, &t.rank_min_s, 1, MPI_DOUBLE, MPI_MIN, world);
  MPI_Allreduce(&mine, &t.rank_max_s, 1, MPI_DOUBLE, MPI_MAX, world);
  return t;
}

}  // namespace sb::micro
