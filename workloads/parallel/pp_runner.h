// A pipeline step (the Parallel3d issue): runs one rank's actions of a schedule
// (pp_schedule.h) over the communicator's pp group. Activations go forward and their
// gradients backward point-to-point (Communicator::send_async / recv, so backends and the
// trace apply; kinds "pp_act" and "pp_grad"), sends non-blocking and waited at the end of the
// step, receives blocking where the schedule needs their data: since the simulated schedule
// is deadlock-free and no send blocks, the step is. The loss is computed on the last stage:
// each micro-batch's contribution as the caller weights it (the mean over micro-batches of a
// one-process step: loss / m), and the recorded loss is the sum over them, summed over pp
// from the last stage.
// The stages are the caller's: forward(chunk, microbatch, input) runs this rank's virtual
// stage `chunk` (stage chunk * pp + rank) with autograd recording; the first stage's input is
// inputs[microbatch] (undefined when no inputs are given: the stage reads its micro-batch
// itself), every other stage's the received activation (shape `act_shape`, `act_dtype`).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/parallel/pp_schedule.h"

namespace sb::comm {
class Communicator;
class Compressor;
}

namespace sb::parallel {

struct PipelineStages {
  std::function<torch::Tensor(int chunk, int microbatch, const torch::Tensor& input)> forward;
  // The last stage: one micro-batch's contribution to the step's loss, from its output (what
  // backward starts from).
  std::function<torch::Tensor(const torch::Tensor& output, int microbatch)> loss;
  std::vector<std::int64_t> act_shape;  // one micro-batch's activation between stages
  torch::ScalarType act_dtype = torch::kFloat32;
  // Compression per dimension (comm::Policy::pp_act / pp_grad; null: sent as they are): the
  // sender sends codec.compress(x as fp32) and the receiver decodes it into the activation's
  // shape and dtype; the trace's logical bytes are the uncompressed message's.
  std::shared_ptr<comm::Compressor> act_codec, grad_codec;
};

// What one rank's step did, for the bubble: busy_s is the time in the stages' forward, loss
// and backward calls; the rest of step_s is waiting for messages (and moving them): the
// measured bubble is (step_s - busy_s) / step_s.
struct PpStepStats {
  double step_s = 0, busy_s = 0;
};

// Runs `schedule` for one step with micro-batch inputs `inputs` (read by the first stage only;
// may be empty) and returns the step's loss (the sum of the micro-batches' loss contributions)
// on every pp rank. Gradients accumulate into the stages' parameters.
double pipeline_step(comm::Communicator& c, const PpScheduleInfo& schedule, int microbatches,
                     int v, const PipelineStages& stages, const std::vector<torch::Tensor>& inputs,
                     PpStepStats* stats = nullptr);

// One micro-batch through every stage in order, without gradients (evaluation): each rank runs
// its virtual stages as their inputs arrive. Returns the last stage's loss(output, 0) on
// every pp rank.
double pipeline_forward(comm::Communicator& c, int v, const PipelineStages& stages);

}  // namespace sb::parallel
