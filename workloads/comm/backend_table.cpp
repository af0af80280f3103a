// The tuning table of comm_backend = "auto" (backend_table.h): the rule, reading with
// errors that say how to fix the file, the staleness check, and atomic writing.
#include "workloads/comm/backend_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/launch/results.h"

namespace sb::comm {

namespace {
// The largest b with b * b <= x * y: a message of b bytes is at least as near (in log) to
// x as to the larger y.
std::uint64_t geometric_floor(std::uint64_t x, std::uint64_t y) {
  const unsigned __int128 p = static_cast<unsigned __int128>(x) * y;
  auto b = static_cast<std::uint64_t>(std::sqrt(static_cast<long double>(p)));
  while (static_cast<unsigned __int128>(b) * b > p) --b;
  while (static_cast<unsigned __int128>(b + 1) * (b + 1) <= p) ++b;
  return b;
}
}  // namespace

std::vector<std::vector<Route>> BackendTable::routes() const {
  std::vector<std::vector<Route>> r(std::size(kCollOps));
  for (CollOp op : kCollOps) {
    std::vector<const TableEntry*> es;
    for (const auto& e : entries)
      if (e.op == op) es.push_back(&e);
    std::sort(es.begin(), es.end(), [](auto* a, auto* b) { return a->bytes < b->bytes; });
    auto& out = r[static_cast<std::size_t>(op)];
    for (std::size_t i = 0; i < es.size(); ++i) {
      const std::uint64_t upper = i + 1 < es.size()
                                      ? geometric_floor(es[i]->bytes, es[i + 1]->bytes)
                                      : std::numeric_limits<std::uint64_t>::max();
      if (!out.empty() && out.back().backend == es[i]->backend)
        out.back().max_bytes = upper;  // merge neighbours on one backend
      else
        out.push_back({upper, es[i]->backend});
    }
  }
  return r;
}

std::string BackendTable::choose(CollOp op, std::uint64_t bytes) const {
  const auto r = routes()[static_cast<std::size_t>(op)];
  SB_CHECK(!r.empty(), "comm_tuning: the table ({}) has no entry for {}; {}", source,
           coll_name(op), kMakeTable);
  for (const auto& x : r)
    if (bytes <= x.max_bytes) return x.backend;
  return r.back().backend;
}

BackendTable make_table(const std::vector<TableEntry>& rows) {
  BackendTable t;
  for (TableEntry e : rows) {
    SB_CHECK(!e.seconds.empty(), "backend table: no measurement for {} at {} bytes",
             coll_name(e.op), e.bytes);
    // The fastest; on equal times the first by name, so every rank writes the same table.
    auto it = std::min_element(e.seconds.begin(), e.seconds.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    e.backend = it->first;
    for (const auto& [b, s] : e.seconds)
      if (std::find(t.backends.begin(), t.backends.end(), b) == t.backends.end())
        t.backends.push_back(b);
    t.entries.push_back(std::move(e));
  }
  std::sort(t.entries.begin(), t.entries.end(), [](const TableEntry& a, const TableEntry& b) {
    return a.op != b.op ? a.op < b.op : a.bytes < b.bytes;
  });
  return t;
}

namespace {

std::string toml_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

std::string str_list(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  for (const auto& s : v) q.push_back(toml_str(s));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

}  // namespace

std::string table_text(const BackendTable& t) {
  std::string o =
      "# shardbench backend tuning table (workloads/comm/backend_table.h): which backend runs\n"
      "# each collective, by size. Written by the micro task (micro.impl = \"tune\"); read by\n"
      "# comm_backend = \"auto\". Regenerate it rather than editing it.\n";
  o += "format = 1\n";
  o += fmt::format("world = {}\n", t.world);
  o += fmt::format("hosts = {}\n", str_list(t.hosts));
  o += fmt::format("backends = {}\n", str_list(t.backends));
  o += fmt::format("cpu = {}\nsource = {}\ngit_commit = {}\ncreated = {}\n", toml_str(t.cpu),
                   toml_str(t.source), toml_str(t.git_commit), toml_str(t.created));
  for (const auto& e : t.entries) {
    std::vector<std::string> secs;
    for (const auto& [b, s] : e.seconds) secs.push_back(fmt::format("{} = {:.6e}", b, s));
    o += fmt::format("\n[[entry]]\nop = \"{}\"\nbytes = {}\nbackend = \"{}\"\nseconds = {{ {} }}\n",
                     coll_name(e.op), e.bytes, e.backend, fmt::join(secs, ", "));
  }
  return o;
}

void write_table(const BackendTable& t, const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  sb::write_file_atomic(path, table_text(t));
}

std::string read_table_file(const std::string& path) {
  SB_CHECK(std::filesystem::exists(path),
           "comm_tuning: no backend tuning table at {} (comm_backend = \"auto\" reads it); {}",
           path, kMakeTable);
  std::ifstream in(path, std::ios::binary);
  SB_CHECK(in, "comm_tuning: cannot read {}; {}", path, kMakeTable);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

BackendTable read_table(const std::string& path) { return parse_table(read_table_file(path), path); }

BackendTable parse_table(const std::string& text, const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    SB_FAIL("comm_tuning: {}:{}:{}: {}; {}", path, e.source().begin.line,
            e.source().begin.column, e.description(), kMakeTable);
  }
  auto bad = [&](const std::string& what) -> sb::Error {
    return sb::Error(fmt::format("comm_tuning: {}: {}; {}", path, what, kMakeTable));
  };
  if (doc["format"].value_or<std::int64_t>(0) != 1) throw bad("`format` is not 1");
  BackendTable t;
  t.world = static_cast<int>(doc["world"].value_or<std::int64_t>(0));
  if (t.world < 1) throw bad("`world` is missing or < 1");
  auto strings = [&](const char* key) {
    std::vector<std::string> v;
    const toml::array* a = doc[key].as_array();
    if (!a) throw bad(fmt::format("`{}` is not a list of strings", key));
    for (const auto& x : *a) {
      auto s = x.value<std::string>();
      if (!s) throw bad(fmt::format("`{}` is not a list of strings", key));
      v.push_back(*s);
    }
    return v;
  };
  t.hosts = strings("hosts");
  t.backends = strings("backends");
  t.cpu = doc["cpu"].value_or(std::string());
  t.source = doc["source"].value_or(std::string(path));
  t.git_commit = doc["git_commit"].value_or(std::string());
  t.created = doc["created"].value_or(std::string());
  const toml::array* entries = doc["entry"].as_array();
  if (!entries || entries->empty()) throw bad("it has no [[entry]]");
  int i = 0;
  for (const auto& node : *entries) {
    ++i;
    const toml::table* e = node.as_table();
    if (!e) throw bad(fmt::format("entry {} is not a table", i));
    TableEntry x;
    const auto op = (*e)["op"].value<std::string>();
    if (!op) throw bad(fmt::format("entry {} has no `op`", i));
    try {
      x.op = coll_from_name(*op);
    } catch (const sb::Error& err) {
      throw bad(fmt::format("entry {}: {}", i, err.what()));
    }
    const auto bytes = (*e)["bytes"].value<std::int64_t>();
    if (!bytes || *bytes < 1) throw bad(fmt::format("entry {} ({}): `bytes` is missing or < 1", i, *op));
    x.bytes = static_cast<std::uint64_t>(*bytes);
    x.backend = (*e)["backend"].value_or(std::string());
    if (std::find(t.backends.begin(), t.backends.end(), x.backend) == t.backends.end())
      throw bad(fmt::format("entry {} ({} at {} bytes): backend \"{}\" is not one of `backends` "
                            "({})", i, *op, x.bytes, x.backend, fmt::join(t.backends, ", ")));
    if (const toml::table* s = (*e)["seconds"].as_table())
      for (const auto& [k, v] : *s) x.seconds[std::string(k.str())] = v.value_or(0.0);
    t.entries.push_back(std::move(x));
  }
  std::sort(t.entries.begin(), t.entries.end(), [](const TableEntry& a, const TableEntry& b) {
    return a.op != b.op ? a.op < b.op : a.bytes < b.bytes;
  });
  return t;
}

std::vector<std::string> host_set(MPI_Comm comm) {
  constexpr int kLen = 256;
  std::string mine = sb::host_name();
  mine.resize(kLen - 1);
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<char> all(static_cast<std::size_t>(n) * kLen);
  sb::check_mpi(MPI_Allgather(mine.c_str(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm),
                "MPI_Allgather (host names)");
  std::vector<std::string> v;
  for (int r = 0; r < n; ++r) v.emplace_back(all.data() + static_cast<std::size_t>(r) * kLen);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void check_table_fits(const BackendTable& t, const std::string& path, int world,
                      const std::vector<std::string>& hosts) {
  SB_CHECK(t.world == world && t.hosts == hosts,
           "comm_tuning: the table {} is stale: it was measured with {} ranks on [{}], this point "
           "runs {} ranks on [{}]; {}", path, t.world, fmt::join(t.hosts, ", "), world,
           fmt::join(hosts, ", "), kMakeTable);
  for (const auto& b : t.backends) {
    const BackendInfo* info = find_backend(b);
    SB_CHECK(info, "comm_tuning: the table {} names backend \"{}\", which this build does not "
             "know; {}", path, b, kMakeTable);
    SB_CHECK(info->available, "comm_tuning: the table {} names backend \"{}\": {}", path, b,
             info->unavailable_why);
  }
}

}  // namespace sb::comm
