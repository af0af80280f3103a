// Ulysses sequence parallelism's one collective (models/sequence_parallel.h) over the
// Communicator's sp group (mesh.sp ranks; backend.h Group::Sp), as an autograd function: an
// all-to-all of (sp, ...) blocks forward ("sp_act") whose backward is the same all-to-all of
// the gradient ("sp_grad"), since block j of the output came from rank j's block r.
#pragma once
#include <torch/types.h>

#include "workloads/models/sequence_parallel.h"

namespace sb::comm { class Communicator; }

namespace sb::parallel {

torch::Tensor all_to_all_sp(const torch::Tensor& blocks, comm::Communicator& c);

// The model's functions over c's sp group; c must outlive the model's use of them.
models::SequenceParallel sequence_parallel(comm::Communicator& c);

}  // namespace sb::parallel
