// The "micro" task: a collective swept over message sizes, so communication benchmarks run
// from suites and land in HDF5 like every other point (docs/METRICS.md, "Collectives").
// Records one CommEvent per timed call per rank, one StepRecord per size (the slowest
// rank's mean call time) and the per-size series the analysis fits its alpha-beta model to.
#include <sys/resource.h>

#include <memory>
#include <vector>

#include "harness/core/check.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/collective_case.h"
#include "workloads/models/cpu_allocator.h"

namespace sb::micro {
namespace {

class MicroWorkload : public Workload {
 public:
  void run(RunContext& ctx) override {
    const Point& p = ctx.point;
    CaseConfig base;
    base.op = op_from_name(p.get_string("micro.op"));
    base.impl = p.get_string("micro.impl");
    base.block = p.get_int("micro.block");
    base.ratio = p.get_double("micro.ratio");
    const std::int64_t lo = p.get_int("micro.min_bytes"), hi = p.get_int("micro.max_bytes");
    const std::int64_t factor = p.get_int("micro.factor");
    const int warmup = static_cast<int>(p.get_int("micro.warmup"));
    const bool async = base.impl == "ours-async";
    // A member, not a local: see `comm_` below.
    comm_ = std::make_unique<comm::Communicator>(ctx.world, ctx.size, async, comm::backend_choice(p));
    comm::Communicator& comm = *comm_;
    const double origin = MPI_Wtime();

    std::vector<std::int64_t> sizes;
    for (std::int64_t b = lo; b <= hi; b *= factor) sizes.push_back(b);
    ctx.progress.begin(fmt::format("{} {} sizes", op_name(base.op), base.impl),
                       static_cast<long>(sizes.size()));
    std::int64_t total_wrong = 0, first_wrong_size = -1;
    // Agree before each size, so no rank leaves while another waits in a collective.
    for (std::size_t s = 0; s < sizes.size() && !ctx.stop_agreed(); ++s) {
      CaseConfig cfg = base;
      cfg.bytes = sizes[s];
      CollectiveCase cc(cfg, ctx.world, &comm);
      const int iters = p.get_int("micro.iters") > 0 ? static_cast<int>(p.get_int("micro.iters"))
                                                      : default_iterations(cfg.bytes);
      const Timing t = time_case(cc, warmup, iters, ctx.world);
      const std::int64_t wrong = cc.check();  // after the timed loop
      if (wrong && first_wrong_size < 0) first_wrong_size = cc.size_bytes();
      total_wrong += wrong;
      for (int i = 0; i < iters; ++i) {
        CommEvent e;
        e.step = static_cast<std::int64_t>(s);
        e.rank = ctx.rank;
        e.op = op_name(base.op);
        e.group = "world";
        e.kind = "micro";
        e.logical_bytes = cc.logical_bytes();  // the uncompressed fp32 baseline
        e.wire_bytes = static_cast<std::uint64_t>(cc.wire_bytes());
        e.start_s = t.start_wtime[i] - origin;
        e.duration_s = t.local_call_s[i];
        ctx.recorder.comm(e);
      }
      StepRecord r;
      r.step = static_cast<std::int64_t>(s);
      r.wall_s = t.mean_s;
      ctx.recorder.step(r);
      const double algbw = cc.size_bytes() / t.mean_s / 1e9;
      ctx.recorder.series("size_bytes", static_cast<double>(cc.size_bytes()));
      ctx.recorder.series("wire_bytes", static_cast<double>(cc.wire_bytes()));
      ctx.recorder.series("mean_s", t.mean_s);
      ctx.recorder.series("rank_min_s", t.rank_min_s);
      ctx.recorder.series("rank_max_s", t.rank_max_s);
      ctx.recorder.series("algbw_GBps", algbw);
      ctx.recorder.series("busbw_GBps", algbw * comm::bus_factor(op_name(base.op), ctx.size));
      ctx.recorder.series("wrong", static_cast<double>(wrong));
      ctx.progress.step(static_cast<long>(s + 1),
                        fmt::format("{} B: {:.1f} us", cc.size_bytes(), t.mean_s * 1e6));
    }
    ctx.progress.end();
    ctx.recorder.memory(rank_memory_now(ctx.rank));
    ctx.recorder.text("cpu_allocator", models::cpu_allocator_name());
    ctx.recorder.scalar("wrong", static_cast<double>(total_wrong));
    if (total_wrong)
      SB_FAIL("{} {}: {} result elements differ from the expected values (first at {} bytes); "
              "the collective is broken", op_name(base.op), base.impl, total_wrong,
              first_wrong_size);
  }
 private:
  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before it is destroyed (its destructor waits on peers).
  std::unique_ptr<comm::Communicator> comm_;
};

const Registrar reg([] {
  for (const auto& op : op_names()) register_name("collective", op, "collective operation");
  // The compressors register themselves in "comm_impl" (workloads/comm/compressor.cpp).
  for (const auto& [name, doc] : plain_impls()) register_name("comm_impl", name, doc);
  register_key({"micro.op", KeyType::Name, std::string("all_reduce"), "collective",
                "micro task: the collective to sweep"});
  register_key({"micro.impl", KeyType::Name, std::string("mpi"), "comm_impl",
                "micro task: implementation (mpi, ours, ours-async, or a compressor)"});
  register_key({"micro.min_bytes", KeyType::Int, std::int64_t{4}, "", "micro task: smallest size"});
  register_key({"micro.max_bytes", KeyType::Int, std::int64_t{1} << 20, "",
                "micro task: largest size (at most 64 MiB is sensible here)"});
  register_key({"micro.factor", KeyType::Int, std::int64_t{4}, "", "micro task: size step factor"});
  register_key({"micro.iters", KeyType::Int, std::int64_t{0}, "",
                "micro task: timed calls per size (0: by size, 200 small .. 5 large)"});
  register_key({"micro.warmup", KeyType::Int, std::int64_t{2}, "",
                "micro task: untimed calls per size before the timed ones"});
  register_key({"micro.block", KeyType::Int, std::int64_t{256}, "", "micro task: int8 block"});
  register_key({"micro.ratio", KeyType::Float, 0.01, "", "micro task: topk ratio"});
  register_validator([](const Point& p, std::vector<Diagnostic>& out) {
    if (!p.has("task") || p.get_string("task") != "micro") return;
    const auto lo = p.get_int("micro.min_bytes"), hi = p.get_int("micro.max_bytes");
    if (lo < 1 || hi < lo)
      out.push_back({"micro.max_bytes", fmt::format("need 1 <= micro.min_bytes ({}) <= "
                                                    "micro.max_bytes ({})", lo, hi)});
    if (p.get_int("micro.factor") < 2)
      out.push_back({"micro.factor", "micro.factor must be at least 2"});
    const auto& impl = p.get_string("micro.impl");
    const auto& op = p.get_string("micro.op");
    if (is_compressed(impl) && (op == "broadcast" || op == "all_to_all"))
      out.push_back({"micro.impl", fmt::format("compressed collectives exist for all_gather, "
                                               "reduce_scatter and all_reduce, not {}", op)});
  });
  register_task({"micro", [] { return std::make_unique<MicroWorkload>(); },
                 [](const Point&) { return 0.0; }});
});

}  // namespace
}  // namespace sb::micro
