// Per-size records of the micro task (micro_records.h).
#include "workloads/micro/micro_records.h"

#include "harness/trace/recorder.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/collective_case.h"

namespace sb::micro {
namespace {

void record_common(Recorder& rec, const SizeFigures& f) {
  StepRecord r;
  r.step = f.step;
  r.wall_s = f.mean_s;
  rec.step(r);
  rec.series("size_bytes", static_cast<double>(f.size_bytes));
  rec.series("wire_bytes", static_cast<double>(f.wire_bytes));
  rec.series("mean_s", f.mean_s);
  rec.series("rank_min_s", f.rank_min_s);
  rec.series("rank_max_s", f.rank_max_s);
}

}  // namespace

std::vector<std::int64_t> swept_sizes(const MicroConfig& mc) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = mc.min_bytes; b <= mc.max_bytes; b *= mc.factor) sizes.push_back(b);
  return sizes;
}

int timed_iterations(const MicroConfig& mc, std::int64_t bytes) {
  return mc.iters > 0 ? static_cast<int>(mc.iters) : default_iterations(bytes);
}

void record_collective_size(Recorder& rec, const SizeFigures& f, const std::string& op, int ranks) {
  record_common(rec, f);
  const double algbw = static_cast<double>(f.size_bytes) / f.mean_s / 1e9;
  rec.series("algbw_GBps", algbw);
  rec.series("busbw_GBps", algbw * comm::bus_factor(op, ranks));
  rec.series("wrong", static_cast<double>(f.wrong));
}

void record_p2p_size(Recorder& rec, const SizeFigures& f, P2PBench bench, int window) {
  record_common(rec, f);
  rec.series("message_us", p2p_per_message_s(bench, window, f.mean_s) * 1e6);
  rec.series("bandwidth_MBps", p2p_bandwidth(bench, f.size_bytes, window, f.mean_s) / 1e6);
  rec.series("wrong", static_cast<double>(f.wrong));
}

}  // namespace sb::micro
