// HDF5 sink: writes a point's result as docs/HDF5_SCHEMA.md says (C API), to a temporary
// name renamed when complete; and reads back its root attributes (the schedulers' summary).
// Root attributes come from Table<ResultMeta> (result.h), the record groups' columns from the
// records' Tables in hdf5_table.cpp.
#include <hdf5.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// One root attribute, typed by its ResultMeta member (the Table's types: int64, float64, string).
void write_attribute(hid_t obj, const char* name, std::int64_t v) {
  attr_scalar<std::int64_t>(obj, name, H5T_NATIVE_INT64, H5T_STD_I64LE, v);
}
void write_attribute(hid_t obj, const char* name, double v) {
  attr_scalar<double>(obj, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, v);
}
void write_attribute(hid_t obj, const char* name, const std::string& v) {
  attr_string(obj, name, v);
}

// Root attributes: every entry of Table<ResultMeta> (result.h), in its order.
void write_meta(hid_t f, const ResultMeta& m) {
  for_each_field<ResultMeta>([&](const auto& a) { write_attribute(f, a.name, m.*a.member); });
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

// Appends each name an HDF5 iteration visits to the std::vector<std::string> at `out`.
template <class Info>
herr_t collect_name(hid_t, const char* name, const Info*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

// The names of obj's attributes (links = false) or of group obj's members, by name.
std::vector<std::string> names_in(hid_t obj, bool links) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  h5(links ? H5Literate(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name<H5L_info_t>, &names)
           : H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name<H5A_info_t>, &names),
     links ? "list datasets" : "list attributes");
  return names;
}

void write_file(hid_t f, const ResultMeta& m, const Recorder& rec) {
  write_meta(f, m);
  write_record_tables(f, rec);
  write_named(f, rec);
}

std::string read_attr_string(hid_t obj, const char* name) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("open attribute ") + name);
  H5Id type(make_vlen_string(), H5Tclose, "create string type");
  char* p = nullptr;
  h5(H5Aread(a, type, &p), std::string("read attribute ") + name);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}

template <class T>
T read_attr_scalar(hid_t obj, const char* name, hid_t mem_type) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("open attribute ") + name);
  T v{};
  h5(H5Aread(a, mem_type, &v), std::string("read attribute ") + name);
  return v;
}

void read_attribute(hid_t obj, const char* name, std::int64_t& v) {
  v = read_attr_scalar<std::int64_t>(obj, name, H5T_NATIVE_INT64);
}
void read_attribute(hid_t obj, const char* name, double& v) {
  v = read_attr_scalar<double>(obj, name, H5T_NATIVE_DOUBLE);
}
void read_attribute(hid_t obj, const char* name, std::string& v) { v = read_attr_string(obj, name); }

// Every root attribute of Table<ResultMeta> that the file has; the ones it lacks keep m's value
// and are named in `absent`.
void read_meta(hid_t f, ResultMeta& m, std::vector<std::string>* absent = nullptr) {
  for_each_field<ResultMeta>([&](const auto& a) {
    if (H5Aexists(f, a.name) > 0) read_attribute(f, a.name, m.*a.member);
    else if (absent && a.presence == Presence::always) absent->push_back(a.name);
  });
}
}  // namespace

namespace hdf5 {

void read_named(hid_t f, Recorder& rec) {
  if (H5Lexists(f, "scalars", H5P_DEFAULT) > 0) {
    H5Id g(H5Gopen2(f, "scalars", H5P_DEFAULT), H5Gclose, "open /scalars");
    for (const auto& n : names_in(g, false)) rec.scalar(n, read_attr_scalar<double>(g, n.c_str(), H5T_NATIVE_DOUBLE));
  }
  if (H5Lexists(f, "texts", H5P_DEFAULT) > 0) {
    H5Id g(H5Gopen2(f, "texts", H5P_DEFAULT), H5Gclose, "open /texts");
    for (const auto& n : names_in(g, false)) rec.text(n, read_attr_string(g, n.c_str()));
  }
  if (H5Lexists(f, "series", H5P_DEFAULT) > 0) {
    H5Id g(H5Gopen2(f, "series", H5P_DEFAULT), H5Gclose, "open /series");
    for (const auto& n : names_in(g, true)) {
      H5Id ds(H5Dopen2(g, n.c_str(), H5P_DEFAULT), H5Dclose, "open /series/" + n);
      H5Id space(H5Dget_space(ds), H5Sclose, "get the space of /series/" + n);
      std::vector<double> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
      h5(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "read /series/" + n);
      for (const double x : v) rec.series(n, x);
    }
  }
}

}  // namespace hdf5

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
    ResultMeta m;
    m.status.clear();  // absent: unreadable, not "done"
    read_meta(file, m);
    s.status = m.status;
    s.failure_reason = m.failure_reason;
    s.point_id = m.point_id;
    s.point_name = m.point_name;
    s.end_time = m.end_time;
    s.elapsed_s = m.elapsed_s;
    s.steps = step_rows(file);
  } catch (const Error& e) {
    s.status = std::string("unreadable: ") + e.what();
  }
  if (s.status.empty()) s.status = "unreadable: no status attribute";
  return s;
}

ResultMeta read_result_meta(const std::string& path) {
  hid_t f = -1;
  H5E_BEGIN_TRY { f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  SB_CHECK(f >= 0, "cannot open {} as an HDF5 file", path);
  H5Id file(f, H5Fclose, "open " + path);
  ResultMeta m;
  std::vector<std::string> absent;
  read_meta(file, m, &absent);
  SB_CHECK(absent.empty(), "{}: root attribute{} {} missing (docs/HDF5_SCHEMA.md, \"Root "
           "attributes\"): not a complete result file", path, absent.size() > 1 ? "s" : "",
           fmt::format("{}", fmt::join(absent, ", ")));
  return m;
}

}  // namespace sb
