// Test helper: writes the analysis fixture through the real C++ HDF5 writer
// (sb::write_result_hdf5). make_fixture.py describes the points as JSON; this program turns
// each into a ResultMeta + Recorder and writes it, so the analysis tests read files that the
// harness itself produced. Usage: analysis_fixture_writer POINTS.json
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/trace/recorder.h"
#include "harness/trace/result.h"

namespace {
using nlohmann::json;

sb::ResultMeta meta_of(const json& m) {
  sb::ResultMeta r;
  r.status = m.at("status");
  r.failure_reason = m.at("failure_reason");
  r.suite = m.at("suite");
  r.suite_file = m.at("suite_file");
  r.suite_sha256 = m.at("suite_sha256");
  r.point_index = m.at("point_index");
  r.point_id = m.at("point_id");
  r.point_name = m.at("point_name");
  r.baseline_id = m.at("baseline_id");
  r.config = m.at("config");
  r.reference = m.at("reference");
  r.git_commit = m.at("git_commit");
  r.shardbench_version = m.at("shardbench_version");
  r.versions = m.at("versions");
  r.hosts = m.at("hosts");
  r.world_size = m.at("world_size");
  r.threads_per_rank = m.at("threads_per_rank");
  r.command_line = m.at("command_line");
  r.start_time = m.at("start_time");
  r.end_time = m.at("end_time");
  r.elapsed_s = m.at("elapsed_s");
  return r;
}

void record(const json& p, sb::Recorder& rec) {
  for (const auto& s : p.at("steps")) {
    sb::StepRecord r;
    r.step = s.at("step");
    r.warmup = s.at("warmup").get<int>() != 0;
    r.wall_s = s.at("wall_s");
    r.forward_s = s.at("forward_s");
    r.backward_s = s.at("backward_s");
    r.optimizer_s = s.at("optimizer_s");
    r.comm_exposed_s = s.at("comm_exposed_s");
    r.loss = s.at("loss");
    r.grad_norm = s.at("grad_norm");
    r.tokens_per_s = s.at("tokens_per_s");
    r.samples_per_s = s.at("samples_per_s");
    r.mfu = s.at("mfu");
    rec.step(r);
  }
  for (const auto& m : p.at("ranks")) {
    sb::RankMemory r;
    r.rank = m.at("rank");
    r.host = m.at("host");
    r.param_bytes = m.at("param_bytes");
    r.grad_bytes = m.at("grad_bytes");
    r.optim_bytes = m.at("optim_bytes");
    r.gathered_bytes = m.at("gathered_bytes");
    r.model_state_bytes = m.at("model_state_bytes");
    r.peak_model_state_bytes = m.at("peak_model_state_bytes");
    r.peak_rss_bytes = m.at("peak_rss_bytes");
    rec.memory(r);
  }
  for (const auto& e : p.at("comm")) {
    sb::CommEvent r;
    r.step = e.at("step");
    r.rank = e.at("rank");
    r.op = e.at("op");
    r.group = e.at("group");
    r.kind = e.at("kind");
    r.logical_bytes = e.at("logical_bytes");
    r.wire_bytes = e.at("wire_bytes");
    r.start_s = e.at("start_s");
    r.duration_s = e.at("duration_s");
    rec.comm(r);
  }
  for (const auto& q : p.at("queries")) {
    sb::QueryRecord r;
    r.scenario = q.at("scenario");
    r.query = q.at("query");
    r.issue_s = q.at("issue_s");
    r.latency_s = q.at("latency_s");
    r.samples = q.at("samples");
    r.tokens = q.at("tokens");
    rec.query(r);
  }
  for (const auto& [k, v] : p.at("scalars").items()) rec.scalar(k, v.get<double>());
  for (const auto& [k, v] : p.at("series").items())
    for (const auto& x : v) rec.series(k, x.get<double>());
  for (const auto& [k, v] : p.at("texts").items()) rec.text(k, v.get<std::string>());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s POINTS.json\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    const json doc = json::parse(in);
    for (const auto& p : doc.at("points")) {
      sb::Recorder rec;
      record(p, rec);
      sb::write_result_hdf5(p.at("path"), meta_of(p.at("meta")), rec);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "analysis_fixture_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
