// The record tables of a result file, generated from the records' Tables
// (harness/trace/records.h): one group per record type, one 1-D column per field, each column
// carrying its `unit` and `doc`, each group its `doc` and `columns` (the field names in table
// order, so readers keep that order and can tell a missing column from one never written).
#include <type_traits>

#include "harness/trace/hdf5_io.h"
#include "harness/trace/result.h"

namespace sb::hdf5 {
namespace {

// How a column's values are held in memory: as the member, except bool (HDF5 has none).
template <class M>
using Stored = std::conditional_t<std::is_same_v<M, bool>, std::int8_t, M>;

hid_t mem_type(ColumnType t) {
  switch (t) {
    case ColumnType::int8: return H5T_NATIVE_INT8;
    case ColumnType::int32: return H5T_NATIVE_INT32;
    case ColumnType::int64: return H5T_NATIVE_INT64;
    case ColumnType::uint64: return H5T_NATIVE_UINT64;
    case ColumnType::float64: return H5T_NATIVE_DOUBLE;
    case ColumnType::string: break;  // variable-length: made per use (make_vlen_string)
  }
  SB_FAIL("no fixed-size HDF5 type for column type {}", column_type_name(t));
}

// Little-endian on disk whatever the writer's machine: the layout docs/HDF5_SCHEMA.md states.
hid_t file_type(ColumnType t) {
  switch (t) {
    case ColumnType::int8: return H5T_STD_I8LE;
    case ColumnType::int32: return H5T_STD_I32LE;
    case ColumnType::int64: return H5T_STD_I64LE;
    case ColumnType::uint64: return H5T_STD_U64LE;
    case ColumnType::float64: return H5T_IEEE_F64LE;
    case ColumnType::string: break;
  }
  SB_FAIL("no fixed-size HDF5 type for column type {}", column_type_name(t));
}

template <class Rec, class Fld>
void write_column(hid_t g, const std::vector<Rec>& rows, const Fld& f) {
  using M = typename Fld::Member;
  if constexpr (std::is_same_v<M, std::string>) {
    // Declared UTF-8 like every string of the file: a host name or label with stray bytes
    // must not make h5py fail on the whole column.
    std::vector<std::string> clean;
    clean.reserve(rows.size());
    for (const auto& r : rows) clean.push_back(valid_utf8(r.*f.member));
    std::vector<const char*> p;
    p.reserve(clean.size());
    for (const auto& s : clean) p.push_back(s.c_str());
    H5Id type(make_vlen_string(), H5Tclose, "create string type");
    column(g, f.name, type, type, p.data(), p.size());
  } else {
    std::vector<Stored<M>> v;
    v.reserve(rows.size());
    for (const auto& r : rows) v.push_back(static_cast<Stored<M>>(r.*f.member));
    column(g, f.name, mem_type(Fld::type), file_type(Fld::type), v.data(), v.size());
  }
  H5Id ds(H5Dopen2(g, f.name, H5P_DEFAULT), H5Dclose, std::string("open dataset ") + f.name);
  attr_string(ds, "unit", f.unit);
  attr_string(ds, "doc", f.doc);
}

template <class Rec>
void write_table(hid_t file, const std::vector<Rec>& rows) {
  H5Id g = group(file, Table<Rec>::group);
  std::vector<std::string> names;
  for_each_field<Rec>([&](const auto& f) { names.emplace_back(f.name); });
  attr_string(g, "doc", Table<Rec>::doc);
  attr_strings(g, "columns", names);
  for_each_field<Rec>([&](const auto& f) { write_column(g, rows, f); });
}

// Rows of the 1-D dataset `name` under `loc`; 0 when it does not exist.
size_t column_length(hid_t loc, const char* name) {
  if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) return 0;
  H5Id ds(H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose, std::string("open dataset ") + name);
  H5Id space(H5Dget_space(ds), H5Sclose, std::string("get dataspace of ") + name);
  hsize_t dims[1] = {0};
  h5(H5Sget_simple_extent_dims(space, dims, nullptr), std::string("get extent of ") + name);
  return static_cast<size_t>(dims[0]);
}

template <class Rec, class Fld>
void read_column(hid_t g, const Fld& f, std::vector<Rec>& rows) {
  const std::string path = std::string(Table<Rec>::group) + "/" + f.name;
  SB_CHECK(H5Lexists(g, f.name, H5P_DEFAULT) > 0,
           "result file has no column /{} (written by a shardbench that predates it?)", path);
  const size_t n = column_length(g, f.name);
  SB_CHECK(n == rows.size(), "column /{} has {} rows, the group's first column {}", path, n,
           rows.size());
  if (n == 0) return;
  H5Id ds(H5Dopen2(g, f.name, H5P_DEFAULT), H5Dclose, "open dataset /" + path);
  using M = typename Fld::Member;
  if constexpr (std::is_same_v<M, std::string>) {
    H5Id type(make_vlen_string(), H5Tclose, "create string type");
    H5Id space(H5Dget_space(ds), H5Sclose, "get dataspace of /" + path);
    std::vector<char*> p(n, nullptr);
    h5(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), "read /" + path);
    for (size_t i = 0; i < n; ++i) rows[i].*f.member = p[i] ? p[i] : "";
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, p.data());
  } else {
    std::vector<Stored<M>> v(n);
    h5(H5Dread(ds, mem_type(Fld::type), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
       "read /" + path);
    for (size_t i = 0; i < n; ++i) rows[i].*f.member = static_cast<M>(v[i]);
  }
}

template <class Rec>
void read_table(hid_t file, Recorder& rec) {
  const char* name = Table<Rec>::group;
  SB_CHECK(H5Lexists(file, name, H5P_DEFAULT) > 0, "result file has no group /{}", name);
  H5Id g(H5Gopen2(file, name, H5P_DEFAULT), H5Gclose, std::string("open group ") + name);
  std::vector<Rec> rows(column_length(g, std::get<0>(Table<Rec>::fields).name));
  for_each_field<Rec>([&](const auto& f) { read_column(g, f, rows); });
  for (const auto& r : rows) rec.add(r);
}

}  // namespace

void write_record_tables(hid_t file, const Recorder& rec) {
  for_each_record(RecordTypes{}, [&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    write_table(file, rec.rows<Rec>());
  });
}

void read_record_tables(hid_t file, Recorder& rec) {
  for_each_record(RecordTypes{}, [&](auto* tag) {
    read_table<std::remove_pointer_t<decltype(tag)>>(file, rec);
  });
}

std::int64_t step_rows(hid_t file) {
  const char* name = Table<StepRecord>::group;
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return 0;
  H5Id g(H5Gopen2(file, name, H5P_DEFAULT), H5Gclose, std::string("open group ") + name);
  return static_cast<std::int64_t>(column_length(g, std::get<0>(Table<StepRecord>::fields).name));
}

}  // namespace sb::hdf5

namespace sb {

Recorder read_result_records(const std::string& path) {
  hid_t f = -1;
  H5E_BEGIN_TRY { f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  hdf5::H5Id file(f, H5Fclose, "open " + path + " (not an HDF5 file?)");
  Recorder rec;
  hdf5::read_record_tables(file, rec);
  hdf5::read_named(file, rec);
  return rec;
}

}  // namespace sb
