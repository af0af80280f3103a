// Checks that say what failed and where: file:line, and (once MPI is up) rank and host.
// SB_CHECK throws sb::Error; `shardbench run` catches it at the top and calls sb::abort_all()
// (harness/core/mpi_context.h), so a failing rank never leaves the others hanging.
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

[[noreturn]] void fail(const char* file, int line, const std::string& msg);
// SB_CHECK's failure: what() also names the condition; message() is msg alone.
[[noreturn]] void fail_check(const char* file, int line, const char* cond, const std::string& msg);
// The message of the last sb::Error raised through fail() in this process ("" if none): what
// abort_if_unwinding() can still name when the exception itself is out of reach.
std::string last_error();

}  // namespace sb

#define SB_FAIL(...) ::sb::fail(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
#define SB_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) ::sb::fail_check(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)
