// Expansion of a SuiteSpec into run points, and the per-point checks (ranges, duplicates,
// baselines, references, registered validators). Deterministic: the order is the odometer
// order of the dimensions in file order, the id a hash of the canonical config.
#include "harness/spec/expand.h"
#include "harness/spec/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "harness/core/sha256.h"
#include "harness/workload.h"

namespace sb {

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

std::string Diagnostics::format(const SourcePos& pos, const std::string& key,
                                const std::string& message) const {
  // Defaults have no line: blame the file, so the user knows where to add the key.
  // A registered key without a position was left at its default: say so.
  const std::string file = printable(file_);
  return pos.line > 0    ? fmt::format("{}:{}:{}: {}: {}", file, pos.line, pos.column, key, message)
         : find_key(key) ? fmt::format("{}: {} (default): {}", file, key, message)
                         : fmt::format("{}: {}: {}", file, key, message);
}

void Diagnostics::add(const SourcePos& pos, const std::string& key, const std::string& message) {
  items_.push_back({pos.line, pos.column, format(pos, key, message)});
}

void Diagnostics::warn(const SourcePos& pos, const std::string& key, const std::string& message) {
  warnings_.push_back({pos.line, pos.column, format(pos, key, "warning: " + message)});
}

std::vector<std::string> Diagnostics::sorted(std::vector<Item> items) {
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::make_tuple(a.line == 0, a.line, a.column) <
           std::make_tuple(b.line == 0, b.line, b.column);
  });
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& it : items)
    if (seen.insert(it.text).second) out.push_back(it.text);
  return out;
}

std::vector<std::string> Diagnostics::lines() const { return sorted(items_); }
std::vector<std::string> Diagnostics::warning_lines() const { return sorted(warnings_); }

std::string range_problem(const KeySpec& ks, const Value& v) {
  if (ks.type == KeyType::Int) {
    const auto* i = std::get_if<std::int64_t>(&v);
    if (i && (*i < ks.min_int || *i > ks.max_int))
      return fmt::format("{} is out of range: {} must be between {} and {}", *i, ks.key,
                         ks.min_int, ks.max_int);
  } else if (ks.type == KeyType::Float) {
    const auto* d = std::get_if<double>(&v);
    if (d && !std::isfinite(*d))
      return fmt::format("{} is not a number a run can use: {} must be a finite number", 
                         value_to_string(v), ks.key);
    if (d && (*d < ks.min_float || *d > ks.max_float))
      return fmt::format("{} is out of range: {} must be between {} and {}", value_to_string(v),
                         ks.key, value_to_string(Value{ks.min_float}),
                         value_to_string(Value{ks.max_float}));
  }
  return "";
}

std::string range_text(const KeySpec& ks) {
  if (ks.type == KeyType::Int) return fmt::format("{} .. {}", ks.min_int, ks.max_int);
  if (ks.type != KeyType::Float) return "";
  if (ks.min_float == std::numeric_limits<double>::lowest() &&
      ks.max_float == std::numeric_limits<double>::max())
    return "finite";
  return fmt::format("{} .. {}", value_to_string(Value{ks.min_float}),
                     value_to_string(Value{ks.max_float}));
}

const std::vector<std::pair<std::string, std::string>>& reference_figures() {
  static const std::vector<std::pair<std::string, std::string>> figures{
      {"latency_ms", "inference latency per batch (ms)"},
      {"memory_gb", "memory footprint (GB)"},
      {"samples_per_s", "training throughput (samples/s)"},
      {"accuracy_delta_pct", "accuracy within this % of the baseline"},
      {"tflops_gain_pct", "TFLOPS per worker vs compression none (%)"},
      {"samples_gain_pct", "samples/s vs compression none (%)"},
      {"reached_baseline_loss", "1 if the final loss reached the none policy's, else 0"},
  };
  return figures;
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

// ---- Counting -------------------------------------------------------------------------
constexpr std::uint64_t kMany = std::uint64_t{1} << 62;  // counts saturate here
std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) { return std::min(a + b, kMany); }
std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b) {
  return a == 0 || b <= kMany / a ? std::min(a * b, kMany) : kMany;
}

// One bit per exclude: could it still drop the point, given the rows chosen so far?
using Alive = std::vector<bool>;

// Walks the dimensions (first slowest) with the set of excludes that still match; the count
// of a subtree depends only on (dimension, alive set), so it is memoized. Without any exclude
// alive the rest is a plain product, so the walk only goes where an exclude still matches.
struct Counter {
  std::vector<std::vector<Alive>> keep;             // [dim][row]: excludes this row satisfies
  std::vector<std::vector<std::uint64_t>> weight;   // [dim][row]: repetitions (1: not varied)
  std::vector<std::uint64_t> rest;                  // [dim]: points of dims d.. (no excludes)
  std::map<std::pair<std::size_t, Alive>, std::uint64_t> memo;
  std::size_t budget = 200000;  // row visits; beyond this the count is not exact
  bool exact = true;

  std::uint64_t walk(std::size_t d, const Alive& alive) {
    if (std::none_of(alive.begin(), alive.end(), [](bool b) { return b; })) return rest[d];
    if (d == keep.size()) return 0;  // an exclude matched every key: dropped
    auto key = std::make_pair(d, alive);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    std::uint64_t n = 0;
    for (std::size_t r = 0; r < keep[d].size(); ++r) {
      if (budget == 0) return exact = false, 0;
      --budget;
      Alive next(alive.size());
      for (std::size_t e = 0; e < alive.size(); ++e) next[e] = alive[e] && keep[d][r][e];
      n = add_sat(n, mul_sat(weight[d][r], walk(d + 1, next)));
    }
    memo.emplace(std::move(key), n);
    return n;
  }
};

bool row_matches(const Matcher& m, const Dimension& dim, std::size_t r) {
  for (const auto& [key, values] : m.match) {
    auto k = std::find(dim.keys.begin(), dim.keys.end(), key);
    if (k == dim.keys.end()) continue;  // not varied here
    const Value& v = dim.rows[r][std::size_t(k - dim.keys.begin())].value;
    if (std::find(values.begin(), values.end(), v) == values.end()) return false;
  }
  return true;
}

}  // namespace

PointCount count_points(const SuiteSpec& spec) {
  const std::size_t D = spec.dims.size(), E = spec.excludes.size();
  Counter c;
  c.keep.resize(D);
  c.weight.resize(D);
  c.rest.assign(D + 1, 1);
  bool reps_varied = false;
  for (std::size_t d = 0; d < D; ++d) {
    const Dimension& dim = spec.dims[d];
    auto reps = std::find(dim.keys.begin(), dim.keys.end(), "repetitions");
    reps_varied |= reps != dim.keys.end();
    for (std::size_t r = 0; r < dim.rows.size(); ++r) {
      Alive a(E);
      for (std::size_t e = 0; e < E; ++e) a[e] = row_matches(spec.excludes[e], dim, r);
      c.keep[d].push_back(std::move(a));
      const Value* w = reps == dim.keys.end() ? nullptr
                                              : &dim.rows[r][std::size_t(reps - dim.keys.begin())].value;
      const auto* wi = w ? std::get_if<std::int64_t>(w) : nullptr;
      c.weight[d].push_back(wi ? std::uint64_t(std::max<std::int64_t>(*wi, 0)) : 1);
    }
  }
  for (std::size_t d = D; d-- > 0;) {
    std::uint64_t sum = 0;
    for (auto w : c.weight[d]) sum = add_sat(sum, w);
    c.rest[d] = mul_sat(sum, c.rest[d + 1]);
  }
  // An exclude whose keys outside every dimension do not match the base never matches.
  Alive alive(E, true);
  for (std::size_t e = 0; e < E; ++e) {
    Matcher unvaried = spec.excludes[e];
    auto& m = unvaried.match;
    m.erase(std::remove_if(m.begin(), m.end(), [&](const auto& kv) {
              return std::any_of(spec.dims.begin(), spec.dims.end(), [&](const Dimension& dim) {
                return std::count(dim.keys.begin(), dim.keys.end(), kv.first) != 0;
              });
            }), m.end());
    alive[e] = unvaried.matches(spec.base);
  }
  const std::uint64_t base_reps =
      reps_varied ? 1 : std::uint64_t(std::max<std::int64_t>(spec.base.get_int("repetitions"), 0));
  PointCount out;
  std::uint64_t n = c.walk(0, alive);
  out.exact = c.exact;
  out.points = mul_sat(c.exact ? n : c.rest[0], base_reps);
  return out;
}

namespace {

// The refusal of a suite above kMaxSuitePoints: the count, its factors and how to split it.
void too_many_points(const SuiteSpec& spec, const PointCount& n, Diagnostics& diags) {
  std::string factors;
  std::size_t big = 0;  // the dimension with the most values: the one to split along
  for (std::size_t d = 0; d < spec.dims.size(); ++d) {
    const Dimension& dim = spec.dims[d];
    std::string keys;
    for (const auto& k : dim.keys) keys += (keys.empty() ? "" : "+") + k;
    factors += fmt::format("{}{} {}", factors.empty() ? "" : " x ", keys, dim.rows.size());
    if (dim.rows.size() > spec.dims[big].rows.size()) big = d;
  }
  std::int64_t reps = spec.base.get_int("repetitions");
  if (reps > 1) factors += fmt::format(" x repetitions {}", reps);
  std::string count = n.points >= kMany ? fmt::format("more than {}", kMany)
                                        : std::to_string(n.points);
  const Dimension* split = spec.dims.empty() ? nullptr : &spec.dims[big];
  diags.add(split ? split->pos : SourcePos{}, split ? split->keys.front() : "suite",
            fmt::format("the suite expands to {} points{} ({}), more than the limit of {} "
                        "(docs/SUITES.md): split it into suite files of at most {} points "
                        "each (e.g. one per group of values of {}), or drop values",
                        count, n.exact ? "" : " before [[exclude]]", factors, kMaxSuitePoints,
                        kMaxSuitePoints, split ? split->keys.front() : "an axis"));
}

// The base keys' cross-key rules. Single-key bounds are KeySpec ranges, checked when read.
void check_ranges(const Point& p, std::vector<Diagnostic>& out) {
  auto i = [&](const char* k) { return p.get_int(k); };
  // Ranks that differ only in tp, pp or sp read the same rows: the batch splits over the rest.
  const std::int64_t split = p.has("mesh.tp") ? i("mesh.tp") * i("mesh.pp") * i("mesh.sp") : 1;
  if (split > 1 && i("world") >= 1 && i("world") % split == 0) {
    const std::int64_t dp = i("world") / split;
    if (i("batch") % dp != 0)
      out.push_back({"batch", fmt::format("batch {} is not divisible by the {} data-parallel ranks "
                                          "(world {} / tp x pp x sp {}): batch is the global "
                                          "batch per step; make it a multiple of {}", i("batch"),
                                          dp, i("world"), split, dp)});
  } else if (i("world") >= 1 && i("batch") % i("world") != 0) {
    out.push_back({"batch", fmt::format("batch {} is not divisible by world {}: batch is the "
                                        "global batch per step; make it a multiple of {}",
                                        i("batch"), i("world"), i("world"))});
  }
  if (i("steps") >= 1 && i("warmup") >= i("steps"))
    out.push_back({"warmup", fmt::format("warmup must be >= 0 and < steps ({}), got {}: warm-up "
                                         "steps are excluded from statistics, so at least one "
                                         "measured step must remain", i("steps"), i("warmup"))});
  if (!(p.get_double("time_limit") > 0))
    out.push_back({"time_limit", fmt::format("time_limit must be > 0 seconds, got {}",
                                             value_to_string(p.get("time_limit")))});
}

std::string literal(const Value& v) {
  if (auto s = std::get_if<std::string>(&v)) return fmt::format("\"{}\"", *s);
  return value_to_string(v);
}

// A key the point's task does not read, set to anything but its default, would be ignored.
void check_task_keys(const Point& p, std::vector<Diagnostic>& out) {
  const std::string& task = p.get_string("task");
  for (const KeySpec& ks : registered_keys()) {
    if (ks.tasks.empty() || !p.has(ks.key) || p.get(ks.key) == ks.default_value) continue;
    if (std::find(ks.tasks.begin(), ks.tasks.end(), task) != ks.tasks.end()) continue;
    std::string tasks;
    for (std::size_t t = 0; t < ks.tasks.size(); ++t)
      tasks += (t == 0 ? "" : t + 1 == ks.tasks.size() ? " and " : ", ") + ks.tasks[t];
    out.push_back({ks.key, fmt::format("{} = {} would be ignored: only the {} task{} {}, and "
                                       "this point's task is {}; remove it, or set it only on "
                                       "{} points (vary it with task in a [[zip]], or "
                                       "[[exclude]] the combination)",
                                       ks.key, literal(p.get(ks.key)), tasks,
                                       ks.tasks.size() > 1 ? "s read" : " reads", ks.key,
                                       task, tasks)});
  }
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

// 1. Odometer over the dimensions (the first varies slowest), minus the excludes. An exclude
// that matches nothing is almost certainly a typo; excludes that drop everything leave nothing
// to run.
std::vector<Candidate> product(const SuiteSpec& spec, Diagnostics& diags) {
  std::vector<Candidate> kept;
  std::vector<bool> used(spec.excludes.size(), false);
  std::vector<std::size_t> digit(spec.dims.size(), 0);
  std::size_t total = 0;
  bool done = std::any_of(spec.dims.begin(), spec.dims.end(),
                          [](const Dimension& d) { return d.rows.empty(); });
  while (!done) {
    Candidate c{spec.base, {}};
    std::string name;
    for (std::size_t d = 0; d < spec.dims.size(); ++d) {
      const Dimension& dim = spec.dims[d];
      for (std::size_t k = 0; k < dim.keys.size(); ++k) {
        const Located& v = dim.rows[digit[d]][k];
        c.point.set(dim.keys[k], v.value, v.pos);
        c.varied.push_back(dim.keys[k]);
        name += (name.empty() ? "" : "/") + name_part(dim.keys[k], v.value);
      }
    }
    c.point.name = name.empty() ? spec.name : name;
    c.point.suite = spec.name;
    c.point.file = spec.file;
    canonicalize(c.point);
    ++total;
    bool drop = false;
    for (std::size_t e = 0; e < spec.excludes.size(); ++e)
      if (spec.excludes[e].matches(c.point)) drop = used[e] = true;
    if (!drop) kept.push_back(std::move(c));
    std::size_t d = spec.dims.size();  // advance the last digit fastest
    for (;;) {
      if (d == 0) { done = true; break; }
      --d;
      if (++digit[d] < spec.dims[d].rows.size()) break;
      digit[d] = 0;
    }
  }
  for (std::size_t e = 0; e < spec.excludes.size(); ++e)
    if (!used[e])
      diags.add(spec.excludes[e].pos, spec.excludes[e].what,
                "matches no point; check its keys and values against [base], [axes] and "
                "[[zip]], or remove it");
  if (kept.empty() && total > 0 && !spec.excludes.empty())
    diags.add(spec.excludes.front().pos, spec.excludes.front().what,
              fmt::format("the [[exclude]] entries drop all {} points: nothing is left to run; "
                          "narrow them, or remove the values from [axes] and [[zip]] instead",
                          total));
  return kept;
}

// A configuration's identity: SHA-256 of its canonical form (what the id is cut from). Kept
// instead of the canonical text (kilobytes per point) to find duplicates and baselines.
std::string digest(const Point& p) { return sha256_hex(p.canonical()); }

// 2. Duplicates: the same configuration twice (a value repeated in an axis or zip).
// `digests` gets each kept point's digest; `by_config` maps it to the point's position.
std::vector<Point> dedupe(std::vector<Candidate>& kept, std::vector<std::string>& digests,
                          std::unordered_map<std::string, std::size_t>& by_config,
                          Diagnostics& diags) {
  std::vector<Point> points;
  for (auto& c : kept) {
    std::string d = digest(c.point);
    auto [it, fresh] = by_config.emplace(d, points.size());
    if (fresh) {
      points.push_back(std::move(c.point));
      digests.push_back(std::move(d));
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
  return points;
}

// 3. Baselines, by position in `points` (-1: none); turned into ids after repetitions.
std::vector<long> baselines(const SuiteSpec& spec, const std::vector<Point>& points,
                            const std::vector<std::string>& digests,
                            const std::unordered_map<std::string, std::size_t>& by_config,
                            Diagnostics& diags) {
  std::vector<long> baseline_of(points.size(), -1);
  if (spec.baseline.empty()) return baseline_of;
  for (std::size_t i = 0; i < points.size(); ++i) {
    Point b = points[i];
    for (const auto& [k, v] : spec.baseline) b.set(k, v.value, v.pos);
    canonicalize(b);
    const std::string d = digest(b);
    if (d == digests[i]) continue;  // the point is its own baseline
    auto it = by_config.find(d);
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
  return baseline_of;
}

// 4. Reference figures (later entries override earlier ones for the same figure).
void attach_references(const SuiteSpec& spec, std::vector<Point>& points, Diagnostics& diags) {
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
}

}  // namespace

std::vector<Diagnostic> point_problems(const Point& p) {
  std::vector<Diagnostic> found;
  check_ranges(p, found);
  check_task_keys(p, found);
  // A validator that throws is a workload bug; report it with the rest, not instead.
  for (const auto& v : registered_validators()) {
    try {
      v(p, found);
    } catch (const std::exception& e) {
      found.push_back({"validator", fmt::format("a registered validator failed on point '{}': "
                                                "{}", p.name, e.what())});
    }
  }
  return found;
}

namespace {

// 5. Cross-key rules, keys the task ignores, then the workloads' validators, blamed where the
// key was set.
void check_points(const std::vector<Point>& points, Diagnostics& diags) {
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    std::vector<Diagnostic> found = point_problems(p);
    const auto failed = [&](const std::exception& e) {
      found.push_back({"validator", fmt::format("a registered validator failed on point '{}': "
                                                "{}", p.name, e.what())});
    };
    for (const auto& v : registered_suite_validators()) {
      try {
        v(points, i, found);
      } catch (const std::exception& e) {
        failed(e);
      }
    }
    for (const auto& d : found) {
      if (d.warning) diags.warn(p.where(d.key), d.key, d.message);
      else diags.add(p.where(d.key), d.key, d.message);
    }
  }
}

// 6. Repetitions, indices, ids and baseline ids. Repetition 0 is the configuration already
// hashed (`repetition` is 0 until here: suites may not set it). Grouped: a point's repetitions
// follow it (fastest); interleaved: repetition r of every point, for r = 0, 1, ... (so noise
// that lasts seconds falls on every variant of a repetition alike, not on one variant's).
std::vector<Point> repeat(std::vector<Point>& points, const std::vector<std::string>& digests,
                          const std::vector<long>& baseline_of, bool interleaved) {
  const std::size_t n = points.size();
  std::vector<std::int64_t> reps(n);
  std::int64_t most = 0;
  for (std::size_t i = 0; i < n; ++i) most = std::max(most, reps[i] = points[i].get_int("repetitions"));
  std::vector<std::pair<std::size_t, std::int64_t>> order;  // (point, repetition) in run order
  if (interleaved) {
    for (std::int64_t r = 0; r < most; ++r)
      for (std::size_t i = 0; i < n; ++i)
        if (r < reps[i]) order.emplace_back(i, r);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < reps[i]; ++r) order.emplace_back(i, r);
  }
  std::vector<Point> out;
  std::vector<std::vector<std::size_t>> at(n);  // at[i][r]: index in `out`
  for (const auto& [i, r] : order) {
    Point q = points[i];
    q.set("repetition", r, points[i].where("repetitions"));
    if (reps[i] > 1) q.name += fmt::format("/r{}", r);
    q.index = int(out.size());
    q.id = (r == 0 ? digests[i] : digest(q)).substr(0, 12);
    at[i].push_back(out.size());
    out.push_back(std::move(q));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (baseline_of[i] < 0) continue;
    const auto& b = at[std::size_t(baseline_of[i])];
    for (std::size_t r = 0; r < at[i].size(); ++r)  // repetition r vs r
      out[at[i][r]].baseline_id = out[b[std::min(r, b.size() - 1)]].id;
  }
  return out;
}

}  // namespace

std::vector<Point> expand(const SuiteSpec& spec, Diagnostics& diags) {
  const PointCount n = count_points(spec);
  if (n.points > kMaxSuitePoints) {
    too_many_points(spec, n, diags);
    return {};
  }
  std::vector<Candidate> kept = product(spec, diags);
  std::vector<std::string> digests;
  std::unordered_map<std::string, std::size_t> by_config;
  std::vector<Point> points = dedupe(kept, digests, by_config, diags);
  kept = std::vector<Candidate>();  // all moved from: free them
  const std::vector<long> baseline_of = baselines(spec, points, digests, by_config, diags);
  attach_references(spec, points, diags);
  // Keys left "auto": chosen by `shardbench fit`'s search (fit.h), or only collected.
  if (fit_mode() == FitMode::Collect) return points;
  // Points whose "auto"s could not be resolved are not validated: their "auto" would be.
  if (resolve_auto(spec.name, points, diags)) return {};
  check_points(points, diags);
  if (!diags.empty()) return {};
  return repeat(points, digests, baseline_of, spec.interleave_repetitions);
}

}  // namespace sb
