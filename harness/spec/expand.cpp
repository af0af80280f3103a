// Expansion of a SuiteSpec into run points, and the per-point checks (ranges, duplicates,
// baselines, references, registered validators). Deterministic: the order is the odometer
// order of the dimensions in file order, the id a hash of the canonical config.
#include "harness/spec/expand.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "harness/core/sha256.h"
#include "harness/workload.h"

namespace sb {

void Diagnostics::add(const SourcePos& pos, const std::string& key, const std::string& message) {
  // Defaults have no line: blame the file, so the user knows where to add the key.
  // A registered key without a position was left at its default: say so.
  std::string text = pos.line > 0  ? fmt::format("{}: {}: {}", pos.str(), key, message)
                     : find_key(key) ? fmt::format("{}: {} (default): {}", file_, key, message)
                                     : fmt::format("{}: {}: {}", file_, key, message);
  items_.push_back({pos.line, pos.column, std::move(text)});
}

std::vector<std::string> Diagnostics::lines() const {
  std::vector<Item> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Item& a, const Item& b) {
    return std::make_tuple(a.line == 0, a.line, a.column) <
           std::make_tuple(b.line == 0, b.line, b.column);
  });
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& it : sorted)
    if (seen.insert(it.text).second) out.push_back(it.text);
  return out;
}

bool Matcher::matches(const Point& p) const {
  for (const auto& [key, values] : match) {
    if (!p.has(key)) return false;
    if (std::find(values.begin(), values.end(), p.get(key)) == values.end()) return false;
  }
  return true;
}

std::string name_part(const std::string& key, const Value& v) {
  const KeySpec* spec = find_key(key);
  if (spec && spec->type == KeyType::Name) return value_to_string(v);
  return fmt::format("{}={}", key, value_to_string(v));
}

namespace {

// The base keys' ranges. Workload keys are checked by the workloads' registered validators.
void check_ranges(const Point& p, std::vector<Diagnostic>& out) {
  auto i = [&](const char* k) { return p.get_int(k); };
  if (i("world") < 1)
    out.push_back({"world", fmt::format("world must be >= 1, got {}", i("world"))});
  if (i("batch") < 1)
    out.push_back({"batch", fmt::format("batch must be >= 1, got {}", i("batch"))});
  else if (i("world") >= 1 && i("batch") % i("world") != 0)
    out.push_back({"batch", fmt::format("batch {} is not divisible by world {}: batch is the "
                                        "global batch per step; make it a multiple of {}",
                                        i("batch"), i("world"), i("world"))});
  if (i("seq") < 1) out.push_back({"seq", fmt::format("seq must be >= 1, got {}", i("seq"))});
  if (i("threads") < 0)
    out.push_back({"threads", fmt::format("threads must be >= 0 (0 = cores / ranks on the "
                                          "node), got {}", i("threads"))});
  if (i("steps") < 1)
    out.push_back({"steps", fmt::format("steps must be >= 1, got {}", i("steps"))});
  if (i("warmup") < 0 || (i("steps") >= 1 && i("warmup") >= i("steps")))
    out.push_back({"warmup", fmt::format("warmup must be >= 0 and < steps ({}), got {}: warm-up "
                                         "steps are excluded from statistics, so at least one "
                                         "measured step must remain", i("steps"), i("warmup"))});
  if (i("repetitions") < 1)
    out.push_back({"repetitions",
                   fmt::format("repetitions must be >= 1, got {}", i("repetitions"))});
  if (!(p.get_double("time_limit") > 0))
    out.push_back({"time_limit", fmt::format("time_limit must be > 0 seconds, got {}",
                                             value_to_string(p.get("time_limit")))});
}

// One point of the product, before repetitions.
struct Candidate {
  Point point;
  std::vector<std::string> varied;  // keys in dimension order, for duplicate messages
};

std::string describe_changes(const std::vector<std::pair<std::string, Located>>& repl) {
  std::string s;
  for (const auto& [k, v] : repl) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} = {}", k, value_to_string(v.value));
  }
  return s;
}

}  // namespace

std::vector<Point> expand(const SuiteSpec& spec, Diagnostics& diags) {
  // 1. Odometer over the dimensions; the first dimension varies slowest.
  std::vector<Candidate> cands;
  std::vector<std::size_t> digit(spec.dims.size(), 0);
  bool done = std::any_of(spec.dims.begin(), spec.dims.end(),
                          [](const Dimension& d) { return d.rows.empty(); });
  while (!done) {
    Candidate c{spec.base, {}};
    std::vector<std::string> parts;
    for (std::size_t d = 0; d < spec.dims.size(); ++d) {
      const Dimension& dim = spec.dims[d];
      for (std::size_t k = 0; k < dim.keys.size(); ++k) {
        const Located& v = dim.rows[digit[d]][k];
        c.point.set(dim.keys[k], v.value, v.pos);
        c.varied.push_back(dim.keys[k]);
        parts.push_back(name_part(dim.keys[k], v.value));
      }
    }
    std::string name;
    for (const auto& part : parts) name += (name.empty() ? "" : "/") + part;
    c.point.name = name.empty() ? spec.name : name;
    c.point.suite = spec.name;
    cands.push_back(std::move(c));
    // Advance the last digit fastest.
    std::size_t d = spec.dims.size();
    for (;;) {
      if (d == 0) { done = true; break; }
      --d;
      if (++digit[d] < spec.dims[d].rows.size()) break;
      digit[d] = 0;
    }
  }

  // 2. Excludes; one that matches nothing is almost certainly a typo in the suite.
  std::vector<bool> used(spec.excludes.size(), false);
  std::vector<Candidate> kept;
  for (auto& c : cands) {
    bool drop = false;
    for (std::size_t e = 0; e < spec.excludes.size(); ++e)
      if (spec.excludes[e].matches(c.point)) drop = used[e] = true;
    if (!drop) kept.push_back(std::move(c));
  }
  for (std::size_t e = 0; e < spec.excludes.size(); ++e)
    if (!used[e])
      diags.add(spec.excludes[e].pos, spec.excludes[e].what,
                "matches no point; check its keys and values against [base], [axes] and "
                "[[zip]], or remove it");

  // 3. Duplicates: the same configuration twice (a value repeated in an axis or zip).
  std::unordered_map<std::string, std::size_t> by_config;
  std::vector<Point> points;
  for (auto& c : kept) {
    std::string canon = c.point.canonical();
    auto [it, fresh] = by_config.emplace(canon, points.size());
    if (fresh) {
      points.push_back(std::move(c.point));
      continue;
    }
    const Point& first = points[it->second];
    std::string key = c.varied.empty() ? "suite" : c.varied.front();
    for (const auto& k : c.varied)
      if (c.point.where(k).str() != first.where(k).str()) { key = k; break; }
    diags.add(c.point.where(key), key,
              fmt::format("duplicate point '{}': the same configuration as point {} ('{}'); "
                          "remove the repeated value", c.point.name, it->second, first.name));
  }

  // 4. Baselines (by position in `points`; turned into ids after repetitions).
  std::vector<long> baseline_of(points.size(), -1);
  if (!spec.baseline.empty()) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      Point b = points[i];
      for (const auto& [k, v] : spec.baseline) b.set(k, v.value, v.pos);
      std::string canon = b.canonical();
      if (canon == points[i].canonical()) continue;  // the point is its own baseline
      auto it = by_config.find(canon);
      if (it != by_config.end()) {
        baseline_of[i] = long(it->second);
      } else {
        const auto& [k0, v0] = spec.baseline.front();
        diags.add(v0.pos, k0,
                  fmt::format("point '{}' has no baseline: the point with {} is not in the "
                              "suite (not in the axes, or excluded); add it or change "
                              "[baseline]", points[i].name, describe_changes(spec.baseline)));
      }
    }
  }

  // 5. Reference figures (later entries override earlier ones for the same figure).
  for (const auto& r : spec.references) {
    bool any = false;
    for (auto& p : points)
      if (r.matches(p)) {
        any = true;
        for (const auto& [fig, v] : r.figures) p.reference[fig] = v;
      }
    if (!any)
      diags.add(r.pos, r.what, "matches no point; check its match keys and values against "
                               "[base], [axes] and [[zip]]");
  }

  // 6. Ranges of the base keys, then the workloads' validators, blamed where the key was set.
  for (const auto& p : points) {
    std::vector<Diagnostic> found;
    check_ranges(p, found);
    for (const auto& v : registered_validators()) {
      try {
        v(p, found);
      } catch (const std::exception& e) {
        // A validator that throws is a workload bug; report it with the rest, not instead.
        found.push_back({"validator", fmt::format("a registered validator failed on point '{}': "
                                                  "{}", p.name, e.what())});
      }
    }
    for (const auto& d : found) diags.add(p.where(d.key), d.key, d.message);
  }
  if (!diags.empty()) return {};

  // 7. Repetitions (fastest), indices and ids.
  std::vector<Point> out;
  std::vector<std::size_t> first_of(points.size());  // index in `out` of repetition 0
  for (std::size_t i = 0; i < points.size(); ++i) {
    first_of[i] = out.size();
    std::int64_t reps = points[i].get_int("repetitions");
    for (std::int64_t r = 0; r < reps; ++r) {
      Point q = points[i];
      q.set("repetition", r, points[i].where("repetitions"));
      if (reps > 1) q.name += fmt::format("/r{}", r);
      q.index = int(out.size());
      q.id = sha256_hex(q.canonical()).substr(0, 12);
      out.push_back(std::move(q));
    }
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (baseline_of[i] < 0) continue;
    std::size_t b = first_of[std::size_t(baseline_of[i])];
    std::int64_t reps = points[i].get_int("repetitions");
    std::int64_t breps = points[std::size_t(baseline_of[i])].get_int("repetitions");
    for (std::int64_t r = 0; r < reps; ++r)  // repetition r is compared with repetition r
      out[first_of[i] + std::size_t(r)].baseline_id = out[b + std::size_t(std::min(r, breps - 1))].id;
  }
  return out;
}

}  // namespace sb
