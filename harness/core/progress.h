// Progress display (sb::Progress): redrawn in place on a terminal, plain periodic lines in
// log files and CI. Used for steps within a point (rank 0) and points within a sweep.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

namespace sb {

// Step progress within a point; rank 0 draws it (in place on a terminal, periodic lines
// otherwise). Workloads call step() once per step; other ranks' calls do nothing.
class Progress {
 public:
  virtual ~Progress() = default;
  virtual void begin(const std::string& what, long total_steps) = 0;
  virtual void step(long done, const std::string& detail) = 0;
  virtual void end() = 0;
};

// draw=false gives a progress that prints nothing (ranks other than 0). On a non-terminal
// `out`, a line is printed at most every period_s seconds, and at the end.
std::unique_ptr<Progress> make_progress(bool draw, std::FILE* out = stderr,
                                        double period_s = 10.0);

// "1h02m03s" / "4m05s" / "12.3s": compact durations for progress lines.
std::string format_duration(double seconds);

}  // namespace sb
