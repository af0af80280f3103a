// Reading suite files (TOML, via toml++) into a typed, located SuiteSpec: every key checked
// against the registry (type, name set), every problem collected with file:line:column.
// The format is documented in docs/SUITES.md; expansion itself is in expand.cpp.
#include "harness/spec/suite.h"

#include "harness/spec/fit.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "harness/core/sha256.h"
#include "harness/spec/expand.h"
#include "harness/spec/reference.h"
#include "harness/workload.h"

namespace sb {

namespace {

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += (s.empty() ? "" : "\n") + l;
  return s;
}

}  // namespace

SuiteError::SuiteError(std::vector<std::string> d) : Error(join_lines(d)), diagnostics(std::move(d)) {}

namespace {

SourcePos pos_of(const toml::source_region& r, const std::string& file) {
  return {file, int(r.begin.line), int(r.begin.column)};
}

std::string unknown_key_message(const std::string& key) {
  std::vector<std::string> known;
  for (const auto& k : registered_keys()) known.push_back(k.key);
  const std::string best = closest(key, known);
  if (best.empty())
    return "unknown key: not registered by the harness or any linked workload (`shardbench "
           "keys` lists every key)";
  return fmt::format("unknown key; did you mean '{}'? (`shardbench keys` lists every key)", best);
}

// A suite name becomes a results folder, a Slurm job name and a line of the job script: keep
// it a plain path component that needs no quoting anywhere.
bool plain_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && std::all_of(n.begin(), n.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

// A registered point key written beside a [[reference]]'s figures (`world = 2` next to
// samples_per_s): meant for match, which would otherwise read as an unknown figure.
bool point_key_among_figures(const std::string& key) {
  const auto named = [&](const std::vector<std::pair<std::string, std::string>>& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& f) { return f.first == key; });
  };
  return find_key(key) && !named(reference_figures()) && !named(reference_checks());
}

// The value as the user would write it in TOML (for a message's suggested fix).
std::string literal(const toml::node& n) {
  if (auto s = n.as_string()) return fmt::format("\"{}\"", printable(s->get()));
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto f = n.as_floating_point()) return value_to_string(Value{f->get()});
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  if (auto a = n.as_array()) {
    std::string out;
    for (auto&& el : *a) out += (out.empty() ? "" : ", ") + literal(el);
    return "[" + out + "]";
  }
  return "...";
}

std::string describe(const toml::node& n) {
  if (auto s = n.as_string()) return fmt::format("the string \"{}\"", s->get());
  if (auto i = n.as_integer()) return fmt::format("the integer {}", i->get());
  if (auto f = n.as_floating_point()) return "the float " + value_to_string(Value{f->get()});
  if (auto b = n.as_boolean()) return fmt::format("the boolean {}", b->get());
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date/time";
}

const char* expected(KeyType t) {
  switch (t) {
    case KeyType::Bool: return "true or false";
    case KeyType::Int: return "an integer";
    case KeyType::Float: return "a number";
    case KeyType::String: return "a string";
    case KeyType::Name: return "a name (a string)";
  }
  return "?";
}

// A flattened key: dotted keys and nested tables both become "compress.grad.ratio".
struct Entry {
  std::string key;
  const toml::node* node;
  SourcePos key_pos, pos;
};

void flatten(const toml::table& t, const std::string& prefix, const std::string& file,
             std::vector<Entry>& out) {
  for (auto&& [k, v] : t) {
    std::string full = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (auto sub = v.as_table()) flatten(*sub, full, file, out);
    else out.push_back({full, &v, pos_of(k.source(), file), pos_of(v.source(), file)});
  }
}

// toml::table is ordered by key; we need file order (the first axis varies slowest).
std::vector<Entry> entries(const toml::table& t, const std::string& file) {
  std::vector<Entry> out;
  flatten(t, "", file, out);
  std::stable_sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return std::make_pair(a.key_pos.line, a.key_pos.column) <
           std::make_pair(b.key_pos.line, b.key_pos.column);
  });
  return out;
}

class Reader {
 public:
  Reader(SuiteSpec& spec, Diagnostics& d) : spec_(spec), d_(d) {}

  void read(const toml::table& root);
  bool named() const { return named_; }  // [suite] name was given
  // Whether [base], [axes] or [[zip]] has any key (valid or not): a suite without one
  // would run a single point of defaults.
  bool sets_point_keys() const { return point_keys_ > 0; }
  const SlurmTable& slurm() const { return slurm_; }
  const SourcePos& slurm_nodes_pos() const { return nodes_pos_; }

 private:
  const std::string& file() const { return spec_.file; }
  SourcePos at(const toml::node& n) const { return pos_of(n.source(), file()); }

  // The registered spec of `e.key`, or nullptr after reporting it.
  const KeySpec* key_of(const Entry& e, bool user_settable) {
    const KeySpec* ks = find_key(e.key);
    if (!ks) {
      d_.add(e.key_pos, e.key, unknown_key_message(e.key));
      return nullptr;
    }
    if (user_settable && e.key == "repetition") {
      d_.add(e.key_pos, e.key, "set by expansion (0 .. repetitions-1); set repetitions = N "
                               "in [base] instead");
      return nullptr;
    }
    return ks;
  }

  std::optional<Value> value_of(const KeySpec& ks, const toml::node& n) {
    SourcePos p = at(n);
    switch (ks.type) {
      case KeyType::Bool:
        if (auto b = n.as_boolean()) return Value{b->get()};
        break;
      case KeyType::Int:
        if (auto i = n.as_integer()) return in_range(ks, Value{std::int64_t(i->get())}, p);
        if (auto s = n.as_string(); s && s->get() == "auto" && int_key_may_be_auto(ks.key))
          return Value{s->get()};  // chosen by `shardbench fit` (fit.h)
        break;
      case KeyType::Float:  // an integer literal is a fine float ("time_limit = 600")
        if (auto f = n.as_floating_point()) return in_range(ks, Value{f->get()}, p);
        if (auto i = n.as_integer()) return in_range(ks, Value{double(i->get())}, p);
        break;
      case KeyType::String:
        if (auto s = n.as_string()) return Value{s->get()};
        break;
      case KeyType::Name:
        if (auto s = n.as_string()) {
          auto known = registered_names(ks.name_set);
          for (const auto& [name, doc] : known)
            if (name == s->get()) return Value{s->get()};
          if (ks.accepts_path && s->get().find('/') != std::string::npos) return Value{s->get()};
          std::string list;
          for (const auto& [name, doc] : known) list += (list.empty() ? "" : ", ") + name;
          if (ks.accepts_path) list += " (or a path: a value with '/', e.g. \"./my-model\")";
          std::vector<std::string> names;
          for (const auto& [name, doc] : known) names.push_back(name);
          const std::string best = closest(s->get(), names);
          const std::string hint = best.empty() ? "" : "did you mean '" + best + "'? ";
          if (list.empty())
            d_.add(p, ks.key, fmt::format("unknown {} '{}': no {} names are registered (is the "
                                          "workload that provides them linked in?)",
                                          ks.name_set, s->get(), ks.name_set));
          else
            d_.add(p, ks.key, fmt::format("unknown {} '{}': {}known names are {}", ks.name_set,
                                          s->get(), hint, list));
          return std::nullopt;
        }
        break;
    }
    d_.add(p, ks.key, fmt::format("wrong type: expected {}, got {}; `shardbench keys` lists "
                                  "each key's type", expected(ks.type), describe(n)));
    return std::nullopt;
  }

  // The value when the key's range allows it (checked here, before anything narrows it).
  std::optional<Value> in_range(const KeySpec& ks, Value v, const SourcePos& p) {
    const std::string problem = range_problem(ks, v);
    if (problem.empty()) return v;
    d_.add(p, ks.key, problem + " (`shardbench keys` lists each key's range)");
    return std::nullopt;
  }

  // A non-empty array of values (axes, zip).
  std::optional<std::vector<Located>> list_of(const KeySpec& ks, const Entry& e,
                                              const char* section) {
    auto arr = e.node->as_array();
    if (!arr) {
      d_.add(e.pos, e.key, fmt::format("{} values must be an array, e.g. {} = [{}, ...]; got {}",
                                       section, e.key, value_literal(ks.default_value),
                                       describe(*e.node)));
      return std::nullopt;
    }
    if (arr->empty()) {
      d_.add(e.pos, e.key, fmt::format("empty {} list: give at least one value, or remove the "
                                       "key", section));
      return std::nullopt;
    }
    std::vector<Located> out;
    bool ok = true;
    for (auto&& el : *arr) {
      auto v = value_of(ks, el);
      if (v) out.push_back({*v, at(el)});
      else ok = false;
    }
    if (!ok) return std::nullopt;
    return out;
  }

  static std::string value_literal(const Value& v) {
    if (auto s = std::get_if<std::string>(&v)) return fmt::format("\"{}\"", *s);
    return value_to_string(v);
  }

  const toml::table* table(const toml::node& n, const std::string& name) {
    if (auto t = n.as_table()) return t;
    d_.add(at(n), name, fmt::format("must be a table: write [{}] and its keys below it", name));
    return nullptr;
  }
  const toml::array* tables(const toml::node& n, const std::string& name) {
    auto a = n.as_array();
    if (a && a->is_array_of_tables()) return a;
    d_.add(at(n), name, fmt::format("must be an array of tables: write [[{}]] before each "
                                    "entry", name));
    return nullptr;
  }

  void read_suite(const toml::table& t);
  void read_base(const toml::table& t);
  void read_axes(const toml::table& t);
  void read_zip(const toml::table& t, int n);
  // nullopt (after reporting) when any part is wrong: a half-read exclude would drop more.
  std::optional<Matcher> read_matcher(const toml::table& t, const std::string& what,
                                      bool reference);
  void read_baseline(const toml::table& t);
  void read_slurm(const toml::table& t);
  void read_slurm_extra(const Entry& e);
  bool note_varied(const Entry& e, const std::string& by);

  SuiteSpec& spec_;
  Diagnostics& d_;
  std::map<std::string, std::string> varied_by_;  // key -> "[axes]" or "[[zip]] #n"
  bool named_ = false;
  int point_keys_ = 0;
  SlurmTable slurm_;
  SourcePos nodes_pos_;
};

void Reader::read(const toml::table& root) {
  for (auto&& [k, v] : root) {
    std::string s(k.str());
    if (s == "suite") { if (auto t = table(v, s)) read_suite(*t); }
    else if (s == "base") { if (auto t = table(v, s)) read_base(*t); }
    else if (s == "axes") { if (auto t = table(v, s)) read_axes(*t); }
    else if (s == "baseline") { if (auto t = table(v, s)) read_baseline(*t); }
    else if (s == "slurm") { if (auto t = table(v, s)) read_slurm(*t); }
    else if (s == "zip" || s == "exclude" || s == "reference") {
      auto arr = tables(v, s);
      if (!arr) continue;
      int n = 0;
      for (auto&& el : *arr) {
        ++n;
        const toml::table& t = *el.as_table();
        std::string what = fmt::format("[[{}]] #{}", s, n);
        if (s == "zip") read_zip(t, n);
        else if (auto m = read_matcher(t, what, s == "reference"))
          (s == "exclude" ? spec_.excludes : spec_.references).push_back(std::move(*m));
      }
    } else {
      d_.add(pos_of(k.source(), file()), s,
             "unknown section; the sections are [suite], [base], [axes], [[zip]], [[exclude]], "
             "[baseline], [[reference]] and [slurm] (point keys go under [base])");
    }
  }
  std::stable_sort(spec_.dims.begin(), spec_.dims.end(), [](const Dimension& a, const Dimension& b) {
    return std::make_pair(a.pos.line, a.pos.column) < std::make_pair(b.pos.line, b.pos.column);
  });
}

void Reader::read_suite(const toml::table& t) {
  for (const auto& e : entries(t, file())) {
    if (e.key != "name" && e.key != "description" && e.key != "repetition_order") {
      d_.add(e.key_pos, e.key, "unknown key in [suite]; the keys are name, description and repetition_order");
      continue;
    }
    auto s = e.node->as_string();
    if (!s) {
      d_.add(e.pos, e.key, fmt::format("wrong type: expected a string, got {}", describe(*e.node)));
      continue;
    }
    if (e.key == "description") {
      spec_.description = s->get();
      continue;
    }
    if (e.key == "repetition_order") {
      if (s->get() != "grouped" && s->get() != "interleaved")
        d_.add(e.pos, e.key, fmt::format("repetition_order \"{}\" is not grouped (a point's repetitions "
                                         "one after another) or interleaved (repetition 0 of every point, "
                                         "then repetition 1, ...)", printable(s->get())));
      spec_.interleave_repetitions = s->get() == "interleaved";
      continue;
    }
    const std::string& n = s->get();
    named_ = true;
    if (plain_name(n)) spec_.name = n;
    else d_.add(e.pos, e.key, fmt::format("suite name \"{}\" must use only letters, digits, "
                                          "'-', '_' and '.' (it names the results folder)",
                                          printable(n)));
  }
}

void Reader::read_base(const toml::table& t) {
  for (const auto& e : entries(t, file())) {
    ++point_keys_;
    const KeySpec* ks = key_of(e, true);
    if (!ks) continue;
    if (e.node->is_array()) {
      d_.add(e.pos, e.key, fmt::format("[base] takes one value; to vary {} put the list under "
                                       "[axes]", e.key));
      continue;
    }
    if (auto v = value_of(*ks, *e.node)) spec_.base.set(e.key, *v, e.pos);
  }
}

// False (and reported) when another dimension already varies the key.
bool Reader::note_varied(const Entry& e, const std::string& by) {
  auto [it, fresh] = varied_by_.emplace(e.key, by);
  if (!fresh)
    d_.add(e.key_pos, e.key, fmt::format("already varied by {}; vary each key in one place",
                                         it->second));
  return fresh;
}

void Reader::read_axes(const toml::table& t) {
  for (const auto& e : entries(t, file())) {
    ++point_keys_;
    const KeySpec* ks = key_of(e, true);
    if (!ks) continue;
    auto values = list_of(*ks, e, "axis");
    if (!values || !note_varied(e, "[axes]")) continue;
    Dimension d{{e.key}, {}, e.key_pos};
    for (auto& v : *values) d.rows.push_back({std::move(v)});
    spec_.dims.push_back(std::move(d));
  }
}

void Reader::read_zip(const toml::table& t, int n) {
  std::string what = fmt::format("[[zip]] #{}", n);
  auto es = entries(t, file());
  point_keys_ += int(es.size());
  if (es.empty()) {
    d_.add(at(t), what, "empty [[zip]]: give two or more lists of equal length");
    return;
  }
  Dimension d;
  d.pos = es.front().key_pos;
  bool ok = true;
  std::size_t len = 0;
  std::string first_key;
  for (const auto& e : es) {
    const KeySpec* ks = key_of(e, true);
    if (!ks) { ok = false; continue; }
    auto values = list_of(*ks, e, "zip");
    if (!values || !note_varied(e, what)) { ok = false; continue; }
    if (d.keys.empty()) {
      len = values->size();
      first_key = e.key;
      d.rows.resize(len);
    } else if (values->size() != len) {
      d_.add(e.pos, e.key, fmt::format("zip lists of unequal length: {} has {} values, {} has "
                                       "{}; give every list of a [[zip]] the same length",
                                       first_key, len, e.key, values->size()));
      ok = false;
      continue;
    }
    d.keys.push_back(e.key);
    for (std::size_t i = 0; i < len; ++i) d.rows[i].push_back((*values)[i]);
  }
  if (ok) spec_.dims.push_back(std::move(d));
}

std::optional<Matcher> Reader::read_matcher(const toml::table& t, const std::string& what,
                                            bool reference) {
  Matcher m{what, at(t), {}, {}};
  bool ok = true;
  std::vector<Entry> keys;
  if (!reference) {
    keys = entries(t, file());
  } else {
    for (const auto& e : entries(t, file())) {
      if (e.key.rfind("match.", 0) == 0) {
        Entry k = e;
        k.key = e.key.substr(6);
        keys.push_back(k);
      } else if (point_key_among_figures(e.key)) {
        d_.add(e.key_pos, e.key, fmt::format("{} is a point key, not a reference figure: the "
                                             "keys that pick the points go in match = {{ {} = "
                                             "{} }}, the figures beside match are what a "
                                             "report compares (`shardbench keys` lists both)",
                                             e.key, e.key, literal(*e.node)));
        ok = false;
      } else if (e.node->is_integer() || e.node->is_floating_point() || e.node->is_array()) {
        bool key_problem = false;
        const std::string problem = read_reference_figure(e.key, *e.node, &m.figures, &key_problem);
        if (!problem.empty()) {
          d_.add(key_problem ? e.key_pos : e.pos, e.key, problem);
          ok = false;
        }
      } else {
        d_.add(e.pos, e.key, fmt::format("a reference figure must be a number, got {}; the "
                                         "keys to match go in match = {{ ... }}",
                                         describe(*e.node)));
        ok = false;
      }
    }
    if (m.figures.empty() && ok) {
      d_.add(m.pos, what, "no figures: add numbers such as latency_ms = 185.0 next to match");
      ok = false;
    }
  }
  if (keys.empty() && !reference) {
    d_.add(m.pos, what, "empty [[exclude]] would drop every point; give the keys to match");
    ok = false;
  }
  for (const auto& e : keys) {
    const KeySpec* ks = key_of(e, false);
    if (!ks) { ok = false; continue; }
    std::vector<Value> values;
    if (auto arr = e.node->as_array()) {
      for (auto&& el : *arr) {
        auto v = value_of(*ks, el);
        if (v) values.push_back(*v);
        else ok = false;
      }
    } else if (auto v = value_of(*ks, *e.node)) {
      values.push_back(*v);
    } else {
      ok = false;
    }
    if (!values.empty()) m.match.emplace_back(e.key, std::move(values));
  }
  if (!ok) return std::nullopt;
  return m;
}

void Reader::read_baseline(const toml::table& t) {
  for (const auto& e : entries(t, file())) {
    const KeySpec* ks = key_of(e, false);
    if (!ks) continue;
    if (e.node->is_array()) {
      d_.add(e.pos, e.key, "a baseline value must be a single value: the baseline of each "
                           "point is that point with this value");
      continue;
    }
    if (auto v = value_of(*ks, *e.node)) spec_.baseline.push_back({e.key, {*v, e.pos}});
  }
}

// [slurm]: the cluster settings of `submit`, checked as strictly as point keys (the rules are
// in base_config.cpp). Keys are reported as slurm.KEY: `time` is not the point key time_limit.
void Reader::read_slurm(const toml::table& t) {
  const std::vector<std::string>& known = slurm_keys();
  for (const auto& e : entries(t, file())) {
    const std::string key = "slurm." + e.key;
    if (std::find(known.begin(), known.end(), e.key) == known.end()) {
      const std::string best = closest(e.key, known);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string hint = best.empty() ? "" : "did you mean '" + best + "'? ";
      d_.add(e.key_pos, key, fmt::format("unknown key in [slurm]; {}the keys are {}", hint, list));
    } else if (e.key == "extra") {
      read_slurm_extra(e);
    } else if (e.key == "nodes") {
      const auto n = e.node->as_integer();
      if (n && n->get() >= 1 && n->get() <= (1 << 20))
        slurm_.nodes = int(n->get()), nodes_pos_ = e.pos;
      else
        d_.add(e.pos, key, fmt::format("expected a number of nodes from 1 to {}, got {}",
                                          1 << 20, describe(*e.node)));
    } else if (const auto s = e.node->as_string(); !s) {
      const char* hint = e.key == "time" ? " (Slurm's format: time = \"2:00:00\")" : "";
      d_.add(e.pos, key, fmt::format("wrong type: expected a string, got {}{}", describe(*e.node),
                                     hint));
    } else if (const std::string problem = set_slurm_string(slurm_, e.key, s->get());
               !problem.empty()) {
      d_.add(e.pos, key, problem);
    }
  }
}

void Reader::read_slurm_extra(const Entry& e) {
  const auto arr = e.node->as_array();
  if (!arr) {
    d_.add(e.pos, "slurm.extra", fmt::format("wrong type: expected an array of \"#SBATCH ...\" "
                                             "strings, got {}", describe(*e.node)));
    return;
  }
  for (auto&& el : *arr) {
    const auto s = el.as_string();
    const std::string problem = s ? slurm_extra_problem(s->get())
                                  : fmt::format("wrong type: expected an \"#SBATCH ...\" string, "
                                                "got {}", describe(el));
    if (problem.empty()) slurm_.extra.push_back(s->get());
    else d_.add(at(el), "slurm.extra", problem);
  }
}

// What an empty suite says: the file has nothing in it, or nothing that makes points.
std::string empty_suite_message(const toml::table& root) {
  return fmt::format("the suite is empty: {}, so it would run one point of defaults; give "
                     "the points' keys under [base] (e.g. task = \"train\" and model = "
                     "\"gpt2-tiny\") and vary them under [axes] or [[zip]] (docs/SUITES.md; "
                     "suite/quickstart.toml is a small example)",
                     root.empty() ? "the file has no tables and no keys"
                                  : "no [base], [axes] or [[zip]] sets a point key");
}

std::string stem(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

}  // namespace

Suite load_suite_text(const std::string& toml_text, const std::string& path) {
  SuiteSpec spec;
  spec.file = path;
  spec.name = stem(path);
  spec.sha256 = sha256_hex(toml_text);
  for (const auto& k : registered_keys()) spec.base.set(k.key, k.default_value, SourcePos{path, 0, 0});
  Diagnostics diags(path);
  toml::table root;
  try {
    root = toml::parse(toml_text, path);
  } catch (const toml::parse_error& e) {
    diags.add(pos_of(e.source(), path), "syntax",
              fmt::format("{}; see docs/SUITES.md for the format", e.description()));
    throw SuiteError(diags.lines());
  }
  Reader reader(spec, diags);
  reader.read(root);
  // One point of defaults is never what was meant: said with the name check's finding, and
  // nothing is expanded. (Keys the reader refused, e.g. outside any section, say more.)
  const bool empty = !reader.sets_point_keys() && diags.empty();
  if (empty) diags.add(SourcePos{}, "suite", empty_suite_message(root));
  if (!reader.named() && !plain_name(spec.name)) {
    diags.add(SourcePos{}, "suite",
              fmt::format("the suite is named after the file, \"{}\", but a suite name may use "
                          "only letters, digits, '-', '_' and '.' (it names the results folder "
                          "and the Slurm job): set name = \"...\" under [suite], or rename the "
                          "file", printable(spec.name)));
    throw SuiteError(diags.lines());  // points would carry the name: do not expand
  }
  if (empty) throw SuiteError(diags.lines());
  std::vector<Point> points = expand(spec, diags);
  if (diags.empty()) {
    const std::string problem = slurm_nodes_problem(reader.slurm(), points);
    if (!problem.empty()) diags.add(reader.slurm_nodes_pos(), "slurm.nodes", problem);
  }
  if (!diags.empty()) throw SuiteError(diags.lines());
  return Suite{spec.name, path, spec.sha256, spec.description, std::move(points),
               diags.warning_lines(), reader.slurm()};
}

Suite load_suite(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw SuiteError({fmt::format("{}: cannot read the suite file ({}); check the path",
                                  printable(path), std::strerror(errno))});
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return load_suite_text(bytes.str(), path);
}

const Point& find_point(const Suite& s, const std::string& index_or_id) {
  for (const auto& p : s.points)
    if (p.id == index_or_id) return p;
  bool digits = !index_or_id.empty() && index_or_id.size() < 10 &&
                std::all_of(index_or_id.begin(), index_or_id.end(), ::isdigit);
  if (digits) {
    long i = std::stol(index_or_id);
    if (i >= 0 && std::size_t(i) < s.points.size()) return s.points[std::size_t(i)];
  }
  SB_USER_FAIL("no point '{}' in suite '{}' ({}): give an index 0..{} or a 12-digit id (see "
               "`shardbench plan {}`)", index_or_id, s.name, s.file, s.points.size() - 1, s.file);
}

}  // namespace sb
