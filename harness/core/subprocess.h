// Child processes from an argv vector (never a shell string), in their own process group so
// that a launcher and every rank it started can be signalled together.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct ProcessResult {
  int exit_code = -1;     // when exited normally
  int term_signal = 0;    // when killed by a signal
  bool timed_out = false; // killed by us after timeout_s
  bool stopped = false;   // killed by us because should_stop() said so
  std::string output;     // captured stdout (capture_stdout only)
  bool ok() const { return term_signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exit code 3" / "signal 9 (Killed)" (+ why we killed it)
};

struct ProcessOptions {
  std::string log_file;         // stdout+stderr appended here ("" = inherit)
  bool capture_stdout = false;  // read stdout into ProcessResult::output instead
  // After timeout_s (0 = none): timeout_signal to the group, then SIGKILL after timeout_grace_s.
  double timeout_s = 0;
  int timeout_signal = 15;  // SIGTERM
  double timeout_grace_s = 5;
  // Polled; when true: stop_signal to the group, then SIGKILL after stop_grace_s.
  std::function<bool()> should_stop;
  int stop_signal = 10;  // SIGUSR1: our ranks stop after the current step
  double stop_grace_s = 30;
  std::map<std::string, std::string> env;  // added to the inherited environment
};

// Runs argv[0] (looked up in PATH) and waits. Throws sb::Error when it cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opt);

// Path of the running executable (/proc/self/exe).
std::string self_exe();

// Last n lines of a text file ("" when unreadable).
std::string tail_lines(const std::string& path, int n);

// Quotes a word for a POSIX shell: safe for any bytes (job scripts show argv as text).
std::string shell_quote(const std::string& s);

}  // namespace sb
