// Measuring backends against each other (comm_backend = "auto", backend_table.h): every
// collective x size on one Communicator per backend, interleaved (rounds of calls per
// backend in turn, so the machine's drift reaches every backend alike), each call timed as
// the slowest rank's (time_case). Used by the micro task's "tune" implementation (which
// writes the table) and by micro_collectives (which checks auto against the best backend).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "workloads/comm/backend_table.h"
#include "workloads/micro/collective_case.h"

namespace sb::micro {

struct BackendUnderTest {
  std::string name;            // "mpi", "gloo", "auto", ...
  comm::Communicator* comm;    // made with that backend, over `world`
};

struct BackendMeasurement {
  // Per (op, size): seconds per backend name, for make_table: the least of the rounds' mean
  // call times (the round least disturbed by other work on this shared machine).
  std::vector<comm::TableEntry> rows;
  // Per row and backend: (largest - least) / least of the rounds' means, the noise band.
  std::vector<std::map<std::string, double>> spread;
  std::int64_t wrong = 0;  // result elements that differed (check() of every case)
};

// rounds x (iters(size) / rounds, at least 1) timed calls per backend, op and size, after
// one untimed call per backend. Collective over world; the same on every rank.
BackendMeasurement measure_backends(const std::vector<BackendUnderTest>& backends,
                                    const std::vector<Op>& ops,
                                    const std::vector<std::int64_t>& sizes, MPI_Comm world,
                                    int rounds = 8);

}  // namespace sb::micro
