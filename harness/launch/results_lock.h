// One sweep per results folder at a time: two sweeps on one folder would run the same
// points side by side (each timing the other's load) and race on the result files.
// RESULTS/sweep.lock holds the holder's pid and host; a lock whose pid is gone on this
// host is stale (a killed sweep) and is taken over with a message.
#pragma once
#include <cstdio>
#include <string>

namespace sb {

class ResultsLock {
 public:
  // Takes the lock or throws sb::Error naming the holder (pid, host, since) and the fix.
  // Messages about a stale lock taken over go to `log`.
  explicit ResultsLock(const std::string& results_dir, std::FILE* log = stderr);
  ~ResultsLock();  // removes the lock file if it is still ours
  ResultsLock(const ResultsLock&) = delete;
  ResultsLock& operator=(const ResultsLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_, mine_;
};

}  // namespace sb
