// The Python twin's C++ half (python_twin.h): what the program is asked to run, and its
// measurements recorded as the in-process micro task records its own.
#include "workloads/micro/python_twin.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/base_config.h"
#include "harness/trace/recorder.h"
#include "harness/trace/result.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/collective_case.h"
#include "workloads/micro/micro_config.h"
#include "workloads/micro/micro_records.h"
#include "workloads/micro/p2p_case.h"

namespace sb::micro {
namespace {

using nlohmann::json;

// The program's cases: per size the buffer it allocates (fp32 elements of the total buffer,
// or a message's bytes) and its timed iterations.
json spec_of(const Point& p) {
  const MicroConfig& mc = config<MicroConfig>(p);
  const int world = static_cast<int>(base_config(p).world);
  json cases = json::array();
  for (const auto b : swept_sizes(mc)) {
    const std::int64_t n = is_p2p(mc.op) ? b : plain_sizes(op_from_name(mc.op), b, world).count;
    cases.push_back({{"bytes", b}, {"count", n}, {"iters", timed_iterations(mc, b)}});
  }
  return {{"point_id", p.id}, {"op", mc.op}, {"impl", mc.impl}, {"world", world},
          {"warmup", mc.warmup}, {"window", mc.window}, {"cases", cases},
          {"p2p", is_p2p(mc.op)}};
}

std::vector<std::vector<double>> rows(const json& j, const char* key) {
  return j.at(key).get<std::vector<std::vector<double>>>();
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& python_impls() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"mpi4py-numpy", "the Python twin (OMB-Py): mpi4py's buffer calls on NumPy float32 arrays"},
      {"mpi4py-torch", "the Python twin (OMB-Py): mpi4py's buffer calls on torch float32 CPU tensors"}};
  return v;
}

bool is_python(const std::string& impl) {
  for (const auto& [name, doc] : python_impls())
    if (impl == name) return true;
  return false;
}

std::vector<std::string> python_twin_argv(const Point& p, const TaskInfo::Exec& x) {
  const MicroConfig& mc = config<MicroConfig>(p);
  if (!is_python(mc.impl)) return {};
  const std::string python = x.source_dir + "/.venv/bin/python";
  const std::string script = x.source_dir + "/workloads/micro/omb_py.py";
  // Missing: the in-process path fails the point with the fix (MicroWorkload::run).
  if (!std::filesystem::exists(python) || !std::filesystem::exists(script)) return {};
  return {python, script, "--suite", x.suite_file, "--point", x.point, "--results", x.results_dir,
          "--shardbench", x.self, "--spec", spec_of(p).dump(),
          "--machine", machine_rank_json(host_name())};
}

// The file (omb_py.py's measurements): per case the slowest rank's mean, min and max over the
// ranks' means, the received elements that were wrong, and each rank's time and start of every
// timed iteration.
void record_python_twin(const Point& p, const std::string& file, Recorder& rec) {
  std::ifstream in(file);
  SB_CHECK(in.good(), "cannot read the Python twin's measurements '{}'", file);
  const json j = json::parse(in);
  const json spec = spec_of(p);
  SB_CHECK(j.at("point_id") == p.id, "measurements '{}' are of point {}, not {}", file,
           j.at("point_id").get<std::string>(), p.id);
  const MicroConfig& mc = config<MicroConfig>(p);
  const int world = static_cast<int>(base_config(p).world);
  const auto& cases = j.at("cases");
  SB_CHECK(cases.size() <= spec.at("cases").size(), "measurements '{}': {} cases for {} sizes", file,
           cases.size(), spec.at("cases").size());
  for (const auto& [k, v] : j.at("texts").items()) rec.text(k, v.get<std::string>());
  std::int64_t total_wrong = 0;
  for (std::size_t s = 0; s < cases.size(); ++s) {
    const json& c = cases[s];
    const std::int64_t bytes = spec.at("cases")[s].at("bytes");
    const auto local = rows(c, "local_s"), start = rows(c, "start_s");
    SB_CHECK(static_cast<int>(local.size()) == world, "measurements '{}': {} ranks' times for world {}",
             file, local.size(), world);
    const double mean = c.at("mean_s");
    const std::int64_t wrong = c.at("wrong");
    total_wrong += wrong;
    std::int64_t size = bytes, wire = bytes;
    std::uint64_t logical = static_cast<std::uint64_t>(bytes);
    P2PBench bench{};
    if (is_p2p(mc.op)) {
      bench = p2p_from_name(mc.op);
    } else {
      const PlainSizes ps = plain_sizes(op_from_name(mc.op), bytes, world);
      size = ps.size_bytes, wire = ps.wire_bytes, logical = ps.logical_bytes;
    }
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < local[static_cast<std::size_t>(r)].size(); ++i) {
        CommEvent e;
        e.step = static_cast<std::int64_t>(s);
        e.rank = r;
        e.op = mc.op;
        e.group = "world";
        e.kind = "micro";
        e.backend = "mpi4py";
        e.logical_bytes = logical;
        e.wire_bytes = static_cast<std::uint64_t>(wire);
        e.start_s = start[static_cast<std::size_t>(r)][i];
        const double dt = local[static_cast<std::size_t>(r)][i];
        e.duration_s = is_p2p(mc.op) ? p2p_per_message_s(bench, static_cast<int>(mc.window), dt) : dt;
        if (is_p2p(mc.op)) e.peer = r ^ 1;
        rec.comm(e);
      }
    const SizeFigures f{static_cast<std::int64_t>(s), size, wire, mean, c.at("rank_min_s").get<double>(),
                        c.at("rank_max_s").get<double>(), wrong};
    if (is_p2p(mc.op))
      record_p2p_size(rec, f, bench, static_cast<int>(mc.window));
    else
      record_collective_size(rec, f, mc.op, world);
  }
  const auto hosts = j.at("hosts").get<std::vector<std::string>>();
  const auto rss = j.at("peak_rss_bytes").get<std::vector<std::uint64_t>>();
  for (int r = 0; r < world && r < static_cast<int>(hosts.size()); ++r) {
    RankMemory m;
    m.rank = r;
    m.host = hosts[static_cast<std::size_t>(r)];
    m.peak_rss_bytes = r < static_cast<int>(rss.size()) ? rss[static_cast<std::size_t>(r)] : 0;
    rec.memory(m);
  }
  rec.scalar("wrong", static_cast<double>(total_wrong));
  SB_CHECK(total_wrong == 0, "{} {}: {} received elements differ from what was sent; the Python "
           "twin's transfers are broken", mc.op, mc.impl, total_wrong);
}

}  // namespace sb::micro
