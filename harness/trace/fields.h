// The machinery of the trace schema: each record in harness/trace/records.h has a Table, a
// tuple of Field entries that names every member once, with its column type, unit and doc.
// Everything per field is generated from those tables by visiting them: MPI pack/unpack
// (recorder.cpp), the HDF5 columns (hdf5_table.cpp), `shardbench schema` (schema.cpp) and
// through it docs/HDF5_SCHEMA.md, the analysis fixtures (tests/analysis).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace sb {

// Column types of the result file, named as numpy and h5py name them (`schema --json`).
enum class ColumnType { int8, int32, int64, uint64, float64, string };

constexpr const char* column_type_name(ColumnType t) {
  switch (t) {
    case ColumnType::int8: return "int8";
    case ColumnType::int32: return "int32";
    case ColumnType::int64: return "int64";
    case ColumnType::uint64: return "uint64";
    case ColumnType::float64: return "float64";
    case ColumnType::string: return "string";
  }
  return "?";
}

template <class>
inline constexpr bool kUnsupportedMember = false;

// The column type follows from the member's C++ type, so a table cannot state it wrongly.
template <class M>
constexpr ColumnType column_type_of() {
  if constexpr (std::is_same_v<M, bool>) return ColumnType::int8;  // HDF5 has no bool: 1 = true
  else if constexpr (std::is_same_v<M, std::int32_t>) return ColumnType::int32;
  else if constexpr (std::is_same_v<M, std::int64_t>) return ColumnType::int64;
  else if constexpr (std::is_same_v<M, std::uint64_t>) return ColumnType::uint64;
  else if constexpr (std::is_same_v<M, double>) return ColumnType::float64;
  else if constexpr (std::is_same_v<M, std::string>) return ColumnType::string;
  else static_assert(kUnsupportedMember<M>, "a record member of a type with no column type");
}

template <class Rec, class M>
struct Field {
  using Record = Rec;
  using Member = M;
  const char* name;  // the HDF5 dataset's name
  M Rec::*member;
  const char* unit;  // "s", "bytes", "tokens/s", ...; "" for counts, flags, labels, ratios
  const char* doc;   // one line
  static constexpr ColumnType type = column_type_of<M>();
};

template <class Rec, class M>
constexpr Field<Rec, M> field(const char* name, M Rec::*member, const char* unit,
                              const char* doc) {
  return {name, member, unit, doc};
}

// Specialized beside each record: group (HDF5 group name), doc, from_every_rank (gathered
// from every rank to rank 0, else rank 0's own) and fields (a tuple of Field).
template <class Rec>
struct Table;

namespace detail {
// Counts an aggregate's members: the largest N for which Rec{x1, ..., xN} compiles, where
// each x converts to anything. Used only in unevaluated contexts, so never defined.
struct AnyMember {
  template <class T>
  constexpr operator T() const;
};
template <class T, class Seq, class = void>
struct BraceInitializable : std::false_type {};
template <class T, std::size_t... I>
struct BraceInitializable<T, std::index_sequence<I...>,
                          std::void_t<decltype(T{(void(I), AnyMember{})...})>> : std::true_type {};
template <class T, std::size_t N = 0>
constexpr std::size_t member_count() {
  if constexpr (BraceInitializable<T, std::make_index_sequence<N + 1>>::value)
    return member_count<T, N + 1>();
  else
    return N;
}
}  // namespace detail

// Calls f(field) for each field of Rec's table, in table (= column) order.
template <class Rec, class F>
void for_each_field(F&& f) {
  constexpr const auto& fields = Table<Rec>::fields;
  // A member added to the struct but not to its table would silently never be gathered or
  // written: refuse to compile instead.
  static_assert(detail::member_count<Rec>() == std::tuple_size_v<std::decay_t<decltype(fields)>>,
                "a record's Table must list every member of the record exactly once");
  std::apply([&f](const auto&... fl) { (f(fl), ...); }, fields);
}

template <class... Rec>
struct RecordList {};

// Calls f(static_cast<Rec*>(nullptr)) for each record type of the list, in order; the
// pointer carries the type (a generic lambda takes `auto* tag`).
template <class... Rec, class F>
void for_each_record(RecordList<Rec...>, F&& f) {
  (f(static_cast<Rec*>(nullptr)), ...);
}

}  // namespace sb
