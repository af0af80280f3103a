// What an executor (server.h) needs from the serve task to run its model: a forward on the
// served weights, and each request's prompt.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "workloads/models/model.h"

namespace sb::serve {

// Runs one forward: f on the weights (a plain or quantized provider, or the FSDP engine's
// forward_with, which gathers and frees the sharded units around it).
using RunForward = std::function<torch::Tensor(const std::function<torch::Tensor(models::ParamProvider&)>&)>;
// The prompt tokens of a request.
using PromptOf = std::function<std::vector<std::int64_t>(std::int64_t request)>;

}  // namespace sb::serve
