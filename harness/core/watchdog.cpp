// The stall watchdog's channel and threads (watchdog.h): UDP heartbeats rank to rank, a
// heartbeat thread that sends this rank's every period, a watcher thread that receives the
// peers' and acts on stall_verdict().
#include "harness/core/watchdog.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr std::uint32_t kMagic = 0x53424842;  // "SBHB"
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kDone = 1;  // flags: the rank finished the point

// One heartbeat on the wire. Every rank runs the same binary, so the layout is the same.
struct Wire {
  std::uint32_t magic = kMagic, version = kVersion;
  std::uint64_t job = 0;  // the point's run: datagrams of other runs are ignored
  std::int32_t rank = 0;
  std::uint32_t flags = 0;
  std::int64_t step = -1;
  double progress_age_s = 0, waited_s = 0;
  std::uint8_t waiting = 0;
  char phase[32] = {0};
  char waiting_in[112] = {0};
  char last_issued[112] = {0};
};

template <std::size_t N>
void put(char (&dst)[N], const std::string& s) {
  const std::size_t n = std::min(s.size(), N - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// Where this rank is for ranks on other nodes: the address its host name resolves to, unless
// that is loopback (Debian maps the host name to 127.0.1.1), else the first non-loopback IPv4
// interface's; 0 when there is none (then only ranks of this node hear it).
std::uint32_t own_ipv4() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(name, nullptr, &hints, &res) == 0) {
      std::uint32_t found = 0;
      for (addrinfo* a = res; a && !found; a = a->ai_next) {
        const std::uint32_t ip = reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
        if ((ntohl(ip) >> 24) != 127) found = ip;
      }
      freeaddrinfo(res);
      if (found) return found;
    }
  }
  ifaddrs* ifs = nullptr;
  std::uint32_t found = 0;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i && !found; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
          !(i->ifa_flags & IFF_LOOPBACK))
        found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    freeifaddrs(ifs);
  }
  return found;
}

// What each rank tells the others at the start (MPI_Allgather as bytes).
struct Address {
  std::uint32_t ip = 0;    // network order; 0: none beyond this node
  std::uint16_t port = 0;  // 0: the socket could not be opened
  char host[64] = {0};     // short host name: same host = loopback
  char error[96] = {0};
};

std::string ip_text(std::uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = {0};
  in_addr a{};
  a.s_addr = ip;
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

}  // namespace

struct Watchdog::Impl {
  int fd = -1;
  int rank = 0;
  std::uint64_t job = 0;
  double configured = 0;
  std::vector<Address> addrs;
  std::vector<sockaddr_in> to;  // per peer (unused for this rank)
  std::vector<PeerView> views;  // index = rank
  std::vector<Clock::time_point> heard_at;
  std::vector<bool> warned;
  Clock::time_point started = Clock::now();

  std::mutex m;
  std::condition_variable cv;
  bool quit = false;
  std::thread beater, watcher;

  double timeout() const { return stall_timeout_s(configured, heartbeat::median_step_s()); }
  // A tenth of the timeout, between 50 ms and 1 s: a stall is seen within ~10% of it.
  double period() const { return std::clamp(timeout() / 10.0, 0.05, 1.0); }

  void open(MPI_Comm world);
  Wire own(std::uint32_t flags) const;
  void send_all(const Wire& w);
  void beat_loop();
  void watch_loop();
  void receive(double wait_s);
  void judge(Clock::time_point& verdict_since);
  void warn_unheard();
  bool sleep(double s);  // false when asked to quit
};

void Watchdog::Impl::open(MPI_Comm world) {
  int size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  if (rank == 0) job = std::random_device{}() ^ static_cast<std::uint64_t>(
                                                    Clock::now().time_since_epoch().count());
  check_mpi(MPI_Bcast(&job, 1, MPI_UINT64_T, 0, world), "MPI_Bcast (watchdog run id)");
  Address mine;
  put(mine.host, host_name());
  fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof any;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) != 0)
    put(mine.error, std::strerror(errno));
  else
    mine.port = ntohs(any.sin_port), mine.ip = own_ipv4();
  addrs.resize(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, addrs.data(), sizeof mine, MPI_BYTE,
                          world),
            "MPI_Allgather (watchdog addresses)");
  for (int r = 0; r < size; ++r)
    SB_CHECK(addrs[r].port != 0, "stall watchdog: rank {} on {} could not open its UDP "
             "heartbeat socket ({}); set stall_timeout = 0 to run without the watchdog",
             r, addrs[r].host, addrs[r].error);
  to.resize(addrs.size());
  views.resize(addrs.size());
  heard_at.assign(addrs.size(), Clock::now());
  warned.assign(addrs.size(), false);
  for (int r = 0; r < size; ++r) {
    sockaddr_in& a = to[r];
    a.sin_family = AF_INET;
    a.sin_port = htons(addrs[r].port);
    const bool local = std::strcmp(addrs[r].host, mine.host) == 0;
    a.sin_addr.s_addr = local ? htonl(INADDR_LOOPBACK) : addrs[r].ip;
    views[r].rank = r;
    views[r].host = addrs[r].host;
  }
  views[rank].heard = true;
}

Wire Watchdog::Impl::own(std::uint32_t flags) const {
  const heartbeat::Snapshot s = heartbeat::snapshot();
  Wire w;
  w.job = job;
  w.rank = rank;
  w.flags = flags;
  w.step = s.step;
  w.progress_age_s = s.progress_age_s;
  w.waiting = s.waiting;
  w.waited_s = s.waited_s;
  put(w.phase, s.phase);
  put(w.waiting_in, s.waiting ? s.waiting_in.describe() : "");
  put(w.last_issued, s.issued ? s.last_issued.describe() : "");
  return w;
}

// Never blocks: a datagram to a stopped peer waits in its socket's buffer or is dropped.
void Watchdog::Impl::send_all(const Wire& w) {
  for (std::size_t r = 0; r < to.size(); ++r)
    if (static_cast<int>(r) != rank && to[r].sin_addr.s_addr != 0)
      ::sendto(fd, &w, sizeof w, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to[r]),
               sizeof to[r]);
}

bool Watchdog::Impl::sleep(double s) {
  std::unique_lock<std::mutex> lk(m);
  return !cv.wait_for(lk, std::chrono::duration<double>(s), [&] { return quit; });
}

// Every period, and sooner when the step or phase changed: a rank that stops right after a
// change is then named with where it stopped, not where it was up to a period earlier. The
// change is looked for every 50 ms, less often with many peers (each look that finds one
// sends a datagram to every peer): with more than 9 ranks, every 50 ms x (ranks - 1) / 8.
void Watchdog::Impl::beat_loop() {
  const double look = 0.05 * std::max(1.0, static_cast<double>(to.size() - 1) / 8.0);
  std::int64_t step = -2;
  std::string phase;
  Clock::time_point sent;
  do {
    const Wire w = own(0);
    if (w.step != step || phase != w.phase || since(sent) >= period()) {
      send_all(w);
      step = w.step, phase = w.phase, sent = Clock::now();
    }
  } while (sleep(std::min(look, period())));
}

void Watchdog::Impl::receive(double wait_s) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(std::ceil(wait_s * 1000))) <= 0) return;
  Wire w;
  for (;;) {
    const ssize_t n = ::recv(fd, &w, sizeof w, MSG_DONTWAIT);
    if (n < 0) return;
    if (n != sizeof w || w.magic != kMagic || w.version != kVersion || w.job != job ||
        w.rank < 0 || w.rank >= static_cast<int>(views.size()) || w.rank == rank)
      continue;  // not ours: another run's, or a stray
    w.phase[sizeof w.phase - 1] = w.waiting_in[sizeof w.waiting_in - 1] =
        w.last_issued[sizeof w.last_issued - 1] = '\0';
    PeerView& v = views[w.rank];
    v.heard = true;
    v.done = v.done || (w.flags & kDone);
    v.step = w.step;
    v.phase = w.phase;
    v.progress_age_s = w.progress_age_s;
    v.waiting = w.waiting != 0;
    v.waiting_in = w.waiting_in;
    v.waited_s = w.waited_s;
    v.last_issued = w.last_issued;
    heard_at[w.rank] = Clock::now();
  }
}

void Watchdog::Impl::warn_unheard() {
  if (since(started) < std::max(10.0, 3 * period())) return;
  for (std::size_t r = 0; r < views.size(); ++r) {
    if (views[r].heard || warned[r]) continue;
    warned[r] = true;
    std::fprintf(stderr, "shardbench: stall watchdog: no heartbeat from rank %zu on %s (%s, UDP "
                 "port %u) since the start: it is not watched for stalls (is UDP between the "
                 "nodes blocked?)\n", r, addrs[r].host, ip_text(to[r].sin_addr.s_addr).c_str(),
                 static_cast<unsigned>(addrs[r].port));
  }
}

// The lowest rank that is not stalled reports at once; the others a few periods later, in
// case it cannot (so that one rank, not every rank, writes the failed result).
void Watchdog::Impl::judge(Clock::time_point& verdict_since) {
  const heartbeat::Snapshot s = heartbeat::snapshot();
  PeerView& me = views[rank];
  me.step = s.step;
  me.phase = s.phase;
  me.progress_age_s = s.progress_age_s;
  me.waiting = s.waiting;
  me.waiting_in = s.waiting ? s.waiting_in.describe() : "";
  me.waited_s = s.waited_s;
  me.last_issued = s.issued ? s.last_issued.describe() : "";
  for (std::size_t r = 0; r < views.size(); ++r)
    if (static_cast<int>(r) != rank) views[r].silent_s = since(heard_at[r]);
  const std::optional<StallVerdict> v = stall_verdict(views, timeout());
  if (!v) {
    verdict_since = Clock::time_point();
    return;
  }
  if (verdict_since == Clock::time_point()) verdict_since = Clock::now();
  int reporter = -1;
  for (const PeerView& p : views)
    if (p.heard && !p.done && !std::binary_search(v->stalled.begin(), v->stalled.end(), p.rank)) {
      reporter = p.rank;
      break;
    }
  if (reporter == rank || reporter < 0 || since(verdict_since) > std::max(2.0, 3 * period()))
    abort_all(fmt::format("[{}] stall watchdog: {}", rank_identity(), v->message));
}

void Watchdog::Impl::watch_loop() {
  Clock::time_point verdict_since;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(m);
      if (quit) return;
    }
    const Clock::time_point next = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(period()));
    while (Clock::now() < next) receive(std::chrono::duration<double>(next - Clock::now()).count());
    warn_unheard();
    judge(verdict_since);
  }
}

Watchdog::Watchdog(MPI_Comm world, double configured_timeout_s)
    : impl_(std::make_unique<Impl>()) {
  impl_->configured = configured_timeout_s;
  impl_->open(world);
  impl_->beater = std::thread([this] { impl_->beat_loop(); });
  impl_->watcher = std::thread([this] { impl_->watch_loop(); });
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  if (!impl_ || impl_->fd < 0) return;
  {
    std::lock_guard<std::mutex> lk(impl_->m);
    impl_->quit = true;
  }
  impl_->cv.notify_all();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  if (impl_->beater.joinable()) impl_->beater.join();
  // Three times: a datagram may be lost, and a peer that misses every one would take this
  // rank's silence for a stall while it finishes.
  const Wire done = impl_->own(kDone);
  for (int i = 0; i < 3; ++i) impl_->send_all(done);
  ::close(impl_->fd);
  impl_->fd = -1;
}

std::unique_ptr<Watchdog> make_watchdog(MPI_Comm world, double configured_timeout_s) {
  if (configured_timeout_s == 0) return nullptr;
  return std::make_unique<Watchdog>(world, configured_timeout_s);
}

}  // namespace sb
