// Results-folder bookkeeping shared by the schedulers and `status`.
#include "harness/launch/results.h"

#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/core/subprocess.h"
#include "harness/spec/base_config.h"
#include "harness/spec/suite.h"

namespace sb {

std::string default_results_dir(const Suite& suite) { return "results/" + suite.name; }

bool point_needs_run(const std::string& dir, const Point& p, bool retry_failed,
                     std::string* why) {
  const ResultSummary s = read_result_summary(result_path(dir, p.index, p.id));
  std::string reason;
  bool run = true;
  if (!s.exists) {
    reason = "no result yet";
  } else if (s.status == "done") {
    run = false;
    reason = "done";
  } else if (s.status == "failed") {
    run = retry_failed;
    reason = retry_failed ? "failed before, retrying" : "failed (use --retry-failed to rerun)";
  } else if (s.status == "incomplete") {
    reason = "incomplete, rerunning";
  } else {
    reason = s.status + ", rerunning";
  }
  if (why) *why = reason;
  return run;
}

namespace {

// Replaces string attribute `name` of the open file `f` (a variable-length UTF-8 string, as
// the HDF5 sink writes them).
void replace_attr_string(hid_t f, const char* name, const std::string& v) {
  if (H5Aexists(f, name) > 0)
    SB_CHECK(H5Adelete(f, name) >= 0, "HDF5: cannot delete attribute {}", name);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = v.c_str();
  const bool ok = a >= 0 && H5Awrite(a, type, &p) >= 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  SB_CHECK(ok, "HDF5: cannot write attribute {}", name);
}

}  // namespace

void mark_result_failed(const std::string& path, const std::string& reason) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  fs::copy_file(path, tmp, fs::copy_options::overwrite_existing);
  const hid_t f = H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  SB_CHECK(f >= 0, "HDF5: cannot open {} to record the failure", tmp);
  try {
    replace_attr_string(f, "status", "failed");
    replace_attr_string(f, "failure_reason", reason);
  } catch (...) {
    H5Fclose(f);
    fs::remove(tmp);
    throw;
  }
  SB_CHECK(H5Fclose(f) >= 0, "HDF5: cannot close {}", tmp);
  fs::rename(tmp, path);
}

bool record_point_failure(const std::string& dir, const Suite& suite, const Point& p,
                          const std::string& reason, const std::string& log_file) {
  const std::string path = result_path(dir, p.index, p.id);
  const ResultSummary s = read_result_summary(path);
  // A rank that failed already wrote its own, more precise reason; a done point is done; an
  // incomplete one keeps its partial trace (it was stopped, not broken) and is rerun later.
  if (s.exists && (s.status == "done" || s.status == "failed" || s.status == "incomplete"))
    return false;
  ResultMeta m = make_result_meta(suite, p);
  m.status = "failed";
  m.failure_reason = reason;
  if (!log_file.empty()) {
    const std::string tail = tail_lines(log_file, 15);
    // The first line is what `status` shows; the log's tail follows for the details.
    if (!tail.empty()) m.failure_reason += " (log: " + log_file + ", last lines below)\n" + tail;
  }
  m.hosts = json_string_list({host_name()});
  m.end_time = m.start_time;
  write_result_hdf5(path, m, Recorder{});
  return true;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SB_CHECK(out.good(), "cannot write {}: {}", tmp, std::strerror(errno));
    out << text;
    out.close();
    SB_CHECK(out.good(), "cannot write {}: {}", tmp, std::strerror(errno));
  }
  SB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename {} to {}: {}", tmp, path,
           std::strerror(errno));
}

void write_manifest(const std::string& dir, const Suite& suite) {
  std::filesystem::create_directories(dir);
  nlohmann::json j;
  j["suite"] = suite.name;
  j["suite_file"] = std::filesystem::absolute(suite.file).string();
  j["suite_sha256"] = suite.sha256;
  j["points"] = nlohmann::json::array();
  for (const auto& p : suite.points) {
    j["points"].push_back({{"index", p.index},
                           {"id", p.id},
                           {"name", p.name},
                           {"world", base_config(p).world}});
  }
  write_file_atomic(dir + "/manifest.json", j.dump(2) + "\n");
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  SB_CHECK(in.good(), "{} not found: is {} a results folder written by `shardbench sweep` or "
                      "`shardbench submit`?", path, dir);
  std::stringstream ss;
  ss << in.rdbuf();
  Manifest m;
  try {
    const auto j = nlohmann::json::parse(ss.str());
    m.suite = j.at("suite").get<std::string>();
    m.suite_file = j.at("suite_file").get<std::string>();
    m.suite_sha256 = j.at("suite_sha256").get<std::string>();
    for (const auto& p : j.at("points")) {
      m.points.push_back({p.at("index").get<std::int64_t>(), p.at("id").get<std::string>(),
                          p.at("name").get<std::string>(), p.at("world").get<std::int64_t>()});
    }
  } catch (const nlohmann::json::exception& e) {
    SB_FAIL("{} is not a valid manifest ({}); delete it and rerun sweep or submit", path, e.what());
  }
  return m;
}

}  // namespace sb
