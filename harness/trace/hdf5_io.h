// HDF5 building blocks of the result file (C API), shared by the sink (hdf5_sink.cpp: root
// attributes, named values, the file itself) and the record tables (hdf5_table.cpp: one
// group per record type, one column per field, generated from harness/trace/records.h).
// Internal to harness/trace.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/check.h"
#include "harness/trace/recorder.h"

namespace sb::hdf5 {

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

void h5(herr_t rc, const std::string& what);

// Variable-length UTF-8 string type (h5py reads it as str). The caller closes it.
hid_t make_vlen_string();

// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by '?'.
std::string valid_utf8(const std::string& s);

// A scalar string attribute, made valid UTF-8 first (the file declares its strings UTF-8).
void attr_string(hid_t obj, const std::string& name, const std::string& raw);
// A 1-D attribute of strings (the same type as attr_string's, one element per item).
void attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& items);

// One 1-D, chunked, extendible (maxshape unlimited) dataset of n elements at `data`.
void column(hid_t group, const std::string& name, hid_t mem_type, hid_t file_type,
            const void* data, size_t n);

H5Id group(hid_t parent, const char* name);

// The record tables (hdf5_table.cpp): one group per record type of RecordTypes.
void write_record_tables(hid_t file, const Recorder& rec);
void read_record_tables(hid_t file, Recorder& rec);
// The named values (/scalars, /series, /texts) into rec (hdf5_sink.cpp, their writer).
void read_named(hid_t file, Recorder& rec);
// Rows in /steps (the length of its first column); 0 when the group or column is absent.
std::int64_t step_rows(hid_t file);

}  // namespace sb::hdf5
