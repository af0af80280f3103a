// Point: typed key -> value storage with source positions, and its canonical JSON form
// (the identity of a point: hashed into its id and parsed back on every rank).
#include "harness/spec/point.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"

namespace sb {
namespace {
const char* type_name(const Value& v) {
  switch (v.index()) {
    case 0: return "bool";
    case 1: return "int";
    case 2: return "float";
    default: return "string";
  }
}
}  // namespace

std::string SourcePos::str() const {
  if (line == 0) return "(default)";
  return fmt::format("{}:{}:{}", file, line, column);
}

std::string value_to_string(const Value& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    // Shortest form that round-trips, and visibly a float ("600.0", not "600").
    std::string s = fmt::format("{}", *d);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // n: nan, inf
    return s;
  }
  return std::get<std::string>(v);
}

void Point::set(const std::string& key, Value v, SourcePos pos) {
  values_[key] = std::move(v);
  cache_.reset();  // parsed sections read the old value
  // Only positions in the file are kept: most of a point's ~100 keys are defaults, and a
  // suite may expand to thousands of points.
  if (pos.line > 0) pos_[key] = std::move(pos);
  else pos_.erase(key);
}

const Value& Point::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end())
    SB_FAIL("point '{}' has no key '{}'; is the key registered (see `shardbench keys`) and "
            "the workload that registers it linked in?", name, key);
  return it->second;
}

std::int64_t Point::get_int(const std::string& key) const {
  const Value& v = get(key);
  if (auto* i = std::get_if<std::int64_t>(&v)) return *i;
  SB_FAIL("point '{}': key '{}' is a {} ({}), not an int", name, key, type_name(v),
          value_to_string(v));
}

double Point::get_double(const std::string& key) const {
  const Value& v = get(key);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v)) return double(*i);
  SB_FAIL("point '{}': key '{}' is a {} ({}), not a number", name, key, type_name(v),
          value_to_string(v));
}

bool Point::get_bool(const std::string& key) const {
  const Value& v = get(key);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  SB_FAIL("point '{}': key '{}' is a {} ({}), not a bool", name, key, type_name(v),
          value_to_string(v));
}

const std::string& Point::get_string(const std::string& key) const {
  const Value& v = get(key);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  SB_FAIL("point '{}': key '{}' is a {} ({}), not a string", name, key, type_name(v),
          value_to_string(v));
}

SourcePos Point::where(const std::string& key) const {
  auto it = pos_.find(key);
  return it == pos_.end() ? SourcePos{} : it->second;
}

std::string Point::key_at(const std::string& key) const {
  const SourcePos pos = where(key);
  if (pos.line > 0) return fmt::format("{}: {}", pos.str(), key);
  return file.empty() ? fmt::format("{} (default)", key) : fmt::format("{}: {} (default)", file, key);
}

std::string Point::canonical() const {
  // nlohmann::json objects are std::maps: keys come out sorted. Doubles print in the
  // shortest form that parses back to the same bits and always with a '.' or exponent
  // ("600.0"), so a Float stays a float through the round trip.
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : values_) {
    std::visit([&](const auto& x) { j[k] = x; }, v);
  }
  return j.dump();
}

std::string Point::disagreement(const std::vector<std::string>& canonicals) {
  for (std::size_t r = 1; r < canonicals.size(); ++r) {
    if (canonicals[r] == canonicals[0]) continue;
    const auto a = nlohmann::json::parse(canonicals[0]), b = nlohmann::json::parse(canonicals[r]);
    const auto shown = [](const nlohmann::json& j, const std::string& k) {
      return j.contains(k) ? j.at(k).dump() : std::string("unset");
    };
    std::vector<std::string> keys;
    for (const auto& [k, v] : a.items())
      if (!b.contains(k) || b.at(k) != v) keys.push_back(k);
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) keys.push_back(k);
    std::vector<std::string> out;
    for (const auto& k : keys)
      out.push_back(fmt::format("{}: {} on rank 0, {} on rank {}", k, shown(a, k), shown(b, k), r));
    return fmt::format("{}", fmt::join(out, "; "));
  }
  return "";
}

Point Point::from_canonical(const std::string& json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    SB_FAIL("canonical point config is not valid JSON ({}); it should come from "
            "Point::canonical()", e.what());
  }
  SB_CHECK(j.is_object(), "canonical point config must be a JSON object, got: {}", json);
  Point p;
  for (const auto& [k, v] : j.items()) {
    if (v.is_boolean()) p.set(k, v.get<bool>());
    else if (v.is_number_integer()) p.set(k, v.get<std::int64_t>());
    else if (v.is_number_float()) p.set(k, v.get<double>());
    else if (v.is_string()) p.set(k, v.get<std::string>());
    else SB_FAIL("canonical point config: key '{}' has a {} value; only bool, int, float and "
                 "string values are allowed", k, v.type_name());
  }
  return p;
}

}  // namespace sb
