// Error construction for SB_CHECK / SB_FAIL.
#include "harness/core/check.h"

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

void fail(const char* file, int line, const std::string& msg) {
  const std::string& id = identity();
  if (id.empty()) throw Error(fmt::format("{}:{}: {}", file, line, msg));
  throw Error(fmt::format("[{}] {}:{}: {}", id, file, line, msg));
}
}  // namespace sb
