// Launcher "mpirun" (Open MPI 4): works on a workstation and inside a Slurm allocation, where
// Open MPI reads the allocation and starts its daemons through Slurm.
#include <fmt/format.h>

#include "harness/launch/launcher.h"
#include "harness/launch/slurm.h"
#include "harness/workload.h"

namespace sb {
namespace {
// Open MPI refuses to start ranks as root without it.
constexpr const char* kRootFlag = "--allow-run-as-root";

class MpirunLauncher final : public Launcher, public PinningLauncher {
 public:
  std::string name() const override { return "mpirun"; }
  // A workstation or the local one-node cluster.
  std::vector<std::string> prefix(const LaunchSpec& s) const override {
    std::vector<std::string> a = {"mpirun"};
    if (s.as_root) a.push_back(kRootFlag);
    // More ranks than cores is normal on a small machine; binding a multi-threaded rank to one
    // core would serialize its threads, so ranks are left unbound.
    for (const char* w : {"--oversubscribe", "--bind-to", "none"}) a.push_back(w);
    return with_ranks(a, s);
  }
  // A real cluster's job: each rank gets `threads` consecutive cores of the allocation
  // (PE = processing elements per rank) and is bound to them.
  std::vector<std::string> pinned_prefix(const LaunchSpec& s) const override {
    return with_ranks({"mpirun", "--map-by", fmt::format("slot:PE={}", s.threads), "--bind-to",
                       "core"}, s);
  }

 private:
  static std::vector<std::string> with_ranks(std::vector<std::string> a, const LaunchSpec& s) {
    for (const std::string& w : {std::string("-np"), std::to_string(s.world), std::string("-x"),
                                 fmt::format("OMP_NUM_THREADS={}", s.threads)})
      a.push_back(w);
    return a;
  }
};

const Registrar kRegister([] {
  LauncherInfo i;
  i.make = [] { return std::unique_ptr<Launcher>(new MpirunLauncher); };
  i.root_flag = kRootFlag;
  register_launcher("mpirun", "Open MPI's mpirun -np WORLD", std::move(i));
});
}  // namespace

}  // namespace sb
