// RESULTS/sweep.lock (results_lock.h). Created with O_EXCL so that of two sweeps starting at
// once exactly one wins; the content is one JSON line {pid, host, since}.
#include "harness/launch/results_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/trace/result.h"

namespace sb {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether the holder named in `text` is gone: same host and no such pid. Another host's
// holder cannot be checked from here and is never taken over.
bool holder_is_dead(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("pid") || !j.contains("host")) return true;  // torn write
  if (j["host"].get<std::string>() != host_name()) return false;
  const int pid = j["pid"].get<int>();
  return pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace

ResultsLock::ResultsLock(const std::string& results_dir, std::FILE* log)
    : path_(results_dir + "/sweep.lock") {
  std::filesystem::create_directories(results_dir);
  mine_ = nlohmann::json{{"pid", getpid()}, {"host", host_name()}, {"since", iso_time_now()}}
              .dump() + "\n";
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      const bool ok = ::write(fd, mine_.data(), mine_.size()) == ssize_t(mine_.size());
      ::close(fd);
      SB_CHECK(ok, "cannot write the lock file {}: {}", path_, std::strerror(errno));
      return;
    }
    SB_CHECK(errno == EEXIST, "cannot create the lock file {}: {}", path_, std::strerror(errno));
    const std::string text = read_all(path_);
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (!holder_is_dead(j)) {
      SB_USER_FAIL("results folder {} is in use by another sweep (pid {}, host {}, since {}; lock "
                   "file {}). Wait for it to finish, stop it, or give this sweep its own --results "
                   "folder; if that sweep is gone (another host), remove the lock file.",
                   results_dir, j.value("pid", 0), j.value("host", std::string("?")),
                   j.value("since", std::string("?")), path_);
    }
    std::fprintf(log, "shardbench sweep: taking over the stale lock %s (%s): its sweep is gone\n",
                 path_.c_str(), text.empty() ? "empty" : j.dump().c_str());
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  SB_FAIL("could not take the lock {} after removing a stale one three times (another sweep is "
          "starting on {} at the same moment?)", path_, results_dir);
}

ResultsLock::~ResultsLock() {
  if (read_all(path_) == mine_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

}  // namespace sb
