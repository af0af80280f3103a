// Expert parallelism's collectives (models/moe.h ExpertParallel) over the Communicator's ep
// group (mesh.ep consecutive ranks of the shard group; backend.h Group::Ep): the token
// all-to-all as an autograd function, forward "ep_dispatch" (tokens to their experts' ranks)
// or "ep_combine" (outputs back), whose backward is the same all-to-all of the gradient
// ("ep_grad"), since block j of the output came from rank j's block r; and the group's
// maximum of a slot count.
#pragma once
#include <torch/types.h>

#include "workloads/models/moe.h"

namespace sb::comm { class Communicator; }

namespace sb::parallel {

// backward_s (may be null): the backward's all-to-all adds its seconds there.
torch::Tensor all_to_all_ep(const torch::Tensor& blocks, comm::Communicator& c, bool dispatch,
                            std::shared_ptr<double> backward_s = nullptr);

// The model's functions over c's ep group; c must outlive the model's use of them.
models::ExpertParallel expert_parallel(comm::Communicator& c);

}  // namespace sb::parallel
