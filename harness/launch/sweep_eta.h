// The local sweep's ETA: each pending point's predicted time, from points of the same shape
// that ran in this sweep (their seconds scaled by steps), not the average of finished points
// (a sweep's points differ in size by orders of magnitude). A shape is the point's config
// without the keys that only set its length or identity (steps, warmup, repetition, ...).
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace sb {

class Point;

class SweepEta {
 public:
  void record(const Point& p, double seconds);  // a point that ran to its end
  // Learns from the done results of `points` already in results_dir (their elapsed_s);
  // returns how many it found.
  int learn(const std::vector<const Point*>& points, const std::string& results_dir);
  // Predicted seconds for the points still to run; -1 before any point was measured.
  // Shapes not measured yet get the median seconds per step of those measured.
  double remaining(const std::vector<const Point*>& pending) const;
  double predict(const Point& p) const;  // -1 when nothing was measured

  static std::string shape_of(const Point& p);

 private:
  std::map<std::string, double> sec_per_step_;  // shape -> seconds per step, latest run
};

}  // namespace sb
