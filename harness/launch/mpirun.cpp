// Launcher "mpirun" (Open MPI): works on a workstation and inside a Slurm allocation, where
// Open MPI reads the allocation and starts its daemons through Slurm.
#include <fmt/format.h>

#include "harness/launch/launcher.h"
#include "harness/workload.h"

namespace sb {
namespace {
class MpirunLauncher final : public Launcher {
 public:
  std::string name() const override { return "mpirun"; }
  std::vector<std::string> prefix(const LaunchSpec& s) const override {
    std::vector<std::string> a = {"mpirun"};
    if (s.as_root) a.push_back("--allow-run-as-root");  // Open MPI refuses root otherwise
    // More ranks than cores is normal on a small machine; binding a multi-threaded rank to one
    // core would serialize its threads, so ranks are left unbound.
    for (const char* w : {"--oversubscribe", "--bind-to", "none"}) a.push_back(w);
    a.push_back("-np");
    a.push_back(std::to_string(s.world));
    a.push_back("-x");
    a.push_back(fmt::format("OMP_NUM_THREADS={}", s.threads));
    return a;
  }
};

const Registrar kRegister([] {
  register_launcher("mpirun", "Open MPI's mpirun -np WORLD",
                    [] { return std::unique_ptr<Launcher>(new MpirunLauncher); });
});
}  // namespace

}  // namespace sb
