// Interleaved timing of backends (backend_tuning.h).
#include "workloads/micro/backend_tuning.h"

#include <algorithm>
#include <map>
#include <memory>

#include "workloads/comm/communicator.h"

namespace sb::micro {

BackendMeasurement measure_backends(const std::vector<BackendUnderTest>& backends,
                                    const std::vector<Op>& ops,
                                    const std::vector<std::int64_t>& sizes, MPI_Comm world,
                                    int rounds) {
  BackendMeasurement m;
  for (Op op : ops)
    for (std::int64_t bytes : sizes) {
      std::vector<std::unique_ptr<CollectiveCase>> cases;
      for (const auto& b : backends) {
        CaseConfig cfg;
        cfg.op = op;
        cfg.impl = "ours";  // the Communicator's synchronous calls, on b's backend
        cfg.bytes = bytes;
        cases.push_back(std::make_unique<CollectiveCase>(cfg, world, b.comm));
      }
      const int per_round = std::max(1, default_iterations(bytes) / rounds);
      std::vector<double> lo(backends.size(), 1e300), hi(backends.size(), 0.0);
      for (int r = 0; r < rounds; ++r)
        for (std::size_t i = 0; i < backends.size(); ++i) {
          const double s = time_case(*cases[i], r == 0 ? 1 : 0, per_round, world).mean_s;
          lo[i] = std::min(lo[i], s);
          hi[i] = std::max(hi[i], s);
        }
      comm::TableEntry e;
      e.op = op;
      e.bytes = static_cast<std::uint64_t>(cases.front()->size_bytes());
      std::map<std::string, double> spread;
      for (std::size_t i = 0; i < backends.size(); ++i) {
        e.seconds[backends[i].name] = lo[i];
        spread[backends[i].name] = lo[i] > 0 ? (hi[i] - lo[i]) / lo[i] : 0.0;
        m.wrong += cases[i]->check();
      }
      m.rows.push_back(std::move(e));
      m.spread.push_back(std::move(spread));
    }
  return m;
}

}  // namespace sb::micro
