// Leader and followers of sharded serving (sharded.h). A call travels as one int64 message:
// its length, then [op, arguments...].
#include "workloads/serve/sharded.h"

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"
#include "harness/core/mpi_context.h"

namespace sb::serve {
namespace {

enum Op : std::int64_t { kEnd = 0, kStep = 1, kPrefill = 2, kDecode = 3, kMove = 4 };

void broadcast(std::vector<std::int64_t>& msg, MPI_Comm comm) {
  // A follower waits here while rank 0 schedules: named for the stall watchdog.
  sb::heartbeat::Waiting w(sb::heartbeat::issued({"MPI_Bcast", "world", "mpi", "serve call"}));
  std::int64_t n = static_cast<std::int64_t>(msg.size());
  sb::check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm), "MPI_Bcast (serve call length)");
  msg.resize(static_cast<std::size_t>(n));
  sb::check_mpi(MPI_Bcast(msg.data(), static_cast<int>(n), MPI_INT64_T, 0, comm), "MPI_Bcast (serve call)");
}

void append(std::vector<std::int64_t>& msg, const std::vector<std::int64_t>& v) {
  msg.push_back(static_cast<std::int64_t>(v.size()));
  msg.insert(msg.end(), v.begin(), v.end());
}

// Reads a vector appended at msg[at]; advances at.
std::vector<std::int64_t> take(const std::vector<std::int64_t>& msg, std::size_t& at) {
  const auto n = static_cast<std::size_t>(msg.at(at++));
  SB_CHECK(at + n <= msg.size(), "serve: a malformed call from rank 0 ({} values, {} needed)", msg.size(), at + n);
  std::vector<std::int64_t> v(msg.begin() + static_cast<std::ptrdiff_t>(at), msg.begin() + static_cast<std::ptrdiff_t>(at + n));
  at += n;
  return v;
}

}  // namespace

std::vector<std::int64_t> Leader::prefill(std::int64_t first, const std::vector<std::int64_t>& requests) {
  std::vector<std::int64_t> msg = {kPrefill, first};
  append(msg, requests);
  broadcast(msg, comm_);
  return inner_.prefill(first, requests);
}

std::vector<std::int64_t> Leader::decode(const std::vector<std::int64_t>& requests,
                                         const std::vector<std::int64_t>& last,
                                         const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> msg = {kDecode};
  append(msg, requests), append(msg, last), append(msg, lengths);
  broadcast(msg, comm_);
  return inner_.decode(requests, last, lengths);
}

void Leader::move_row(std::int64_t from, std::int64_t to, std::int64_t length) {
  std::vector<std::int64_t> msg = {kMove, from, to, length};
  broadcast(msg, comm_);
  inner_.move_row(from, to, length);
}

void Leader::begin_step(std::int64_t step) {
  std::vector<std::int64_t> msg = {kStep, step};
  broadcast(msg, comm_);
}

void Leader::finish() {
  std::vector<std::int64_t> msg = {kEnd};
  broadcast(msg, comm_);
}

void follow(Executor& ex, MPI_Comm comm, const std::function<void(std::int64_t step)>& on_step) {
  for (;;) {
    std::vector<std::int64_t> msg;
    broadcast(msg, comm);
    SB_CHECK(!msg.empty(), "serve: an empty call from rank 0");
    std::size_t at = 1;
    switch (msg[0]) {
      case kEnd:
        return;
      case kStep:
        if (on_step) on_step(msg.at(1));
        break;
      case kPrefill: {
        const auto first = msg.at(at++);
        ex.prefill(first, take(msg, at));
        break;
      }
      case kDecode: {
        auto requests = take(msg, at), last = take(msg, at), lengths = take(msg, at);
        ex.decode(requests, last, lengths);
        break;
      }
      case kMove:
        ex.move_row(msg.at(1), msg.at(2), msg.at(3));
        break;
      default:
        SB_FAIL("serve: unknown call {} from rank 0", msg[0]);
    }
  }
}

}  // namespace sb::serve
