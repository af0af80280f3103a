// The tuning table of comm_backend = "auto": for each collective and message size, the
// backend that was fastest where and when it was measured. The micro task writes it
// (micro.impl = "tune", suite/tune-backends.toml); the Communicator reads it. A TOML file:
//
//   format = 1
//   world = 2                      # ranks it was measured with
//   hosts = ["node1"]              # sorted, unique
//   cpu = "...", source = "...", git_commit = "...", created = "..."
//   backends = ["mpi", "gloo"]     # the candidates
//   [[entry]]
//   op = "all_reduce"              # coll_name()
//   bytes = 4096                   # nccl-tests size (all_gather: output; others: input)
//   backend = "gloo"               # the fastest
//   seconds = { mpi = 1.1e-05, gloo = 9.0e-06 }  # mean per call, slowest rank
//
// Choosing: a message of b bytes takes the entry of its collective whose size is nearest
// to b on a log scale (ties: the smaller); sizes beyond the measured range take the end's.
// That is, ranges of sizes bounded at the geometric means of neighbouring entries (routes()):
// the Communicator looks a message up in them with a few integer comparisons.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <mpi.h>

#include "workloads/comm/backend.h"

namespace sb::comm {

struct TableEntry {
  CollOp op = CollOp::AllReduce;
  std::uint64_t bytes = 0;
  std::string backend;
  std::map<std::string, double> seconds;  // per candidate backend
};

// Messages of up to max_bytes (inclusive; above the previous route's) run on backend.
struct Route {
  std::uint64_t max_bytes = 0;
  std::string backend;
};

struct BackendTable {
  int world = 0;
  std::vector<std::string> hosts;  // sorted, unique
  std::vector<std::string> backends;
  std::string cpu, source, git_commit, created;
  std::vector<TableEntry> entries;

  // Per collective (indexed by CollOp), its routes in increasing size; empty when the table
  // has no entry for it.
  std::vector<std::vector<Route>> routes() const;
  // The backend for a collective of `bytes` (see above); fails naming the table when it has
  // no entry for op.
  std::string choose(CollOp op, std::uint64_t bytes) const;
};

// The rule, in one place: each (op, bytes) measurement row's fastest backend.
// rows: op, bytes, and seconds per backend.
BackendTable make_table(const std::vector<TableEntry>& rows);

// Reads and checks a table file (format, fields, known ops and backends); errors name the
// file, the key `comm_tuning` and how to make one.
BackendTable read_table(const std::string& path);
// The same, in two halves: the file's text (errors: missing, unreadable), and its parse (path
// names it in errors). The Communicator has rank 0 read and every rank parse the same text.
std::string read_table_file(const std::string& path);
BackendTable parse_table(const std::string& text, const std::string& path);
// Fails unless the table was measured with this world size on these hosts (host_set; stale
// otherwise), and every backend it names is in this build.
void check_table_fits(const BackendTable& t, const std::string& path, int world,
                      const std::vector<std::string>& hosts);
// The sorted, unique host names of comm's ranks, on every rank (collective): the `hosts` a
// table records and is checked against.
std::vector<std::string> host_set(MPI_Comm comm);
// Written whole to a temporary file and renamed over path (never half-written).
void write_table(const BackendTable& t, const std::string& path);
std::string table_text(const BackendTable& t);

// How to make a table (for error messages).
inline constexpr const char* kMakeTable =
    "measure one with `shardbench sweep suite/tune-backends.toml` (at the same world size, on "
    "the same hosts), or set comm_backend to a backend name";

}  // namespace sb::comm
