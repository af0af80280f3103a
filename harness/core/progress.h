// Progress display (sb::Progress): redrawn in place on a terminal, plain periodic lines in
// log files and CI. Used for steps within a point (rank 0) and points within a sweep.
#pragma once
#include <cstdio>
#include <memory>

#include "harness/trace/recorder.h"

namespace sb {

// draw=false gives a progress that prints nothing (ranks other than 0). On a non-terminal
// `out`, a line is printed at most every period_s seconds, and at the end.
std::unique_ptr<Progress> make_progress(bool draw, std::FILE* out = stderr,
                                        double period_s = 10.0);

// "1h02m03s" / "4m05s" / "12.3s": compact durations for progress lines.
std::string format_duration(double seconds);

}  // namespace sb
