// Test helper: writes the analysis fixture through the real C++ HDF5 writer
// (sb::write_result_hdf5). make_fixture.py describes the points as JSON; this program turns
// each into a ResultMeta + Recorder (attribute by attribute and record field by field through
// their Tables, harness/trace/result.h and records.h) and writes it, so the analysis tests
// read files that the harness itself produced. Usage: analysis_fixture_writer POINTS.json
#include <cstdio>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "harness/trace/recorder.h"
#include "harness/trace/result.h"

namespace {
using nlohmann::json;

// The root attributes through their Table (harness/trace/result.h): each one the JSON object
// gives, by its type; the others keep ResultMeta's default. A key that is no root attribute is
// an error, so a fixture cannot write an attribute the harness does not have.
sb::ResultMeta meta_of(const json& m) {
  sb::ResultMeta r;
  std::set<std::string> known;
  sb::for_each_field<sb::ResultMeta>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    known.insert(f.name);
    if (m.contains(f.name)) r.*f.member = m.at(f.name).template get<M>();
  });
  for (const auto& [k, v] : m.items())
    if (!known.count(k)) throw std::runtime_error("meta: '" + k + "' is no root attribute");
  return r;
}

// One record from its JSON object: a value per column of the record's Table (booleans as
// 0/1, the way the file stores them), so the fixture covers every field the writer writes.
template <class Rec>
Rec record_of(const json& j) {
  Rec r;
  sb::for_each_field<Rec>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    const json& v = j.at(f.name);
    if constexpr (std::is_same_v<M, bool>)
      r.*f.member = v.is_boolean() ? v.get<bool>() : v.get<int>() != 0;
    else
      r.*f.member = v.get<M>();
  });
  return r;
}

void record(const json& p, sb::Recorder& rec) {
  // Each record type under its HDF5 group's name ("steps", "ranks", "comm", "queries").
  sb::for_each_record(sb::RecordTypes{}, [&](auto* tag) {
    using Rec = std::remove_pointer_t<decltype(tag)>;
    for (const auto& j : p.at(sb::Table<Rec>::group)) rec.add(record_of<Rec>(j));
  });
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
