// HDF5 result files against docs/HDF5_SCHEMA.md: every documented attribute, group and
// dataset, with its HDF5 type class/size and the values written; the root attributes exactly
// those of Table<ResultMeta> and read back through it; chunked and extendible
// datasets; the temporary-name-then-rename rule (a killed writer leaves no final file);
// the summary reader; and the cost of recording (tracing must not slow a step).
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "harness/trace/recorder.h"
#include "harness/trace/result.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("sb-trace-{}-{}", name, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// A recorder with two records of every kind, as a 2-rank point would hand it to the sink.
sb::Recorder full_recorder() {
  sb::Recorder r;
  r.step({0, true, 0.5, 0.1, 0.2, 0.05, 0.01, 4.0, 1.5, 1000.0, 16.0, 0.25});
  r.step({1, false, 0.4, 0.09, 0.19, 0.04, 0.02, 3.5, 1.25, 1250.0, 20.0, 0.3});
  r.comm({1, 0, "all_gather", "shard", "param_all_gather", "mpi", 4096, 1024, 0.125, 0.002});
  r.comm({1, 1, "reduce_scatter", "world", "grad_reduce_scatter", "mpi", 8192, 2048, 0.25, 0.003});
  r.memory({0, "node-a", 10, 20, 30, 40, 60, 100, 1u << 20});
  r.memory({1, "node-b", 11, 21, 31, 41, 63, 101, 2u << 20});
  r.query({"server", 0, 0.0, 0.01, 1, 64});
  r.query({"offline", 1, 0.5, 0.02, 8, 512});
  r.scalar("final_eval_loss", 2.5);
  r.scalar("mlm_accuracy", 0.75);
  r.series("eval_loss", 3.0);
  r.series("eval_loss", 2.75);
  r.text("torch_version", "1.13.1");
  return r;
}

sb::ResultMeta full_meta() {
  sb::ResultMeta m;
  m.status = "done";
  m.suite = "quick";
  m.suite_file = "suite/quick.toml";
  m.suite_sha256 = "ab12";
  m.point_index = 3;
  m.point_id = "0123456789ab";
  m.point_name = "gpt2-tiny/full_shard";
  m.baseline_id = "ba5e11111111";
  m.config = R"({"world":2})";
  m.reference = R"({"latency_ms":1.5})";
  m.git_commit = "deadbeef";
  m.shardbench_version = "0.1.0";
  m.versions = sb::versions_json({{"torch_version", "1.13.1"}});
  m.hosts = sb::json_string_list({"node-a", "node-b"});
  m.machine = R"({"nodes":[],"ranks_per_node":2})";
  m.world_size = 2;
  m.threads_per_rank = 4;
  m.slurm_job_id = "77";
  m.slurm_array_job_id = "76";
  m.slurm_array_task_id = "3";
  m.command_line = "shardbench run quick.toml --point 3";
  m.start_time = "2026-12-02T10:00:00Z";
  m.end_time = "2026-12-02T10:01:00Z";
  m.elapsed_s = 60.5;
  return m;
}

// ---- Reading with the HDF5 C API, independent of the writer's helpers ----------------
struct Reader {
  hid_t f = -1;
  explicit Reader(const std::string& path) { f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  ~Reader() {
    if (f >= 0) H5Fclose(f);
  }
};

// The attribute's type: class and size (H5T_VARIABLE for variable-length strings).
void expect_attr_type(hid_t obj, const char* name, H5T_class_t cls, size_t size) {
  ASSERT_GT(H5Aexists(obj, name), 0) << "attribute " << name << " missing";
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = H5Aget_type(a);
  EXPECT_EQ(H5Tget_class(t), cls) << name;
  if (cls == H5T_STRING)
    EXPECT_TRUE(H5Tis_variable_str(t)) << name << " is not a variable-length string";
  if (cls == H5T_STRING) EXPECT_EQ(H5Tget_cset(t), H5T_CSET_UTF8) << name;
  else
    EXPECT_EQ(H5Tget_size(t), size) << name;
  H5Tclose(t);
  H5Aclose(a);
}

std::string attr_str(hid_t obj, const char* name) {
  expect_attr_type(obj, name, H5T_STRING, 0);
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);  // the schema's strings are UTF-8 (h5py reads them as str)
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}

template <class T>
T attr_num(hid_t obj, const char* name, hid_t mem, H5T_class_t cls) {
  expect_attr_type(obj, name, cls, sizeof(T));
  T v{};
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  H5Aread(a, mem, &v);
  H5Aclose(a);
  return v;
}

// Checks a dataset's type, shape (1-D, n rows, unlimited max), chunking; returns its values.
template <class T>
std::vector<T> column(hid_t f, const std::string& path, hid_t mem, H5T_class_t cls, bool is_signed,
                      size_t n) {
  hid_t d = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << "dataset " << path << " missing";
  if (d < 0) return {};
  hid_t t = H5Dget_type(d);
  EXPECT_EQ(H5Tget_class(t), cls) << path;
  EXPECT_EQ(H5Tget_size(t), sizeof(T)) << path;
  if (cls == H5T_INTEGER) EXPECT_EQ(H5Tget_sign(t), is_signed ? H5T_SGN_2 : H5T_SGN_NONE) << path;
  hid_t s = H5Dget_space(d);
  EXPECT_EQ(H5Sget_simple_extent_ndims(s), 1) << path;
  hsize_t dims[1] = {0}, maxdims[1] = {0};
  H5Sget_simple_extent_dims(s, dims, maxdims);
  EXPECT_EQ(dims[0], n) << path;
  EXPECT_EQ(maxdims[0], H5S_UNLIMITED) << path << " is not extendible";
  hid_t pl = H5Dget_create_plist(d);
  EXPECT_EQ(H5Pget_layout(pl), H5D_CHUNKED) << path << " is not chunked";
  std::vector<T> v(dims[0]);
  if (!v.empty()) H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Pclose(pl);
  H5Sclose(s);
  H5Tclose(t);
  H5Dclose(d);
  return v;
}

std::vector<std::string> str_column(hid_t f, const std::string& path, size_t n) {
  hid_t d = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << "dataset " << path << " missing";
  if (d < 0) return {};
  hid_t t = H5Dget_type(d);
  EXPECT_EQ(H5Tget_class(t), H5T_STRING) << path;
  EXPECT_TRUE(H5Tis_variable_str(t)) << path;
  hid_t s = H5Dget_space(d);
  hsize_t dims[1] = {0}, maxdims[1] = {0};
  H5Sget_simple_extent_dims(s, dims, maxdims);
  EXPECT_EQ(dims[0], n) << path;
  EXPECT_EQ(maxdims[0], H5S_UNLIMITED) << path;
  std::vector<char*> p(dims[0]);
  hid_t mt = H5Tcopy(H5T_C_S1);
  H5Tset_size(mt, H5T_VARIABLE);
  H5Tset_cset(mt, H5T_CSET_UTF8);
  std::vector<std::string> out;
  if (!p.empty()) {
    H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
    for (char* c : p) out.emplace_back(c ? c : "");
    H5Dvlen_reclaim(mt, s, H5P_DEFAULT, p.data());
  }
  H5Tclose(mt);
  H5Sclose(s);
  H5Tclose(t);
  H5Dclose(d);
  return out;
}

std::vector<double> f64(hid_t f, const std::string& p, size_t n) {
  return column<double>(f, p, H5T_NATIVE_DOUBLE, H5T_FLOAT, true, n);
}
std::vector<std::uint64_t> u64(hid_t f, const std::string& p, size_t n) {
  return column<std::uint64_t>(f, p, H5T_NATIVE_UINT64, H5T_INTEGER, false, n);
}
std::vector<std::int64_t> i64(hid_t f, const std::string& p, size_t n) {
  return column<std::int64_t>(f, p, H5T_NATIVE_INT64, H5T_INTEGER, true, n);
}
std::vector<std::int32_t> i32(hid_t f, const std::string& p, size_t n) {
  return column<std::int32_t>(f, p, H5T_NATIVE_INT32, H5T_INTEGER, true, n);
}

using D = std::vector<double>;
using U = std::vector<std::uint64_t>;
using I = std::vector<std::int64_t>;
using S = std::vector<std::string>;

}  // namespace

TEST(TraceHdf5, EveryDocumentedFieldHasItsTypeAndValue) {
  const std::string dir = temp_dir("schema");
  const std::string path = sb::result_path(dir, 3, "0123456789ab");
  EXPECT_EQ(path, dir + "/points/3-0123456789ab.h5");
  sb::write_result_hdf5(path, full_meta(), full_recorder());

  Reader r(path);
  ASSERT_GE(r.f, 0);
  const hid_t f = r.f;
  // Root attributes.
  EXPECT_EQ(attr_num<std::int64_t>(f, "schema_version", H5T_NATIVE_INT64, H5T_INTEGER), 1);
  EXPECT_EQ(attr_str(f, "status"), "done");
  EXPECT_EQ(attr_str(f, "failure_reason"), "");
  EXPECT_EQ(attr_str(f, "suite"), "quick");
  EXPECT_EQ(attr_str(f, "suite_file"), "suite/quick.toml");
  EXPECT_EQ(attr_str(f, "suite_sha256"), "ab12");
  EXPECT_EQ(attr_num<std::int64_t>(f, "point_index", H5T_NATIVE_INT64, H5T_INTEGER), 3);
  EXPECT_EQ(attr_str(f, "point_id"), "0123456789ab");
  EXPECT_EQ(attr_str(f, "point_name"), "gpt2-tiny/full_shard");
  EXPECT_EQ(attr_str(f, "baseline_id"), "ba5e11111111");
  EXPECT_EQ(attr_str(f, "config"), R"({"world":2})");
  EXPECT_EQ(attr_str(f, "reference"), R"({"latency_ms":1.5})");
  EXPECT_EQ(attr_str(f, "git_commit"), "deadbeef");
  EXPECT_EQ(attr_str(f, "shardbench_version"), "0.1.0");
  const std::string versions = attr_str(f, "versions");
  for (const char* k : {"\"mpi\":\"Open MPI", "\"hdf5\":\"1.", "\"fmt\":\"", "\"torch\":\"1.13.1\"",
                        "\"compiler\":\""})
    EXPECT_NE(versions.find(k), std::string::npos) << versions << " lacks " << k;
  EXPECT_EQ(attr_str(f, "hosts"), R"(["node-a","node-b"])");
  EXPECT_EQ(attr_str(f, "machine"), R"({"nodes":[],"ranks_per_node":2})");
  EXPECT_EQ(attr_num<std::int64_t>(f, "world_size", H5T_NATIVE_INT64, H5T_INTEGER), 2);
  EXPECT_EQ(attr_num<std::int64_t>(f, "threads_per_rank", H5T_NATIVE_INT64, H5T_INTEGER), 4);
  EXPECT_EQ(attr_str(f, "slurm_job_id"), "77");
  EXPECT_EQ(attr_str(f, "slurm_array_job_id"), "76");
  EXPECT_EQ(attr_str(f, "slurm_array_task_id"), "3");
  EXPECT_EQ(attr_str(f, "command_line"), "shardbench run quick.toml --point 3");
  EXPECT_EQ(attr_str(f, "start_time"), "2026-12-02T10:00:00Z");
  EXPECT_EQ(attr_str(f, "end_time"), "2026-12-02T10:01:00Z");
  EXPECT_EQ(attr_num<double>(f, "elapsed_s", H5T_NATIVE_DOUBLE, H5T_FLOAT), 60.5);

  // /steps
  EXPECT_EQ(i64(f, "steps/step", 2), (I{0, 1}));
  EXPECT_EQ((column<std::int8_t>(f, "steps/warmup", H5T_NATIVE_INT8, H5T_INTEGER, true, 2)),
            (std::vector<std::int8_t>{1, 0}));
  EXPECT_EQ(f64(f, "steps/wall_s", 2), (D{0.5, 0.4}));
  EXPECT_EQ(f64(f, "steps/forward_s", 2), (D{0.1, 0.09}));
  EXPECT_EQ(f64(f, "steps/backward_s", 2), (D{0.2, 0.19}));
  EXPECT_EQ(f64(f, "steps/optimizer_s", 2), (D{0.05, 0.04}));
  EXPECT_EQ(f64(f, "steps/comm_exposed_s", 2), (D{0.01, 0.02}));
  EXPECT_EQ(f64(f, "steps/loss", 2), (D{4.0, 3.5}));
  EXPECT_EQ(f64(f, "steps/grad_norm", 2), (D{1.5, 1.25}));
  EXPECT_EQ(f64(f, "steps/tokens_per_s", 2), (D{1000.0, 1250.0}));
  EXPECT_EQ(f64(f, "steps/samples_per_s", 2), (D{16.0, 20.0}));
  EXPECT_EQ(f64(f, "steps/mfu", 2), (D{0.25, 0.3}));
  // /ranks
  EXPECT_EQ(i32(f, "ranks/rank", 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(str_column(f, "ranks/host", 2), (S{"node-a", "node-b"}));
  EXPECT_EQ(u64(f, "ranks/param_bytes", 2), (U{10, 11}));
  EXPECT_EQ(u64(f, "ranks/grad_bytes", 2), (U{20, 21}));
  EXPECT_EQ(u64(f, "ranks/optim_bytes", 2), (U{30, 31}));
  EXPECT_EQ(u64(f, "ranks/gathered_bytes", 2), (U{40, 41}));
  EXPECT_EQ(u64(f, "ranks/model_state_bytes", 2), (U{60, 63}));
  EXPECT_EQ(u64(f, "ranks/peak_model_state_bytes", 2), (U{100, 101}));
  EXPECT_EQ(u64(f, "ranks/peak_rss_bytes", 2), (U{1u << 20, 2u << 20}));
  // /comm
  EXPECT_EQ(i64(f, "comm/step", 2), (I{1, 1}));
  EXPECT_EQ(i32(f, "comm/rank", 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(str_column(f, "comm/op", 2), (S{"all_gather", "reduce_scatter"}));
  EXPECT_EQ(str_column(f, "comm/group", 2), (S{"shard", "world"}));
  EXPECT_EQ(str_column(f, "comm/kind", 2), (S{"param_all_gather", "grad_reduce_scatter"}));
  EXPECT_EQ(u64(f, "comm/logical_bytes", 2), (U{4096, 8192}));
  EXPECT_EQ(u64(f, "comm/wire_bytes", 2), (U{1024, 2048}));
  EXPECT_EQ(f64(f, "comm/start_s", 2), (D{0.125, 0.25}));
  EXPECT_EQ(f64(f, "comm/duration_s", 2), (D{0.002, 0.003}));
  // /queries
  EXPECT_EQ(str_column(f, "queries/scenario", 2), (S{"server", "offline"}));
  EXPECT_EQ(i64(f, "queries/query", 2), (I{0, 1}));
  EXPECT_EQ(f64(f, "queries/issue_s", 2), (D{0.0, 0.5}));
  EXPECT_EQ(f64(f, "queries/latency_s", 2), (D{0.01, 0.02}));
  EXPECT_EQ(i64(f, "queries/samples", 2), (I{1, 8}));
  EXPECT_EQ(i64(f, "queries/tokens", 2), (I{64, 512}));
  // /scalars, /series, /texts
  hid_t g = H5Gopen2(f, "scalars", H5P_DEFAULT);
  EXPECT_EQ(attr_num<double>(g, "final_eval_loss", H5T_NATIVE_DOUBLE, H5T_FLOAT), 2.5);
  EXPECT_EQ(attr_num<double>(g, "mlm_accuracy", H5T_NATIVE_DOUBLE, H5T_FLOAT), 0.75);
  H5Gclose(g);
  EXPECT_EQ(f64(f, "series/eval_loss", 2), (D{3.0, 2.75}));
  g = H5Gopen2(f, "texts", H5P_DEFAULT);
  EXPECT_EQ(attr_str(g, "torch_version"), "1.13.1");
  H5Gclose(g);
  fs::remove_all(dir);
}

// The root attributes of the file are exactly the entries of Table<ResultMeta>, each with the
// HDF5 type of its column type: no attribute written by hand beside the table, none left out.
TEST(TraceHdf5, RootAttributesAreExactlyTheTable) {
  const std::string dir = temp_dir("root");
  const std::string path = dir + "/points/0-x.h5";
  sb::write_result_hdf5(path, full_meta(), full_recorder());
  Reader r(path);
  ASSERT_GE(r.f, 0);
  std::vector<std::string> in_file;
  H5Aiterate2(r.f, H5_INDEX_NAME, H5_ITER_INC, nullptr,
              [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                static_cast<std::vector<std::string>*>(out)->push_back(name);
                return 0;
              }, &in_file);
  std::vector<std::string> in_table;
  sb::for_each_field<sb::ResultMeta>([&](const auto& a) {
    in_table.push_back(a.name);
    switch (a.type) {
      case sb::ColumnType::int64: expect_attr_type(r.f, a.name, H5T_INTEGER, 8); break;
      case sb::ColumnType::float64: expect_attr_type(r.f, a.name, H5T_FLOAT, 8); break;
      case sb::ColumnType::string: expect_attr_type(r.f, a.name, H5T_STRING, 0); break;
      default: ADD_FAILURE() << a.name << ": a root attribute of a type the writer has no case for";
    }
  });
  std::sort(in_table.begin(), in_table.end());
  EXPECT_EQ(in_file, in_table);
  fs::remove_all(dir);
}

// Writer and reader agree on every attribute of the table; an attribute added later (machine)
// reads as its default from a file without it, one every file has is an error naming it.
TEST(TraceHdf5, RootAttributesReadBackThroughTheTable) {
  const std::string dir = temp_dir("meta");
  const std::string path = dir + "/points/0-x.h5";
  const sb::ResultMeta want = full_meta();
  sb::write_result_hdf5(path, want, full_recorder());
  const sb::ResultMeta got = sb::read_result_meta(path);
  sb::for_each_field<sb::ResultMeta>([&](const auto& a) {
    EXPECT_EQ(got.*a.member, want.*a.member) << a.name;
  });

  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_GE(H5Adelete(f, "machine"), 0);
  H5Fclose(f);
  EXPECT_EQ(sb::read_result_meta(path).machine, "{}");
  f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(H5Adelete(f, "status"), 0);
  EXPECT_GE(H5Adelete(f, "elapsed_s"), 0);
  H5Fclose(f);
  try {
    sb::read_result_meta(path);
    ADD_FAILURE() << "expected sb::Error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": root attributes status, elapsed_s missing "
                                         "(docs/HDF5_SCHEMA.md, \"Root attributes\"): not a "
                                         "complete result file"),
              std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(TraceHdf5, EmptyGroupsHaveZeroLengthDatasets) {
  const std::string dir = temp_dir("empty");
  const std::string path = dir + "/points/0-x.h5";
  sb::ResultMeta m = full_meta();
  m.status = "failed";
  m.failure_reason = "[rank 1 on node-b] a.cpp:3: boom";
  sb::write_result_hdf5(path, m, sb::Recorder{});
  Reader r(path);
  ASSERT_GE(r.f, 0);
  EXPECT_EQ(attr_str(r.f, "status"), "failed");
  EXPECT_EQ(attr_str(r.f, "failure_reason"), "[rank 1 on node-b] a.cpp:3: boom");
  EXPECT_TRUE(f64(r.f, "steps/wall_s", 0).empty());
  EXPECT_TRUE(str_column(r.f, "ranks/host", 0).empty());
  EXPECT_TRUE(str_column(r.f, "comm/op", 0).empty());
  EXPECT_TRUE(i64(r.f, "queries/query", 0).empty());
  for (const char* grp : {"scalars", "series", "texts"}) EXPECT_GT(H5Lexists(r.f, grp, H5P_DEFAULT), 0) << grp;
  fs::remove_all(dir);
}

TEST(TraceHdf5, NamesThatCannotBeHdf5NamesAreRejected) {
  const std::string dir = temp_dir("names");
  sb::Recorder rec;
  rec.scalar("a/b", 1.0);
  try {
    sb::write_result_hdf5(dir + "/x.h5", full_meta(), rec);
    FAIL() << "expected sb::Error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("scalar name 'a/b' cannot be an HDF5 name"), std::string::npos)
        << e.what();
  }
  // Neither the final file nor its temporary stays behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
  fs::remove_all(dir);
}

TEST(TraceHdf5, SummaryReaderReportsStatusReasonAndSteps) {
  const std::string dir = temp_dir("summary");
  const std::string path = dir + "/p.h5";
  EXPECT_FALSE(sb::read_result_summary(path).exists);
  sb::ResultMeta m = full_meta();
  m.status = "incomplete";
  m.failure_reason = "stopped by signal 10 (User defined signal 1) after 2 steps, 1.0 s";
  sb::write_result_hdf5(path, m, full_recorder());
  const sb::ResultSummary s = sb::read_result_summary(path);
  EXPECT_TRUE(s.exists);
  EXPECT_EQ(s.status, "incomplete");
  EXPECT_EQ(s.failure_reason, m.failure_reason);
  EXPECT_EQ(s.point_id, "0123456789ab");
  EXPECT_EQ(s.steps, 2);
  // A file that is not HDF5 under the final name is reported, not trusted.
  { std::FILE* g = std::fopen((dir + "/junk.h5").c_str(), "w"); std::fputs("junk", g); std::fclose(g); }
  const sb::ResultSummary j = sb::read_result_summary(dir + "/junk.h5");
  EXPECT_TRUE(j.exists);
  EXPECT_EQ(j.status, "unreadable: not an HDF5 file");
  fs::remove_all(dir);
}

// Attributes are declared UTF-8: a reason quoting a corrupted file's bytes (here a strategy
// string with 0xff and a cut 3-byte sequence) is written with those bytes replaced, so h5py
// and the report can read it; valid multi-byte text is kept as it is.
TEST(TraceHdf5, ReasonsAreWrittenAsValidUtf8) {
  const std::string dir = temp_dir("utf8");
  const std::string path = dir + "/p.h5";
  sb::ResultMeta m = full_meta();
  m.status = "failed";
  m.failure_reason = "checkpoint strategy \xff\xfe is unknown (\xe2\x82 cut), 5 \xc2\xb5s";
  sb::write_result_hdf5(path, m, sb::Recorder{});
  EXPECT_EQ(sb::read_result_summary(path).failure_reason,
            "checkpoint strategy ?? is unknown (?? cut), 5 \xc2\xb5s");
  fs::remove_all(dir);
}

// A writer killed in the middle of writing leaves its temporary file, never the final name.
TEST(TraceHdf5, KilledWriterLeavesNoFinalFile) {
  const std::string dir = temp_dir("killed");
  const std::string path = dir + "/points/0-big.h5";
  fs::create_directories(dir + "/points");
  // Big enough that writing takes far longer than the time we let it run.
  sb::Recorder big;
  for (int i = 0; i < 1000000; ++i)
    big.comm({i, i % 4, "all_gather", "world", "param_all_gather", "mpi", 1, 1, 0.0, 0.0});
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sb::write_result_hdf5(path, full_meta(), big);
    _exit(0);
  }
  // Wait until the temporary file exists (the write has begun), then kill the writer.
  bool started = false;
  for (int i = 0; i < 2000 && !started; ++i) {
    for (const auto& e : fs::directory_iterator(dir + "/points"))
      if (e.path().string().find(".h5.tmp.") != std::string::npos) started = true;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(started) << "the writer never created its temporary file";
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer finished before it was killed; make it bigger";
  EXPECT_FALSE(fs::exists(path)) << "a killed writer left a file under the final name";
  EXPECT_FALSE(sb::read_result_summary(path).exists);
  fs::remove_all(dir);
}

// Tracing overhead: what a workload pays per step for its records (one step record, a few
// comm events). Printed for the report; the bound is loose so a busy machine passes, yet a
// recorder that did I/O or MPI per append (~10+ us) would fail it.
TEST(TraceHdf5, RecordingCostsMicrosecondsPerStep) {
  constexpr int kSteps = 20000, kCommPerStep = 8;
  // This thread's CPU time, best of 5 rounds: the machine is shared, and the cost we want is
  // the recorder's own, not time spent waiting for a core.
  auto cpu_s = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double best = 1e9;
  sb::Recorder rec;
  for (int round = 0; round < 5; ++round) {
    rec = sb::Recorder{};
    const double t0 = cpu_s();
    for (int s = 0; s < kSteps; ++s) {
      rec.step({s, false, 0.1, 0.02, 0.05, 0.01, 0.001, 3.0, 1.0, 1e4, 64, 0.3});
      for (int c = 0; c < kCommPerStep; ++c)
        rec.comm({s, 0, "all_gather", "shard", "param_all_gather", "mpi", 1u << 20, 1u << 18, 0.5, 0.001});
    }
    best = std::min(best, cpu_s() - t0);
  }
  const double us_per_step = best / kSteps * 1e6;
  std::printf("recorder: %.3f us CPU per step (1 step record + %d comm events), best of 5 x %d steps\n",
              us_per_step, kCommPerStep, kSteps);
  EXPECT_LT(us_per_step, 100.0);

  const std::string dir = temp_dir("cost");
  const auto w0 = std::chrono::steady_clock::now();
  sb::write_result_hdf5(dir + "/p.h5", full_meta(), rec);
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  std::printf("hdf5 sink: %.3f s for %d steps and %d comm events (after the run, rank 0)\n",
              write_s, kSteps, kSteps * kCommPerStep);
  fs::remove_all(dir);
}
