// HDF5 sink: writes a point's result as docs/HDF5_SCHEMA.md says (C API), to a temporary
// name renamed when complete; and reads back the few attributes the schedulers need.
#include <hdf5.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "harness/core/check.h"
#include "harness/trace/result.h"

namespace sb {
namespace {

// Owns one HDF5 identifier; closes it with the matching H5?close.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    SB_CHECK(id_ >= 0, "HDF5: cannot {}", what);
  }
  ~H5Id() { close_(id_); }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void h5(herr_t rc, const std::string& what) { SB_CHECK(rc >= 0, "HDF5: {} failed", what); }

// Variable-length UTF-8 string type (h5py reads it as str).
hid_t make_vlen_string() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by '?'.
// Attributes are declared UTF-8; a reason quoting a corrupted file (or a log's binary tail)
// must not make the readers (h5py, the report) fail on it.
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = b[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xC2) && !(len == 4 && c > 0xF4);
    for (size_t k = 1; ok && k < len; ++k) ok = (b[i + k] & 0xC0) == 0x80;
    if (ok && len == 3) {  // no overlongs, no UTF-16 surrogates
      const unsigned c1 = b[i + 1];
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) ok = !(c == 0xF0 && b[i + 1] < 0x90) && !(c == 0xF4 && b[i + 1] >= 0x90);
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

void attr_string(hid_t obj, const std::string& name, const std::string& raw) {
  const std::string v = valid_utf8(raw);
  H5Id type(make_vlen_string(), H5Tclose, "create string type");
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar dataspace");
  H5Id a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
         "create attribute " + name);
  const char* p = v.c_str();
  h5(H5Awrite(a, type, &p), "write attribute " + name);
}

template <class T>
void attr_scalar(hid_t obj, const std::string& name, hid_t mem_type, hid_t file_type, T v) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar dataspace");
  H5Id a(H5Acreate2(obj, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
         "create attribute " + name);
  h5(H5Awrite(a, mem_type, &v), "write attribute " + name);
}

// One 1-D, chunked, extendible (maxshape unlimited) dataset of n elements at `data`.
void column(hid_t group, const std::string& name, hid_t mem_type, hid_t file_type,
            const void* data, size_t n) {
  const hsize_t dims[1] = {n};
  const hsize_t maxdims[1] = {H5S_UNLIMITED};
  // Chunks of up to 4096 elements: small files stay small, long traces read in few chunks.
  const hsize_t chunk[1] = {n == 0 ? 1024 : std::min<hsize_t>(n, 4096)};
  H5Id space(H5Screate_simple(1, dims, maxdims), H5Sclose, "create dataspace for " + name);
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "create property list");
  h5(H5Pset_chunk(dcpl, 1, chunk), "set chunk size of " + name);
  H5Id ds(H5Dcreate2(group, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
          H5Dclose, "create dataset " + name);
  if (n > 0) h5(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write " + name);
}

template <class Rec, class T>
void num_column(hid_t g, const std::string& name, hid_t mem, hid_t file,
                const std::vector<Rec>& rows, std::function<T(const Rec&)> f) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.push_back(f(r));
  column(g, name, mem, file, v.data(), v.size());
}

template <class Rec>
void f64(hid_t g, const std::string& name, const std::vector<Rec>& rows, double Rec::*m) {
  num_column<Rec, double>(g, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, rows,
                          [m](const Rec& r) { return r.*m; });
}
template <class Rec>
void u64(hid_t g, const std::string& name, const std::vector<Rec>& rows, std::uint64_t Rec::*m) {
  num_column<Rec, std::uint64_t>(g, name, H5T_NATIVE_UINT64, H5T_STD_U64LE, rows,
                                 [m](const Rec& r) { return r.*m; });
}
template <class Rec>
void i64(hid_t g, const std::string& name, const std::vector<Rec>& rows, std::int64_t Rec::*m) {
  num_column<Rec, std::int64_t>(g, name, H5T_NATIVE_INT64, H5T_STD_I64LE, rows,
                                [m](const Rec& r) { return r.*m; });
}
template <class Rec>
void i32(hid_t g, const std::string& name, const std::vector<Rec>& rows, std::int32_t Rec::*m) {
  num_column<Rec, std::int32_t>(g, name, H5T_NATIVE_INT32, H5T_STD_I32LE, rows,
                                [m](const Rec& r) { return r.*m; });
}
template <class Rec>
void str(hid_t g, const std::string& name, const std::vector<Rec>& rows, std::string Rec::*m) {
  std::vector<const char*> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.push_back((r.*m).c_str());
  H5Id type(make_vlen_string(), H5Tclose, "create string type");
  column(g, name, type, type, v.data(), v.size());
}

H5Id group(hid_t parent, const char* name) {
  return H5Id(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
              std::string("create group ") + name);
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

// The record tables: one group per record type, one column per field.
void write_tables(hid_t f, const Recorder& rec) {
  {
    H5Id g = group(f, "steps");
    const auto& s = rec.steps();
    i64(g, "step", s, &StepRecord::step);
    num_column<StepRecord, std::int8_t>(g, "warmup", H5T_NATIVE_INT8, H5T_STD_I8LE, s,
                                        [](const StepRecord& r) { return std::int8_t(r.warmup); });
    f64(g, "wall_s", s, &StepRecord::wall_s);
    f64(g, "forward_s", s, &StepRecord::forward_s);
    f64(g, "backward_s", s, &StepRecord::backward_s);
    f64(g, "optimizer_s", s, &StepRecord::optimizer_s);
    f64(g, "comm_exposed_s", s, &StepRecord::comm_exposed_s);
    f64(g, "loss", s, &StepRecord::loss);
    f64(g, "grad_norm", s, &StepRecord::grad_norm);
    f64(g, "tokens_per_s", s, &StepRecord::tokens_per_s);
    f64(g, "samples_per_s", s, &StepRecord::samples_per_s);
    f64(g, "mfu", s, &StepRecord::mfu);
  }
  {
    H5Id g = group(f, "ranks");
    const auto& r = rec.memories();
    i32(g, "rank", r, &RankMemory::rank);
    str(g, "host", r, &RankMemory::host);
    u64(g, "param_bytes", r, &RankMemory::param_bytes);
    u64(g, "grad_bytes", r, &RankMemory::grad_bytes);
    u64(g, "optim_bytes", r, &RankMemory::optim_bytes);
    u64(g, "gathered_bytes", r, &RankMemory::gathered_bytes);
    u64(g, "model_state_bytes", r, &RankMemory::model_state_bytes);
    u64(g, "peak_model_state_bytes", r, &RankMemory::peak_model_state_bytes);
    u64(g, "peak_rss_bytes", r, &RankMemory::peak_rss_bytes);
  }
  {
    H5Id g = group(f, "comm");
    const auto& c = rec.comm_events();
    i64(g, "step", c, &CommEvent::step);
    i32(g, "rank", c, &CommEvent::rank);
    str(g, "op", c, &CommEvent::op);
    str(g, "group", c, &CommEvent::group);
    str(g, "kind", c, &CommEvent::kind);
    u64(g, "logical_bytes", c, &CommEvent::logical_bytes);
    u64(g, "wire_bytes", c, &CommEvent::wire_bytes);
    f64(g, "start_s", c, &CommEvent::start_s);
    f64(g, "duration_s", c, &CommEvent::duration_s);
  }
  {
    H5Id g = group(f, "queries");
    const auto& q = rec.queries();
    str(g, "scenario", q, &QueryRecord::scenario);
    i64(g, "query", q, &QueryRecord::query);
    f64(g, "issue_s", q, &QueryRecord::issue_s);
    f64(g, "latency_s", q, &QueryRecord::latency_s);
    i64(g, "samples", q, &QueryRecord::samples);
    i64(g, "tokens", q, &QueryRecord::tokens);
  }
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
  write_tables(f, rec);
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
    if (H5Lexists(file, "steps", H5P_DEFAULT) > 0) {
      hid_t d = -1;
      H5E_BEGIN_TRY { d = H5Dopen2(file, "steps/step", H5P_DEFAULT); }
      H5E_END_TRY;
      if (d >= 0) {
        H5Id ds(d, H5Dclose, "open steps/step");
        H5Id space(H5Dget_space(ds), H5Sclose, "get dataspace of steps/step");
        hsize_t dims[1] = {0};
        H5Sget_simple_extent_dims(space, dims, nullptr);
        s.steps = static_cast<std::int64_t>(dims[0]);
      }
    }
  } catch (const Error& e) {
    s.status = std::string("unreadable: ") + e.what();
  }
  if (s.status.empty()) s.status = "unreadable: no status attribute";
  return s;
}

}  // namespace sb
