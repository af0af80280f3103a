// The trace schema's one table per record (harness/trace/records.h) and what is generated
// from it: the HDF5 columns with their `unit`/`doc` attributes and each group's `columns`,
// the reader (records read back equal what was written), the MPI packing (every rank's
// records reach rank 0), and the JSON and markdown of `shardbench schema`.
#include <hdf5.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/trace/recorder.h"
#include "harness/trace/result.h"
#include "harness/trace/schema.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("sb-schema-{}-{}", name, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Two records of every kind, each field distinct from its default.
sb::Recorder sample_recorder() {
  sb::Recorder r;
  r.step({0, true, 0.5, 0.1, 0.2, 0.05, 0.01, 4.0, 1.5, 1000.0, 16.0, 0.25});
  r.step({1, false, 0.4, 0.09, 0.19, 0.04, 0.02, 3.5, 1.25, 1250.0, 20.0, 0.3});
  r.comm({1, 0, "all_gather", "shard", "param_all_gather", "mpi", 4096, 1024, 0.125, 0.002});
  r.comm({2, 1, "reduce_scatter", "world", "grad_reduce_scatter", "gloo", 8192, 2048, 0.25, 0.003});
  r.memory({0, "node-a", 10, 20, 30, 40, 60, 100, 1u << 20});
  r.memory({1, "node-\xc2\xb5", 11, 21, 31, 41, 63, 101, 2u << 20});
  r.query({"server", 0, 0.0, 0.01, 1, 64});
  r.query({"offline", 1, 0.5, 0.02, 8, 512});
  r.scalar("final_eval_loss", 2.75);
  r.scalar("peak_rss_bytes", 1.5e9);
  r.series("eval_loss", 3.0), r.series("eval_loss", 2.75), r.series("lr", 6e-4);
  r.text("note", "a text \xc2\xb5");
  return r;
}

sb::ResultMeta meta() {
  sb::ResultMeta m;
  m.point_id = "0123456789ab";
  m.point_name = "schema";
  return m;
}

template <class Rec>
std::vector<std::string> column_names() {
  std::vector<std::string> names;
  sb::for_each_field<Rec>([&](const auto& f) { names.emplace_back(f.name); });
  return names;
}

// Calls f(tag) for each record type (tag: a null Rec*).
template <class F>
void each_record(F&& f) {
  sb::for_each_record(sb::RecordTypes{}, f);
}

std::string read_string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "<missing>";
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}

std::vector<std::string> read_strings_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return {"<missing>"};
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t space = H5Aget_space(a);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  std::vector<char*> p(n, nullptr);
  H5Aread(a, t, p.data());
  std::vector<std::string> out;
  for (char* c : p) out.emplace_back(c ? c : "");
  H5Dvlen_reclaim(t, space, H5P_DEFAULT, p.data());
  H5Tclose(t);
  H5Sclose(space);
  H5Aclose(a);
  return out;
}

template <class Rec>
void expect_same_rows(const std::vector<Rec>& got, const std::vector<Rec>& want) {
  const char* g = sb::Table<Rec>::group;
  ASSERT_EQ(got.size(), want.size()) << g;
  for (size_t i = 0; i < got.size(); ++i)
    sb::for_each_field<Rec>([&](const auto& f) {
      EXPECT_EQ(got[i].*f.member, want[i].*f.member) << g << "/" << f.name << " row " << i;
    });
}

}  // namespace

// Names are unique per record; every field has a doc; a name's suffix and its unit agree
// (records.h's convention: _s seconds, _bytes bytes, _per_s a rate).
TEST(TraceSchema, EachColumnIsNamedOnceWithItsUnitAndDoc) {
  each_record([](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    std::set<std::string> seen;
    sb::for_each_field<Rec>([&](const auto& f) {
      const std::string name = f.name, unit = f.unit, where = std::string(sb::Table<Rec>::group) + "/" + name;
      EXPECT_TRUE(seen.insert(name).second) << where << " twice";
      EXPECT_FALSE(std::string(f.doc).empty()) << where;
      auto ends = [&](const std::string& suffix) {
        return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (ends("_per_s")) EXPECT_EQ(unit, name.substr(0, name.size() - 6) + "/s") << where;
      else if (ends("_s")) EXPECT_EQ(unit, "s") << where;
      else if (ends("_bytes")) EXPECT_EQ(unit, "bytes") << where;
      else EXPECT_EQ(unit, "") << where;
    });
    EXPECT_FALSE(std::string(sb::Table<Rec>::doc).empty());
  });
}

TEST(TraceSchema, JsonListsEveryGroupAndColumnInFileOrder) {
  const auto doc = nlohmann::json::parse(sb::schema_json());
  EXPECT_EQ(doc.at("schema_version"), sb::kSchemaVersion);
  std::vector<std::string> groups;
  for (const auto& g : doc.at("groups")) groups.push_back(g.at("name"));
  EXPECT_EQ(groups, (std::vector<std::string>{"steps", "ranks", "comm", "queries", "requests",
                                             "serve_steps", "routing"}));
  size_t i = 0;
  each_record([&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    const auto& g = doc.at("groups").at(i++);
    EXPECT_EQ(g.at("from_every_rank"), sb::Table<Rec>::from_every_rank);
    std::vector<std::string> names;
    for (const auto& c : g.at("columns")) names.push_back(c.at("name"));
    EXPECT_EQ(names, column_names<Rec>());
  });
  // The types the file stores, in numpy's names.
  const auto& steps = doc.at("groups").at(0).at("columns");
  EXPECT_EQ(steps.at(0).at("dtype"), "int64");    // step
  EXPECT_EQ(steps.at(1).at("dtype"), "int8");     // warmup: bool
  EXPECT_EQ(steps.at(2).at("dtype"), "float64");  // wall_s
  EXPECT_EQ(doc.at("groups").at(1).at("columns").at(1).at("dtype"), "string");  // host
  EXPECT_EQ(doc.at("groups").at(1).at("columns").at(2).at("dtype"), "uint64");  // param_bytes
  EXPECT_EQ(doc.at("groups").at(2).at("columns").at(1).at("dtype"), "int32");   // rank
}

TEST(TraceSchema, MarkdownHasARowPerColumn) {
  const std::string md = sb::schema_markdown();
  each_record([&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    EXPECT_NE(md.find(fmt::format("`/{}`: ", sb::Table<Rec>::group)), std::string::npos);
    sb::for_each_field<Rec>([&](const auto& f) {
      const std::string row = fmt::format("| `{}` | {} | {} | {} |", f.name,
                                          sb::column_type_name(f.type), f.unit, f.doc);
      EXPECT_NE(md.find(row), std::string::npos) << row;
    });
  });
}

// The root attributes' table follows the columns' conventions: each named once, with a doc,
// and a unit that agrees with the name's suffix (elapsed_s: s).
TEST(TraceSchema, EachRootAttributeIsNamedOnceWithItsUnitAndDoc) {
  std::set<std::string> seen;
  sb::for_each_field<sb::ResultMeta>([&](const auto& a) {
    const std::string name = a.name, unit = a.unit;
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
    EXPECT_FALSE(std::string(a.doc).empty()) << name;
    const bool seconds = name.size() > 2 && name.compare(name.size() - 2, 2, "_s") == 0;
    EXPECT_EQ(unit, seconds ? "s" : "") << name;
  });
  EXPECT_TRUE(seen.count("schema_version") && seen.count("status") && seen.count("elapsed_s"));
}

TEST(TraceSchema, JsonListsEveryRootAttributeWithTypeDefaultAndPresence) {
  const auto doc = nlohmann::json::parse(sb::schema_json());
  std::vector<std::string> names;
  sb::for_each_field<sb::ResultMeta>([&](const auto& a) { names.push_back(a.name); });
  std::vector<std::string> listed;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& a : doc.at("attributes")) {
    listed.push_back(a.at("name"));
    by_name[a.at("name")] = a;
  }
  EXPECT_EQ(listed, names);
  EXPECT_EQ(by_name.at("schema_version"),
            (nlohmann::json{{"name", "schema_version"}, {"dtype", "int64"}, {"unit", ""},
                            {"always", true}, {"default", sb::kSchemaVersion},
                            {"doc", by_name.at("schema_version").at("doc")}}));
  EXPECT_EQ(by_name.at("status").at("default"), "done");
  EXPECT_EQ(by_name.at("elapsed_s").at("dtype"), "float64");
  EXPECT_EQ(by_name.at("elapsed_s").at("unit"), "s");
  EXPECT_EQ(by_name.at("point_index").at("default"), -1);
  // Files from before the machine was recorded lack it: it reads as "{}".
  EXPECT_EQ(by_name.at("machine").at("always"), false);
  EXPECT_EQ(by_name.at("machine").at("default"), "{}");
  EXPECT_EQ(by_name.at("hosts").at("always"), true);
}

TEST(TraceSchema, MarkdownHasARowPerRootAttributeAndEachPartAlone) {
  const std::string attrs = sb::schema_markdown(sb::SchemaPart::attributes);
  const std::string cols = sb::schema_markdown(sb::SchemaPart::columns);
  EXPECT_EQ(sb::schema_markdown(), attrs + "\n" + cols);
  EXPECT_EQ(attrs.rfind("| attribute | type | unit | meaning |\n|---|---|---|---|\n", 0), 0u);
  EXPECT_NE(attrs.find("| `elapsed_s` | float64 | s | wall time of the run |\n"), std::string::npos)
      << attrs;
  EXPECT_NE(attrs.find(" (absent in files written before it was added: read as `{}`) |"),
            std::string::npos) << attrs;
  EXPECT_EQ(cols.find("| attribute |"), std::string::npos);
  EXPECT_EQ(attrs.find("`/steps`"), std::string::npos);
  sb::for_each_field<sb::ResultMeta>([&](const auto& a) {
    EXPECT_NE(attrs.find(fmt::format("| `{}` | {} |", a.name, sb::column_type_name(a.type))),
              std::string::npos) << a.name;
  });
}

TEST(TraceSchema, PythonListsEveryRootAttribute) {
  const std::string py = sb::schema_python();
  EXPECT_NE(py.find("\nSCHEMA_VERSION = 1\n"), std::string::npos) << py;
  EXPECT_NE(py.find(R"(    RootAttribute("status", "string", "", True, "done",)"), std::string::npos)
      << py;
  EXPECT_NE(py.find(R"(    RootAttribute("machine", "string", "", False, "{}",)"), std::string::npos)
      << py;
  EXPECT_NE(py.find(R"(    RootAttribute("elapsed_s", "float64", "s", True, 0.0,)"),
            std::string::npos) << py;
  // Quotes in a doc are escaped, so the module stays valid Python.
  EXPECT_NE(py.find(R"(the baseline point's id (\"\" if none))"), std::string::npos) << py;
}

TEST(TraceHdf5Tables, ColumnsCarryUnitAndDocAndGroupsListTheirColumns) {
  const std::string dir = temp_dir("attrs");
  sb::write_result_hdf5(dir + "/p.h5", meta(), sample_recorder());
  const hid_t f = H5Fopen((dir + "/p.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  each_record([&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    const hid_t g = H5Gopen2(f, sb::Table<Rec>::group, H5P_DEFAULT);
    ASSERT_GE(g, 0) << sb::Table<Rec>::group;
    EXPECT_EQ(read_string_attr(g, "doc"), sb::Table<Rec>::doc);
    EXPECT_EQ(read_strings_attr(g, "columns"), column_names<Rec>());
    sb::for_each_field<Rec>([&](const auto& fl) {
      const hid_t ds = H5Dopen2(g, fl.name, H5P_DEFAULT);
      ASSERT_GE(ds, 0) << fl.name;
      EXPECT_EQ(read_string_attr(ds, "unit"), fl.unit) << fl.name;
      EXPECT_EQ(read_string_attr(ds, "doc"), fl.doc) << fl.name;
      H5Dclose(ds);
    });
    H5Gclose(g);
  });
  H5Fclose(f);
  fs::remove_all(dir);
}

TEST(TraceHdf5Tables, RecordsReadBackEqualWhatWasWritten) {
  const std::string dir = temp_dir("roundtrip");
  const sb::Recorder rec = sample_recorder();
  sb::write_result_hdf5(dir + "/p.h5", meta(), rec);
  const sb::Recorder back = sb::read_result_records(dir + "/p.h5");
  expect_same_rows(back.steps(), rec.steps());
  expect_same_rows(back.memories(), rec.memories());
  expect_same_rows(back.comm_events(), rec.comm_events());
  expect_same_rows(back.queries(), rec.queries());
  EXPECT_EQ(back.scalars(), rec.scalars());
  EXPECT_EQ(back.all_series(), rec.all_series());
  EXPECT_EQ(back.texts(), rec.texts());
  // Empty tables read back empty.
  sb::write_result_hdf5(dir + "/e.h5", meta(), sb::Recorder{});
  const sb::Recorder empty = sb::read_result_records(dir + "/e.h5");
  EXPECT_TRUE(empty.steps().empty() && empty.comm_events().empty() && empty.queries().empty());
  fs::remove_all(dir);
}

// String columns are declared UTF-8 like the attributes: stray bytes become '?'.
TEST(TraceHdf5Tables, StringColumnsAreWrittenAsValidUtf8) {
  const std::string dir = temp_dir("utf8");
  sb::Recorder rec;
  rec.memory({0, "node\xff-\xc2\xb5", 1, 2, 3, 4, 5, 6, 7});
  sb::write_result_hdf5(dir + "/p.h5", meta(), rec);
  EXPECT_EQ(sb::read_result_records(dir + "/p.h5").memories().at(0).host, "node?-\xc2\xb5");
  fs::remove_all(dir);
}

TEST(TraceHdf5Tables, AMissingColumnIsNamed) {
  const std::string dir = temp_dir("missing");
  sb::write_result_hdf5(dir + "/p.h5", meta(), sample_recorder());
  const hid_t f = H5Fopen((dir + "/p.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Ldelete(f, "comm/wire_bytes", H5P_DEFAULT), 0);
  H5Fclose(f);
  try {
    sb::read_result_records(dir + "/p.h5");
    FAIL() << "expected sb::Error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no column /comm/wire_bytes"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// Recorder::gather's packing, generated from the tables, end to end: the probe task at 2
// ranks records a comm event per step and a memory record on every rank; rank 0's file holds
// both ranks' records, every field intact.
TEST(TraceGather, EveryRanksRecordsReachTheFile) {
  const std::string dir = temp_dir("gather");
  const std::string suite = dir + "/gather.toml";
  std::ofstream(suite) << "[suite]\nname = \"gather\"\n[base]\ntask = \"probe\"\nworld = 2\n"
                          "threads = 1\nsteps = 3\nwarmup = 1\n\"probe.elements\" = 64\n";
  const std::string cmd = fmt::format(
      "{} --allow-run-as-root --oversubscribe -np 2 {} run {} --point 0 --results {} > {}/log "
      "2>&1", SB_MPIEXEC, SB_PROBE_EXE, suite, dir + "/results", dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(dir + "/log").rdbuf();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir + "/results/points"))
    if (e.path().extension() == ".h5") files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const sb::Recorder rec = sb::read_result_records(files[0].string());

  ASSERT_EQ(rec.memories().size(), 2u);
  for (std::int32_t r = 0; r < 2; ++r) {
    const sb::RankMemory& m = rec.memories()[static_cast<size_t>(r)];  // rank order
    EXPECT_EQ(m.rank, r);
    EXPECT_FALSE(m.host.empty());
    EXPECT_EQ(m.param_bytes, 64u * sizeof(double));
    EXPECT_GT(m.peak_rss_bytes, 0u);
  }
  ASSERT_EQ(rec.comm_events().size(), 6u);  // 3 steps x 2 ranks, rank 0's first
  for (size_t i = 0; i < 6; ++i) {
    const sb::CommEvent& e = rec.comm_events()[i];
    EXPECT_EQ(e.rank, i < 3 ? 0 : 1) << i;
    EXPECT_EQ(e.step, static_cast<std::int64_t>(i % 3)) << i;
    EXPECT_EQ(e.op, "all_reduce");
    EXPECT_EQ(e.group, "world");
    EXPECT_EQ(e.kind, "other");
    EXPECT_EQ(e.logical_bytes, 64u * sizeof(double));
    EXPECT_EQ(e.wire_bytes, 64u * sizeof(double));
    EXPECT_GE(e.duration_s, 0.0);
  }
  EXPECT_EQ(rec.steps().size(), 3u);  // rank 0's own
  fs::remove_all(dir);
}
