// The "micro" task: a collective swept over message sizes, so communication benchmarks run
// from suites and land in HDF5 like every other point (docs/METRICS.md, "Collectives").
// Records one CommEvent per timed call per rank, one StepRecord per size (the slowest
// rank's mean call time) and the per-size series the analysis fits its alpha-beta model to.
#include <sys/resource.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "harness/trace/result.h"
#include "harness/trace/recorder.h"
#include "harness/spec/base_config.h"
#include "harness/spec/mesh_config.h"
#include "harness/workload.h"
#include "workloads/comm/comm_config.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/backend_tuning.h"
#include "workloads/micro/collective_case.h"
#include "workloads/micro/micro_config.h"
#include "workloads/micro/micro_records.h"
#include "workloads/micro/p2p_case.h"
#include "workloads/micro/python_twin.h"
#include "workloads/models/cpu_allocator.h"

namespace sb::micro {
namespace {

class MicroWorkload : public Workload {
 public:
  void run(RunContext& ctx) override {
    const Point& p = ctx.point;
    const MicroConfig& mc = config<MicroConfig>(p);
    SB_CHECK(!is_python(mc.impl), "micro.impl = \"{}\" runs as a Python program that `shardbench run` "
             "starts in this rank's place (workloads/micro/omb_py.py with .venv/bin/python and "
             "mpi4py), and it did not start: run jobscripts/install-deps.sh, which links Debian's "
             "mpi4py into .venv", mc.impl);
    if (is_p2p(mc.op)) return point_to_point(ctx, mc);
    CaseConfig base;
    base.op = op_from_name(mc.op);
    base.impl = mc.impl;
    base.block = mc.block;
    base.ratio = mc.ratio;
    const std::int64_t lo = mc.min_bytes, hi = mc.max_bytes;
    const std::int64_t factor = mc.factor;
    const int warmup = static_cast<int>(mc.warmup);
    if (base.impl == "tune") return tune(ctx, lo, hi, factor);
    const bool async = base.impl == "ours-async";
    // A member, not a local: see `comm_` below.
    comm_ = std::make_unique<comm::Communicator>(ctx.world, ctx.size, async, comm::backend_choice(p));
    comm::Communicator& comm = *comm_;
    const double origin = MPI_Wtime();

    const std::vector<std::int64_t> sizes = swept_sizes(mc);
    ctx.progress.begin(fmt::format("{} {} sizes", op_name(base.op), base.impl),
                       static_cast<long>(sizes.size()));
    std::int64_t total_wrong = 0, first_wrong_size = -1;
    // Agree before each size, so no rank leaves while another waits in a collective.
    for (std::size_t s = 0; s < sizes.size() && !ctx.stop_agreed(); ++s) {
      CaseConfig cfg = base;
      cfg.bytes = sizes[s];
      CollectiveCase cc(cfg, ctx.world, &comm);
      const int iters = timed_iterations(mc, cfg.bytes);
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
      record_collective_size(ctx.recorder,
                             {static_cast<std::int64_t>(s), cc.size_bytes(), cc.wire_bytes(), t.mean_s,
                              t.rank_min_s, t.rank_max_s, wrong},
                             op_name(base.op), ctx.size);
      ctx.progress.step(static_cast<long>(s + 1),
                        fmt::format("{} B: {:.1f} us", cc.size_bytes(), t.mean_s * 1e6));
    }
    ctx.progress.end();
    ctx.recorder.memory(rank_memory_now(ctx.rank, config<MeshConfig>(ctx.point).mesh()));
    ctx.recorder.text("cpu_allocator", models::cpu_allocator_name());
    ctx.recorder.scalar("wrong", static_cast<double>(total_wrong));
    if (total_wrong)
      SB_FAIL("{} {}: {} result elements differ from the expected values (first at {} bytes); "
              "the collective is broken", op_name(base.op), base.impl, total_wrong,
              first_wrong_size);
  }
 private:
  // micro.op = p2p_*: the pair benchmarks (p2p_case.h) over the sizes. Per timed iteration
  // and rank one CommEvent (op = the benchmark, duration = one message's time: the one-way
  // latency or the window's time per message, wire_bytes = the message), so the alpha-beta
  // fit of the report gets point-to-point parameters of its own; per size the OSU figures.
  void point_to_point(RunContext& ctx, const MicroConfig& mc) {
    P2PConfig base;
    base.bench = p2p_from_name(mc.op);
    base.impl = mc.impl;
    base.window = static_cast<int>(mc.window);
    comm_ = std::make_unique<comm::Communicator>(ctx.world, ctx.size, base.impl == "ours-async",
                                                 comm::backend_choice(ctx.point));
    const double origin = MPI_Wtime();
    const std::vector<std::int64_t> sizes = swept_sizes(mc);
    ctx.progress.begin(fmt::format("{} {} sizes", mc.op, base.impl), static_cast<long>(sizes.size()));
    std::int64_t total_wrong = 0, first_wrong_size = -1;
    for (std::size_t s = 0; s < sizes.size() && !ctx.stop_agreed(); ++s) {
      P2PConfig cfg = base;
      cfg.bytes = sizes[s];
      P2PCase pc(cfg, ctx.world, comm_.get());
      const int iters = timed_iterations(mc, cfg.bytes);
      const P2PTiming t = time_p2p(pc, static_cast<int>(mc.warmup), iters, ctx.world);
      const std::int64_t wrong = pc.check();
      std::int64_t all_wrong = wrong;
      MPI_Allreduce(MPI_IN_PLACE, &all_wrong, 1, MPI_INT64_T, MPI_SUM, ctx.world);
      if (all_wrong && first_wrong_size < 0) first_wrong_size = cfg.bytes;
      total_wrong += all_wrong;
      for (int i = 0; i < iters; ++i) {
        CommEvent e;
        e.step = static_cast<std::int64_t>(s);
        e.rank = ctx.rank;
        e.op = mc.op;
        e.group = "world";
        e.kind = "micro";
        e.backend = base.impl == "mpi" ? "mpi" : comm_->backend_name();
        e.logical_bytes = e.wire_bytes = static_cast<std::uint64_t>(cfg.bytes);
        e.start_s = t.start_wtime[i] - origin;
        e.duration_s = pc.per_message_s(t.local_s[i]);
        e.peer = pc.peer();
        ctx.recorder.comm(e);
      }
      record_p2p_size(ctx.recorder,
                      {static_cast<std::int64_t>(s), cfg.bytes, cfg.bytes, t.mean_s, t.rank_min_s,
                       t.rank_max_s, all_wrong},
                      base.bench, base.window);
      ctx.progress.step(static_cast<long>(s + 1),
                        fmt::format("{} B: {:.2f} us per message", cfg.bytes,
                                    pc.per_message_s(t.mean_s) * 1e6));
    }
    ctx.progress.end();
    ctx.recorder.memory(rank_memory_now(ctx.rank, config<MeshConfig>(ctx.point).mesh()));
    ctx.recorder.scalar("wrong", static_cast<double>(total_wrong));
    SB_CHECK(total_wrong == 0, "{} {}: {} received bytes differ from what the peer sent (first at "
             "{} bytes); the transfer is broken", mc.op, base.impl, total_wrong, first_wrong_size);
  }

  // micro.impl = "tune": every collective x size on every CPU backend, interleaved
  // (backend_tuning.h); writes the tuning table of comm_backend = "auto" to comm_tuning (rank
  // 0, atomically) and records it and the times per backend.
  void tune(RunContext& ctx, std::int64_t lo, std::int64_t hi, std::int64_t factor) {
    // Sizes whose cases round to the same buffer (whole elements per rank) measured once.
    std::vector<std::int64_t> sizes, seen;
    for (std::int64_t b = lo; b <= hi; b *= factor) {
      CaseConfig c;
      c.op = Op::AllGather;  // the rounding of the split collectives (the finest)
      c.bytes = b;
      const std::int64_t actual = CollectiveCase(c, ctx.world, nullptr).size_bytes();
      if (std::find(seen.begin(), seen.end(), actual) != seen.end()) continue;
      seen.push_back(actual);
      sizes.push_back(b);
    }
    std::vector<BackendUnderTest> under;
    for (const auto& b : comm::backends()) {
      if (!b.available || b.name == "nccl") continue;  // host tensors: the CPU backends
      tuned_.push_back(std::make_unique<comm::Communicator>(ctx.world, ctx.size, false,
                                                            comm::BackendChoice{b.name, ""}));
      under.push_back({b.name, tuned_.back().get()});
    }
    std::vector<Op> ops(std::begin(comm::kCollOps), std::end(comm::kCollOps));
    ctx.progress.begin(fmt::format("tune {} backends", under.size()),
                       static_cast<long>(ops.size()));
    BackendMeasurement m;
    for (std::size_t i = 0; i < ops.size() && !ctx.stop_agreed(); ++i) {
      auto one = measure_backends(under, {ops[i]}, sizes, ctx.world);
      m.wrong += one.wrong;
      for (auto& r : one.rows) m.rows.push_back(std::move(r));
      ctx.progress.step(static_cast<long>(i + 1), op_name(ops[i]));
    }
    ctx.progress.end();
    const bool complete = m.rows.size() == ops.size() * sizes.size();
    SB_CHECK(m.wrong == 0, "tune: {} result elements differ from the expected values; a backend "
             "is broken", m.wrong);
    comm::BackendTable t = comm::make_table(m.rows);
    t.world = ctx.size;
    t.hosts = comm::host_set(ctx.world);
    t.cpu = sb::machine_now(sb::host_name()).cpu_model;
    t.source = fmt::format("micro point {} ({})", ctx.point.index, ctx.point.id);
    t.git_commit = sb::build_git_commit();
    t.created = sb::iso_time_now();
    std::int64_t step = 0;
    for (const auto& e : t.entries) {
      StepRecord r;
      r.step = step++;
      r.wall_s = e.seconds.at(e.backend);  // the chosen (fastest) backend's mean call
      ctx.recorder.step(r);
      ctx.recorder.series("tune.size_bytes", static_cast<double>(e.bytes));
      ctx.recorder.series("tune.op_index", static_cast<double>(static_cast<int>(e.op)));
      for (const auto& [name, s] : e.seconds) ctx.recorder.series("tune." + name + "_s", s);
    }
    const std::string path = config<comm::BackendKeys>(ctx.point).comm_tuning;
    if (!complete) {  // stopped early: a table without some collective would fail later
      ctx.recorder.text("backend_table", "not written: the point stopped before measuring "
                                         "every collective");
      return;
    }
    if (ctx.rank == 0) comm::write_table(t, path);
    ctx.recorder.text("backend_table", comm::table_text(t));
    ctx.recorder.text("backend_table_path", path);
    ctx.recorder.memory(rank_memory_now(ctx.rank, config<MeshConfig>(ctx.point).mesh()));
  }

  std::vector<std::unique_ptr<comm::Communicator>> tuned_;
  // Owned by the workload, not by run()'s frame: when run() throws, `shardbench run` aborts
  // every rank before it is destroyed (its destructor waits on peers).
  std::unique_ptr<comm::Communicator> comm_;
};

const Registrar reg([] {
  for (const auto& op : op_names()) register_name("micro_op", op, "collective operation");
  for (const auto& [name, doc] : p2p_benches()) register_name("micro_op", name, doc);
  // The compressors register themselves in "comm_impl" (workloads/comm/compressor.cpp).
  for (const auto& [name, doc] : plain_impls()) register_name("comm_impl", name, doc);
  register_name("comm_impl", "tune",
                "every collective on every CPU backend, interleaved: writes the tuning table of "
                "comm_backend = \"auto\" to comm_tuning (micro.op is not used)");
  for (const auto& [name, doc] : python_impls()) register_name("comm_impl", name, doc);
  TaskInfo t{"micro", [] { return std::make_unique<MicroWorkload>(); }, [](const Point&) { return 0.0; }};
  t.exec = python_twin_argv;  // micro.impl = mpi4py-*: the ranks are omb_py.py (python_twin.h)
  t.record_measured = record_python_twin;
  register_task(std::move(t));
});

// The sizes and the op a compressed implementation can run. micro.* keys are read by every
// task (their tasks are "all" in `shardbench keys`), but only the micro task runs them.
void validate(const MicroConfig& c, const Point& p, std::vector<Diagnostic>& out) {
  if (base_config(p).task != "micro") return;
  const auto lo = c.min_bytes, hi = c.max_bytes;
  if (lo < 1 || hi < lo)
    out.push_back({"micro.max_bytes", fmt::format("need 1 <= micro.min_bytes ({}) <= "
                                                  "micro.max_bytes ({})", lo, hi)});
  if (c.factor < 2)
    out.push_back({"micro.factor", "micro.factor must be at least 2"});
  if (is_p2p(c.op)) {
    if (c.impl != "mpi" && c.impl != "ours" && c.impl != "ours-async" && !is_python(c.impl))
      out.push_back({"micro.impl", fmt::format("{} runs mpi, ours, ours-async or a Python twin "
                                               "(mpi4py-numpy, mpi4py-torch), not \"{}\" "
                                               "(point-to-point messages are not compressed)",
                                               c.op, c.impl)});
    const int ranks = base_config(p).world;
    if (ranks % 2 != 0)
      out.push_back({"world", fmt::format("{} pairs ranks (2i, 2i + 1): run an even number of "
                                          "ranks, not {}", c.op, ranks)});
    if (c.window < 1) out.push_back({"micro.window", "micro.window must be at least 1"});
  }
  if (is_compressed(c.impl) && (c.op == "broadcast" || c.op == "all_to_all"))
    out.push_back({"micro.impl", fmt::format("compressed collectives exist for all_gather, "
                                             "reduce_scatter and all_reduce, not {}", c.op)});
}

}  // namespace

void MicroConfig::declare(Fields<MicroConfig>& f) {
  using I = std::int64_t;
  f.name("micro.op", &MicroConfig::op, "micro_op", "all_reduce",
         "micro task: the collective, or the point-to-point benchmark (p2p_latency, p2p_bw, "
         "p2p_bibw), to sweep");
  f.name("micro.impl", &MicroConfig::impl, "comm_impl", "mpi",
         "micro task: implementation (mpi, ours, ours-async, or a compressor)");
  f.add("micro.min_bytes", &MicroConfig::min_bytes, I{4}, "micro task: smallest size");
  f.add("micro.max_bytes", &MicroConfig::max_bytes, I{1} << 20,
        "micro task: largest size (at most 64 MiB is sensible here)");
  f.add("micro.factor", &MicroConfig::factor, I{4}, "micro task: size step factor");
  f.add("micro.iters", &MicroConfig::iters, I{0},
        "micro task: timed calls per size (0: by size, 200 small .. 5 large)");
  f.add("micro.warmup", &MicroConfig::warmup, I{2},
        "micro task: untimed calls per size before the timed ones");
  f.add("micro.block", &MicroConfig::block, I{256}, "micro task: int8 block");
  f.add("micro.ratio", &MicroConfig::ratio, 0.01, "micro task: topk ratio");
  f.add("micro.window", &MicroConfig::window, I{64},
        "micro task: p2p_bw and p2p_bibw: messages in flight per iteration (OSU's window)");
  f.validate(validate);
}
SB_CONFIG_SECTION(MicroConfig);

}  // namespace sb::micro
