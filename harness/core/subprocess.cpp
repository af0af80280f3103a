// fork/exec with process groups, timeouts and captured output.
#include "harness/core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "harness/core/check.h"

namespace sb {

std::string ProcessResult::describe() const {
  std::string s = term_signal != 0
                      ? fmt::format("signal {} ({})", term_signal, strsignal(term_signal))
                      : fmt::format("exit code {}", exit_code);
  if (timed_out) s += ", killed after its time limit";
  if (stopped) s += ", stopped on request";
  return s;
}

namespace {

// argv and the environment (ours with opt.env overriding) as exec wants them, built before
// fork(): the child may only make async-signal-safe calls.
struct ExecArgs {
  std::vector<std::string> envs;
  std::vector<char*> argv, env;
  ExecArgs(const std::vector<std::string>& args, const ProcessOptions& opt) {
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      if (opt.env.count(kv.substr(0, kv.find('='))) == 0) envs.push_back(kv);
    }
    for (const auto& [k, v] : opt.env) envs.push_back(k + "=" + v);
    for (auto& e : envs) env.push_back(e.data());
    env.push_back(nullptr);
  }
};

// The child: its own process group, default stop signals, output to the log or the pipe.
[[noreturn]] void exec_child(const ExecArgs& a, int log_fd, const int out_pipe[2],
                             bool capture) {
  setpgid(0, 0);
  // The sweep's own stop handlers must not be inherited as "ignored" or caught.
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  if (log_fd >= 0) {
    dup2(log_fd, 1);
    dup2(log_fd, 2);
  }
  if (capture) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    close(out_pipe[1]);
  }
  execvpe(a.argv[0], a.argv.data(), a.env.data());
  const char msg[] = "shardbench: exec failed\n";
  ssize_t ignored = write(2, msg, sizeof(msg) - 1);
  (void)ignored;
  _exit(127);
}

void drain(int fd, std::string& out) {
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
}

// Waits for the child, reading its stdout when captured; on timeout or should_stop() sends
// the signal to its group, then SIGKILL after the grace. Returns waitpid's status.
int watch_child(pid_t pid, const ProcessOptions& opt, int out_fd, ProcessResult& r) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point kill_at{};
  bool term_sent = false, kill_sent = false;
  int status = 0;
  for (;;) {
    if (out_fd >= 0) drain(out_fd, r.output);
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return status;
    SB_CHECK(w == 0 || errno == EINTR, "waitpid({}): {}", pid, std::strerror(errno));
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (!term_sent) {
      const bool timeout = opt.timeout_s > 0 && elapsed >= opt.timeout_s;
      const bool stop = opt.should_stop && opt.should_stop();
      if (timeout || stop) {
        r.timed_out = timeout;
        r.stopped = !timeout;
        kill(-pid, timeout ? opt.timeout_signal : opt.stop_signal);
        term_sent = true;
        kill_at = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                            timeout ? opt.timeout_grace_s : opt.stop_grace_s));
      }
    } else if (!kill_sent && now >= kill_at) {
      kill(-pid, SIGKILL);
      kill_sent = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opt) {
  SB_CHECK(!argv.empty(), "run_process needs a program to run");
  int out_pipe[2] = {-1, -1};
  if (opt.capture_stdout) SB_CHECK(pipe(out_pipe) == 0, "pipe(): {}", std::strerror(errno));
  int log_fd = -1;
  if (!opt.log_file.empty()) {
    log_fd = open(opt.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    SB_CHECK(log_fd >= 0, "cannot open log file {}: {}", opt.log_file, std::strerror(errno));
  }
  const ExecArgs exec_args(argv, opt);
  const pid_t pid = fork();
  SB_CHECK(pid >= 0, "fork(): {}", std::strerror(errno));
  if (pid == 0) exec_child(exec_args, log_fd, out_pipe, opt.capture_stdout);
  setpgid(pid, pid);  // also from the parent: no race with the first kill(-pid)
  if (log_fd >= 0) close(log_fd);
  ProcessResult r;
  if (opt.capture_stdout) {
    close(out_pipe[1]);
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  }
  const int status = watch_child(pid, opt, opt.capture_stdout ? out_pipe[0] : -1, r);
  if (opt.capture_stdout) {
    drain(out_pipe[0], r.output);
    close(out_pipe[0]);
  }
  // Ranks left behind in the group (launcher died first) must not outlive the point.
  if (kill(-pid, 0) == 0) kill(-pid, SIGKILL);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  SB_CHECK(n > 0, "cannot read /proc/self/exe: {}", std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

std::string tail_lines(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string shell_quote(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("@%+=:,./-_", c))) plain = false;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

}  // namespace sb
