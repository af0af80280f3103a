#include "harness/core/rank_log.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace sb {
namespace {

// Starts `tee -a path` reading a new pipe and writing to what `fd` is now, then points `fd`
// at the pipe. posix_spawn, not fork: no copy of an MPI process's address space.
bool tee_fd(int fd, const std::string& path) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
  std::string tee = "tee", a = "-a";
  std::string file = path;
  char* argv[] = {tee.data(), a.data(), file.data(), nullptr};
  // The launcher signals the whole process group (mpirun forwards SIGUSR1 and SIGTERM to the
  // ranks to stop them): tee must not die of them, or the rank's next write breaks its pipe.
  // Blocked, they stay pending; tee ends when the rank's side of the pipe closes.
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&mask, sig);
  posix_spawnattr_setsigmask(&at, &mask);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "tee", &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  close(p[0]);
  if (rc != 0) {
    close(p[1]);
    errno = rc;
    return false;
  }
  const bool ok = dup2(p[1], fd) >= 0;
  close(p[1]);
  return ok;
}

}  // namespace

void tee_output_to(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::fflush(stdout);
  std::fflush(stderr);
  if (!tee_fd(STDOUT_FILENO, path) || !tee_fd(STDERR_FILENO, path))
    std::fprintf(stderr, "shardbench: warning: no per-rank log %s: %s\n", path.c_str(),
                 std::strerror(errno));
}

}  // namespace sb
