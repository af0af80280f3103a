// The block all-to-all as an autograd function, shared by Ulysses (sp_layers.h: group Sp) and
// expert parallelism (ep_layers.h: group Ep): t is (n, ...) blocks, block j goes to rank j of
// the group and block j of the result came from rank j; its backward is the same all-to-all of
// the gradient (block j of the output came from rank j's block r). The trace names the forward
// `kind` and the backward `grad_kind`; backward_s (may be null) receives the backward's
// seconds, added (the graph keeps it alive until the backward has run).
#pragma once
#include <memory>
#include <string>

#include <torch/types.h>

#include "workloads/comm/backend.h"

namespace sb::comm { class Communicator; }

namespace sb::parallel {

torch::Tensor all_to_all_blocks(const torch::Tensor& blocks, comm::Communicator& c, comm::Group g,
                                const std::string& kind, const std::string& grad_kind,
                                std::shared_ptr<double> backward_s = nullptr);

}  // namespace sb::parallel
