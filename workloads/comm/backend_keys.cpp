// The suite keys that choose the backends (backend.h, backend_table.h), and what `plan` can
// know about them before anything runs. What only the ranks can know (the hosts a table was
// measured on) is checked when the Communicator is made, on every rank.
#include <filesystem>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/comm/backend.h"
#include "workloads/comm/backend_table.h"
#include "workloads/comm/communicator.h"

namespace sb::comm {

BackendChoice backend_choice(const sb::Point& p) {
  BackendChoice c;
  if (p.has("comm_backend")) c.name = p.get_string("comm_backend");
  if (p.has("comm_tuning")) c.table = p.get_string("comm_tuning");
  return c;
}

namespace {

std::string device_of(const sb::Point& p) { return p.has("device") ? p.get_string("device") : "cpu"; }

void validate(const sb::Point& p, std::vector<sb::Diagnostic>& out) {
  if (!p.has("comm_backend")) return;
  const std::string name = p.get_string("comm_backend");
  const std::string device = device_of(p);
  if (name == "auto" && device == "cuda") {  // its table is beside the point then
    out.push_back({"comm_backend", "comm_backend = \"auto\" chooses among host backends "
                                   "(suite/tune-backends.toml measures mpi and gloo); on "
                                   "device = \"cuda\" set comm_backend = \"nccl\" or \"mpi\""});
    return;
  }
  if (name == "auto") {
    const std::string path = p.get_string("comm_tuning");
    if (!std::filesystem::exists(path)) {
      out.push_back({"comm_tuning", fmt::format("comm_backend = \"auto\" reads the tuning table "
                                                "{}, which does not exist; {}", path, kMakeTable)});
      return;
    }
    try {
      const BackendTable t = read_table(path);
      const int world = p.has("world") ? static_cast<int>(p.get_int("world")) : 1;
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
  sb::KeySpec backend{"comm_backend", sb::KeyType::Name, std::string("mpi"), "comm_backend",
                      "library of the plain collectives: mpi, gloo, nccl or auto "
                      "(docs/FSDP.md \"Backends\")"};
  backend.tasks = {"train", "infer", "serve", "micro"};
  sb::register_key(std::move(backend));
  sb::KeySpec tuning{"comm_tuning", sb::KeyType::String,
                     std::string("results/tune-backends/backend-table.toml"), "",
                     "the tuning table comm_backend = \"auto\" reads and micro.impl = \"tune\" "
                     "writes (relative to the working directory)"};
  tuning.tasks = {"train", "infer", "serve", "micro"};
  sb::register_key(std::move(tuning));
  sb::register_validator(validate);
});

}  // namespace
}  // namespace sb::comm
