// The suite keys that choose the backends (backend.h, backend_table.h), and what `plan` can
// know about them before anything runs. What only the ranks can know (the hosts a table was
// measured on) is checked when the Communicator is made, on every rank.
#include <filesystem>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/workload.h"
#include "workloads/comm/backend.h"
#include "workloads/comm/backend_table.h"
#include "workloads/comm/comm_config.h"
#include "workloads/comm/communicator.h"
#include "workloads/models/device_config.h"

namespace sb::comm {

BackendChoice backend_choice(const sb::Point& p) {
  const BackendKeys& k = sb::config<BackendKeys>(p);
  BackendChoice c;
  c.name = k.comm_backend;
  c.table = k.comm_tuning;
  return c;
}

namespace {

void validate(const BackendKeys& k, const sb::Point& p, std::vector<sb::Diagnostic>& out) {
  const std::string& name = k.comm_backend;
  const std::string& device = sb::config<models::DeviceConfig>(p).device;
  if (name == "auto" && device == "cuda") {  // its table is beside the point then
    out.push_back({"comm_backend", "comm_backend = \"auto\" chooses among host backends "
                                   "(suite/tune-backends.toml measures mpi and gloo); on "
                                   "device = \"cuda\" set comm_backend = \"nccl\" or \"mpi\""});
    return;
  }
  if (name == "auto") {
    const std::string& path = k.comm_tuning;
    if (!std::filesystem::exists(path)) {
      out.push_back({"comm_tuning", fmt::format("comm_backend = \"auto\" reads the tuning table "
                                                "{}, which does not exist; {}", path, kMakeTable)});
      return;
    }
    try {
      const BackendTable t = read_table(path);
      const int world = sb::base_config(p).world;
      if (t.world != world)
        out.push_back({"comm_tuning", fmt::format("the tuning table {} is stale: it was measured "
                                                  "with {} ranks, this point runs {}; {}", path,
                                                  t.world, world, kMakeTable)});
    } catch (const sb::Error& e) {
      out.push_back({"comm_tuning", e.what()});
    }
    return;
  }
  const BackendInfo* b = find_backend(name);
  if (b && !b->available) out.push_back({"comm_backend", fmt::format("comm_backend = \"{}\": {}",
                                                                      name, b->unavailable_why)});
  if (name == "nccl" && device != "cuda")
    out.push_back({"comm_backend", fmt::format("comm_backend = \"nccl\" runs collectives on "
                                               "device tensors, and this point's tensors are on "
                                               "the host (device = \"{}\"): set device = \"cuda\", "
                                               "or comm_backend = \"mpi\" or \"gloo\"", device)});
  if (name == "gloo" && device == "cuda")
    out.push_back({"comm_backend", "comm_backend = \"gloo\" runs collectives on host tensors and "
                                   "this point's are on the GPU (device = \"cuda\"): set "
                                   "comm_backend = \"nccl\" or \"mpi\""});
}

const sb::Registrar kRegister([] {
  sb::register_name("comm_backend", "auto",
                    "per (collective, size), the fastest backend of the tuning table "
                    "comm_tuning (written by suite/tune-backends.toml)");
});

}  // namespace

void BackendKeys::declare(sb::Fields<BackendKeys>& f) {
  f.tasks({"train", "infer", "serve", "micro"});
  f.name("comm_backend", &BackendKeys::comm_backend, "comm_backend", "mpi",
         "library of the plain collectives: mpi, gloo, nccl or auto (docs/FSDP.md \"Backends\")");
  f.add("comm_tuning", &BackendKeys::comm_tuning, "results/tune-backends/backend-table.toml",
        "the tuning table comm_backend = \"auto\" reads and micro.impl = \"tune\" writes "
        "(relative to the working directory)");
  f.validate(validate);
}
SB_CONFIG_SECTION(BackendKeys);

}  // namespace sb::comm
