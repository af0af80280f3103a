// Error construction for SB_CHECK / SB_FAIL (internal) and SB_REQUIRE / SB_USER_FAIL (user).
#include "harness/core/check.h"

#include <mutex>

namespace sb {
namespace {
std::string& identity() {
  static std::string id;
  return id;
}
}  // namespace

const std::string& rank_identity() { return identity(); }
void set_rank_identity(int rank, const std::string& host) {
  identity() = fmt::format("rank {} on {}", rank, host);
}

namespace {
std::mutex g_last_mu;
std::string g_last;
}  // namespace

namespace {
[[noreturn]] void throw_error(const char* file, int line, const std::string& shown,
                              const std::string& msg) {
  const std::string& id = identity();
  std::string full = id.empty() ? fmt::format("{}:{}: {}", file, line, shown)
                                : fmt::format("[{}] {}:{}: {}", id, file, line, shown);
  {
    std::lock_guard<std::mutex> lk(g_last_mu);
    g_last = full;
  }
  throw Error(full, msg);
}
}  // namespace

void fail(const char* file, int line, const std::string& msg) { throw_error(file, line, msg, msg); }

void fail_user(const char* file, int line, const std::string& msg) {
  const std::string& id = identity();
  std::string full = id.empty() ? msg : fmt::format("[{}] {}", id, msg);
  {
    std::lock_guard<std::mutex> lk(g_last_mu);
    g_last = full;
  }
  throw UserError(full, msg, fmt::format("{}:{}", file, line));
}

void fail_check(const char* file, int line, const char* cond, const std::string& msg) {
  throw_error(file, line, fmt::format("check failed: {}: {}", cond, msg), msg);
}

std::string last_error() {
  std::lock_guard<std::mutex> lk(g_last_mu);
  return g_last;
}
}  // namespace sb
