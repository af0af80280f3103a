// Task "probe": a workload for testing the harness without LibTorch. Each step is a real
// MPI_Allreduce (checked), optionally a sleep; keys make a rank fail, crash, run out of
// memory, produce a NaN loss or ignore the stop flag, so that run/sweep/submit/status can be tested end to end.
// Linked into the test CLI `shardbench_probe` (tests/harness/CMakeLists.txt).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"

namespace sb::probe {
namespace {

class ProbeWorkload final : public Workload {
 public:
  void run(RunContext& ctx) override {
    const Point& p = ctx.point;
    const std::int64_t steps = p.get_int("steps"), warmup = p.get_int("warmup");
    const std::int64_t n = p.get_int("probe.elements");
    const std::int64_t fail_rank = p.get_int("probe.fail_rank");
    const std::int64_t crash_rank = p.get_int("probe.crash_rank");
    const std::int64_t oom_rank = p.get_int("probe.oom_rank");
    const std::int64_t fail_step = p.get_int("probe.fail_step");
    const std::int64_t wait_rank = p.get_int("probe.wait_for_stop_rank");
    const std::int64_t nan_at = p.get_int("probe.nan_at");
    const double sleep_s = p.get_double("probe.sleep_s");
    const bool ignore_stop = p.get_bool("probe.ignore_stop");
    const bool throw_on_stop = p.get_bool("probe.throw_on_stop");
    const double t_start = MPI_Wtime();
    std::vector<double> buf(static_cast<size_t>(n));  // (elements,) float64
    const std::uint64_t bytes = static_cast<std::uint64_t>(n) * sizeof(double);
    // sum over ranks r of (r + 1)
    const double expected = ctx.size * (ctx.size + 1) / 2.0;

    ctx.progress.begin(fmt::format("probe {}", p.name), static_cast<long>(steps));
    for (std::int64_t step = 0; step < steps; ++step) {
      set_phase_step(step);
      set_phase("step");
      const double t0 = MPI_Wtime();
      if (ctx.rank == fail_rank && step == fail_step)
        SB_FAIL("probe.fail_rank: rank {} fails at step {} as the suite asks", ctx.rank, step);
      if (ctx.rank == crash_rank && step == fail_step) std::raise(SIGKILL);  // no result, no message
      if (ctx.rank == oom_rank && step == fail_step) {
        // 1 PiB: more than the address space, so operator new fails (std::bad_alloc) as a
        // real allocation does, overcommit or not. Called as a function: never elided.
        ::operator delete(::operator new(std::size_t{1} << 50));
      }
      if (ctx.rank == wait_rank && step == fail_step) {
        // As a rank whose peer aborted: mpirun's SIGTERM sets the stop flag, then its next
        // MPI call fails. Here it throws once the flag is set, without calling MPI.
        while (!ctx.stop.stop()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        SB_FAIL("probe.wait_for_stop_rank: the peer is gone ({})", ctx.stop.reason);
      }
      std::fill(buf.begin(), buf.end(), ctx.rank + 1.0);
      const double c0 = MPI_Wtime();
      SB_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                             ctx.world) == MPI_SUCCESS, "MPI_Allreduce failed at step {}", step);
      const double c1 = MPI_Wtime();
      for (double v : buf)
        SB_CHECK(v == expected, "allreduce gave {} instead of {} at step {}", v, expected, step);
      if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      const double loss = step == nan_at ? std::numeric_limits<double>::quiet_NaN()
                                         : 1.0 / static_cast<double>(step + 1);
      SB_CHECK(std::isfinite(loss), "non-finite loss {} at step {} (probe.nan_at)", loss, step);

      // The slowest rank's time is the step's time.
      double wall = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, ctx.world);
      ctx.recorder.comm({step, ctx.rank, "all_reduce", "world", "other", "mpi", bytes, bytes,
                         c0 - t_start, c1 - c0});
      if (ctx.rank == 0) {
        StepRecord r;
        r.step = step;
        r.warmup = step < warmup;
        r.wall_s = wall;
        r.comm_exposed_s = c1 - c0;
        r.loss = loss;
        r.samples_per_s = 1.0 / wall;
        ctx.recorder.step(r);
        ctx.recorder.series("probe_loss", loss);
      }
      ctx.progress.step(static_cast<long>(step + 1), fmt::format("loss {:.3f}", loss));
      // Ranks see the stop flag at slightly different moments: all stop after the same step,
      // none is left waiting in the next allreduce (every rank has the same ignore_stop).
      const bool stop = !ignore_stop && ctx.stop_agreed();
      if (stop && throw_on_stop) SB_FAIL("stopped: {}", ctx.stop.reason);
      if (stop) break;
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    RankMemory m;
    m.rank = ctx.rank;
    m.host = host_name();
    m.param_bytes = bytes;
    m.model_state_bytes = bytes;
    m.peak_model_state_bytes = bytes;
    m.peak_rss_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;  // ru_maxrss is KiB
    ctx.recorder.memory(m);
    if (ctx.rank == 0) {
      ctx.recorder.scalar("probe_allreduce_sum", expected);
      ctx.recorder.text("probe", "allreduce checked every step");
    }
  }
};

Registrar reg([] {
  register_task({"probe", [] { return std::make_unique<ProbeWorkload>(); },
                 [](const Point& p) { return 8.0 * static_cast<double>(p.get_int("probe.elements")); },
                 {},
                 {{"probe.elements", "lower it: fewer float64s per allreduce"}}});
  using I = std::int64_t;
  register_key({"probe.elements", KeyType::Int, I{1024}, "", "float64 elements allreduced per step"});
  register_key({"probe.fail_rank", KeyType::Int, I{-1}, "", "rank that throws sb::Error at probe.fail_step (-1: none)"});
  register_key({"probe.oom_rank", KeyType::Int, I{-1}, "",
                "rank whose allocation of 1 PiB fails (std::bad_alloc) at probe.fail_step (-1: none)"});
  register_key({"probe.crash_rank", KeyType::Int, I{-1}, "", "rank that kills itself (SIGKILL) at probe.fail_step (-1: none)"});
  register_key({"probe.wait_for_stop_rank", KeyType::Int, I{-1}, "",
                "rank that at probe.fail_step waits for a stop request, then throws (-1: none)"});
  register_key({"probe.fail_step", KeyType::Int, I{1}, "", "step at which probe.fail_rank / crash_rank act"});
  register_key({"probe.nan_at", KeyType::Int, I{-1}, "", "step whose loss is NaN (-1: none)"});
  register_key({"probe.sleep_s", KeyType::Float, 0.0, "", "seconds each step sleeps after its allreduce"});
  register_key({"probe.ignore_stop", KeyType::Bool, false, "", "keep stepping after a stop request (a hung point)"});
  register_key({"probe.throw_on_stop", KeyType::Bool, false, "", "answer a stop request by throwing sb::Error"});
  // The base keys' default names must be known to validate; this binary has no models.
  register_name("model", "gpt2-tiny", "accepted by the probe binary, unused");
  register_name("strategy", "no_shard", "accepted by the probe binary, unused");
  register_name("compression", "none", "accepted by the probe binary, unused");
  register_name("quantization", "none", "accepted by the probe binary, unused");
  register_name("attention", "naive", "accepted by the probe binary, unused");
  register_name("dtype", "fp32", "accepted by the probe binary, unused");
});

}  // namespace
}  // namespace sb::probe
