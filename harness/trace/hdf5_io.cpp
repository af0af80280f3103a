// HDF5 building blocks of the result file (see hdf5_io.h).
#include "harness/trace/hdf5_io.h"

#include <algorithm>

namespace sb::hdf5 {

void h5(herr_t rc, const std::string& what) { SB_CHECK(rc >= 0, "HDF5: {} failed", what); }

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

void attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& items) {
  std::vector<std::string> clean;
  clean.reserve(items.size());
  for (const auto& s : items) clean.push_back(valid_utf8(s));
  std::vector<const char*> p;
  p.reserve(clean.size());
  for (const auto& s : clean) p.push_back(s.c_str());
  const hsize_t dims[1] = {clean.size()};
  H5Id type(make_vlen_string(), H5Tclose, "create string type");
  H5Id space(H5Screate_simple(1, dims, nullptr), H5Sclose, "create dataspace for " + name);
  H5Id a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
         "create attribute " + name);
  if (!p.empty()) h5(H5Awrite(a, type, p.data()), "write attribute " + name);
}

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

H5Id group(hid_t parent, const char* name) {
  return H5Id(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
              std::string("create group ") + name);
}

}  // namespace sb::hdf5
