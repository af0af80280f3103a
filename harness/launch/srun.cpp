// Launcher "srun": Slurm starts the ranks itself and wires them up through PMIx.
#include <fmt/format.h>

#include "harness/launch/launcher.h"
#include "harness/launch/slurm.h"
#include "harness/workload.h"

namespace sb {
namespace {
class SrunLauncher final : public Launcher, public PinningLauncher {
 public:
  std::string name() const override { return "srun"; }
  std::vector<std::string> prefix(const LaunchSpec& s) const override {
    return {"srun",
            "--mpi=pmix",  // Debian's Open MPI 4.1 and Slurm 22.05 share PMIx 4
            fmt::format("--ntasks={}", s.world),
            // Since Slurm 22.05 srun no longer takes this from the batch job: say it again.
            fmt::format("--cpus-per-task={}", s.threads),
            "--kill-on-bad-exit=1",  // one failed rank ends the step instead of hanging it
            fmt::format("--export=ALL,OMP_NUM_THREADS={}", s.threads)};
  }
  // Each task gets --cpus-per-task CPUs of the allocation; cores binds it to exactly those,
  // so a rank's threads neither wander nor share a core with another rank.
  std::vector<std::string> pinned_prefix(const LaunchSpec& s) const override {
    std::vector<std::string> a = prefix(s);
    a.insert(a.begin() + 4, "--cpu-bind=cores");
    return a;
  }
};

const Registrar kRegister([] {
  LauncherInfo i;
  i.make = [] { return std::unique_ptr<Launcher>(new SrunLauncher); };
  i.allocation_env = "SLURM_JOB_ID";  // set by sbatch and salloc
  register_launcher("srun", "Slurm's srun inside an allocation", std::move(i));
});
}  // namespace

}  // namespace sb
