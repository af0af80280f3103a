// HDF5 sink: writes a point's result as docs/HDF5_SCHEMA.md says (C API), to a temporary
// name renamed when complete; and reads back the few attributes the schedulers need. The
// record groups' columns are generated from the records' Tables in hdf5_table.cpp.
#include <hdf5.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "harness/core/check.h"
#include "harness/trace/hdf5_io.h"
#include "harness/trace/result.h"

namespace sb {
using namespace hdf5;  // this file is the HDF5 writer: its building blocks unqualified
namespace {

template <class T>
void attr_scalar(hid_t obj, const std::string& name, hid_t mem_type, hid_t file_type, T v) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar dataspace");
  H5Id a(H5Acreate2(obj, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
         "create attribute " + name);
  h5(H5Awrite(a, mem_type, &v), "write attribute " + name);
}

// Names become HDF5 link/attribute names: '/' would create nested groups, '.' alone is the group.
void check_name(const std::string& kind, const std::string& name) {
  SB_CHECK(!name.empty() && name.find('/') == std::string::npos && name != ".",
           "{} name '{}' cannot be an HDF5 name (empty, '.' or contains '/'); rename it in the "
           "workload that records it", kind, name);
}

// Root attributes (docs/HDF5_SCHEMA.md, "Root attributes").
void write_meta(hid_t f, const ResultMeta& m) {
  const hid_t I64 = H5T_STD_I64LE, F64 = H5T_IEEE_F64LE;
  attr_scalar<std::int64_t>(f, "schema_version", H5T_NATIVE_INT64, I64, kSchemaVersion);
  attr_string(f, "status", m.status);
  attr_string(f, "failure_reason", m.failure_reason);
  attr_string(f, "suite", m.suite);
  attr_string(f, "suite_file", m.suite_file);
  attr_string(f, "suite_sha256", m.suite_sha256);
  attr_scalar<std::int64_t>(f, "point_index", H5T_NATIVE_INT64, I64, m.point_index);
  attr_string(f, "point_id", m.point_id);
  attr_string(f, "point_name", m.point_name);
  attr_string(f, "baseline_id", m.baseline_id);
  attr_string(f, "config", m.config);
  attr_string(f, "reference", m.reference);
  attr_string(f, "git_commit", m.git_commit);
  attr_string(f, "shardbench_version", m.shardbench_version);
  attr_string(f, "versions", m.versions);
  attr_string(f, "hosts", m.hosts);
  attr_string(f, "machine", m.machine);
  attr_scalar<std::int64_t>(f, "world_size", H5T_NATIVE_INT64, I64, m.world_size);
  attr_scalar<std::int64_t>(f, "threads_per_rank", H5T_NATIVE_INT64, I64, m.threads_per_rank);
  attr_string(f, "slurm_job_id", m.slurm_job_id);
  attr_string(f, "slurm_array_job_id", m.slurm_array_job_id);
  attr_string(f, "slurm_array_task_id", m.slurm_array_task_id);
  attr_string(f, "command_line", m.command_line);
  attr_string(f, "start_time", m.start_time);
  attr_string(f, "end_time", m.end_time);
  attr_scalar<double>(f, "elapsed_s", H5T_NATIVE_DOUBLE, F64, m.elapsed_s);
}

// Named values the workload chose: scalars, series and texts.
void write_named(hid_t f, const Recorder& rec) {
  const hid_t F64 = H5T_IEEE_F64LE;
  {
    H5Id g = group(f, "scalars");
    for (const auto& [name, v] : rec.scalars()) {
      check_name("scalar", name);
      attr_scalar<double>(g, name, H5T_NATIVE_DOUBLE, F64, v);
    }
  }
  {
    H5Id g = group(f, "series");
    for (const auto& [name, v] : rec.all_series()) {
      check_name("series", name);
      column(g, name, H5T_NATIVE_DOUBLE, F64, v.data(), v.size());
    }
  }
  {
    H5Id g = group(f, "texts");
    for (const auto& [name, v] : rec.texts()) {
      check_name("text", name);
      attr_string(g, name, v);
    }
  }
}

void write_file(hid_t f, const ResultMeta& m, const Recorder& rec) {
  write_meta(f, m);
  write_record_tables(f, rec);
  write_named(f, rec);
}

std::string read_attr_string(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "";
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("open attribute ") + name);
  H5Id type(make_vlen_string(), H5Tclose, "create string type");
  char* p = nullptr;
  h5(H5Aread(a, type, &p), std::string("read attribute ") + name);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}
}  // namespace

// Writes `bytes` to tmp, syncs it and renames it to path; on any error removes tmp and throws
// with the system's reason (a full disk says "No space left on device").
static void write_bytes_atomic(const std::string& path, const std::string& tmp,
                        const std::vector<char>& bytes) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SB_CHECK(fd >= 0, "cannot create {}: {}", tmp, std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < bytes.size() && err == 0) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w > 0) done += static_cast<size_t>(w);
    else if (w < 0 && errno != EINTR) err = errno;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    SB_FAIL("cannot write the result {} ({} bytes): {}; free space there or write the results "
            "elsewhere with --results", path, bytes.size(), std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    SB_FAIL("cannot rename {} to {}: {}", tmp, path, std::strerror(err));
  }
}

void write_result_hdf5(const std::string& path, const ResultMeta& meta, const Recorder& rec) {
  namespace fs = std::filesystem;
  const fs::path final_path(path);
  std::error_code ec;
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path(), ec);
  SB_CHECK(!ec, "cannot create the results folder {}: {}", final_path.parent_path().string(),
           ec.message());
  // The file is built in memory (HDF5's core driver, no backing store) and written with
  // plain write() calls: a full disk is then an ordinary ENOSPC from write(), never an HDF5
  // file half-closed in the library (which left the process looping in HDF5's exit handler).
  std::vector<char> image;
  {
    H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create file access properties");
    h5(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "select the in-memory driver");
    H5Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose,
           "create result file " + path + " in memory");
    write_file(f, meta, rec);
    h5(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush " + path);
    const ssize_t n = H5Fget_file_image(f, nullptr, 0);
    SB_CHECK(n > 0, "HDF5: cannot size the image of {}", path);
    image.resize(static_cast<size_t>(n));
    SB_CHECK(H5Fget_file_image(f, image.data(), image.size()) == n,
             "HDF5: cannot copy the image of {}", path);
  }
  // Per-process temporary name: two ranks recording a failure never write the same file.
  write_bytes_atomic(path, fmt::format("{}.tmp.{}", path, getpid()), image);
}

ResultSummary read_result_summary(const std::string& path) {
  ResultSummary s;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  hid_t f = -1;
  H5E_BEGIN_TRY { f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  if (f < 0) {
    s.status = "unreadable: not an HDF5 file";
    return s;
  }
  H5Id file(f, H5Fclose, "open " + path);
  try {
    s.status = read_attr_string(file, "status");
    s.failure_reason = read_attr_string(file, "failure_reason");
    s.point_id = read_attr_string(file, "point_id");
    s.point_name = read_attr_string(file, "point_name");
    s.end_time = read_attr_string(file, "end_time");
    s.steps = step_rows(file);
    if (H5Aexists(file, "elapsed_s") > 0) {
      H5Id a(H5Aopen(file, "elapsed_s", H5P_DEFAULT), H5Aclose, "open attribute elapsed_s");
      h5(H5Aread(a, H5T_NATIVE_DOUBLE, &s.elapsed_s), "read attribute elapsed_s");
    }
  } catch (const Error& e) {
    s.status = std::string("unreadable: ") + e.what();
  }
  if (s.status.empty()) s.status = "unreadable: no status attribute";
  return s;
}

}  // namespace sb
