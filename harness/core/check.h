// Checks that say what failed and where. Two kinds, because two readers:
// - SB_CHECK / SB_FAIL: an internal error (a bug, a broken invariant, the system failing us):
//   the message carries file:line and the C++ condition, for a bug report;
// - SB_REQUIRE / SB_USER_FAIL: the user's input is at fault (a suite value, a file it names, a
//   budget too small): the message is what, where (the suite's file:line and key; see
//   key_at() in harness/spec/point.h) and the fix, without our source location, which is
//   kept in origin() for the rank log.
// Both throw (sb::Error, sb::UserError); `shardbench run` catches them at the top and calls
// sb::abort_all() (harness/core/mpi_context.h), so a failing rank never leaves the others
// hanging. Once MPI is up, every message names the rank and host.
#pragma once
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace sb {

// An error with its origin. what() is the full, user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& full, std::string message = "")
      : std::runtime_error(full), message_(message.empty() ? full : std::move(message)) {}
  // The message without its origin (file:line, rank), for a diagnostic that names its own
  // place (a suite's file:line and key).
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// "rank 3 on host-a" once set_rank_identity() ran, else "" (single process tools).
const std::string& rank_identity();
void set_rank_identity(int rank, const std::string& host);

// An error in the user's input. what() is "[rank R on host] message" (the message alone
// before MPI is up); origin() is the source location that raised it ("file:line"), for the
// log of a bug report, never shown as the error itself.
class UserError : public Error {
 public:
  UserError(const std::string& full, std::string message, std::string origin)
      : Error(full, std::move(message)), origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

[[noreturn]] void fail(const char* file, int line, const std::string& msg);
// SB_REQUIRE's and SB_USER_FAIL's failure: throws UserError.
[[noreturn]] void fail_user(const char* file, int line, const std::string& msg);
// SB_CHECK's failure: what() also names the condition; message() is msg alone.
[[noreturn]] void fail_check(const char* file, int line, const char* cond, const std::string& msg);
// The message of the last sb::Error raised through fail() in this process ("" if none): what
// abort_if_unwinding() can still name when the exception itself is out of reach.
std::string last_error();

}  // namespace sb

#define SB_FAIL(...) ::sb::fail(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
// The user's input is at fault: the message says what, where and how to fix it.
#define SB_USER_FAIL(...) ::sb::fail_user(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
#define SB_REQUIRE(cond, ...)                                                         \
  do {                                                                                \
    if (!(cond)) ::sb::fail_user(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__));     \
  } while (0)
#define SB_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) ::sb::fail_check(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)
