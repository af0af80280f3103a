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
  // The caller's own estimate of the time left (seconds; < 0: none): shown instead of the
  // average-rate extrapolation, which is wrong when the remaining items differ in size.
  virtual void set_eta(double /*seconds*/) {}
};

// draw=false gives a progress that prints nothing (ranks other than 0). On a non-terminal
// `out`, a line is printed at most every period_s seconds, and at the end.
std::unique_ptr<Progress> make_progress(bool draw, std::FILE* out = stderr,
                                        double period_s = 10.0);

// `inner`, plus the state written to `path` as JSON ({what, done, total, elapsed_s, eta_s,
// updated}) at most every period_s and at the end, through a temporary file and rename, so
// `shardbench status` can show a running point's step and ETA.
std::unique_ptr<Progress> with_status_file(std::unique_ptr<Progress> inner,
                                           const std::string& path, double period_s = 2.0);

// "1h02m03s" / "4m05s" / "12.3s": compact durations for progress lines.
std::string format_duration(double seconds);

}  // namespace sb
