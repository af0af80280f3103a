// `shardbench export-checkpoint DIR --model PRESET --out FILE`: a sharded FSDP checkpoint
// (the newest committed set of DIR: one file per rank, any strategy and world size)
// assembled in one process and written as one safetensors file with Hugging Face names, for
// the one-process trainer, `infer`, or Hugging Face itself. Runs without MPI.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/workload.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/params.h"

namespace sb::fsdp {
namespace {

struct ExportArgs {
  std::string dir, model, out;
};

const sb::Registrar kRegister([] {
  sb::cli::register_command(
      {"export-checkpoint",
       "Write a sharded FSDP checkpoint (checkpoint_dir) as one safetensors file",
       [](CLI::App& sub) {
         auto a = std::make_shared<ExportArgs>();
         sub.add_option("dir", a->dir, "checkpoint_dir of a train run (its newest committed "
                                       "step-<N>/ set is read)")->required();
         sub.add_option("--model", a->model, "model preset the checkpoint was trained as")
             ->required();
         sub.add_option("--out", a->out, "safetensors file to write")->required();
         sub.callback([a] {
           auto model = models::make_model(a->model);
           export_checkpoint(a->dir, *model, a->out);
           std::printf("wrote %s: %lld parameters of %s from %s\n", a->out.c_str(),
                       static_cast<long long>(models::count_params(model->units())),
                       a->model.c_str(), a->dir.c_str());
         });
       }});
});

}  // namespace
}  // namespace sb::fsdp
