// A pipeline step (the Parallel3d issue): runs one rank's actions of a schedule
// (pp_schedule.h) over the communicator's pp group. Activations go forward and their
// gradients backward point-to-point (Communicator::send_async / recv, so backends and the
// trace apply; kinds "pp_act" and "pp_grad"), sends non-blocking and waited at the end of the
// step, receives blocking where the schedule needs their data: since the simulated schedule
// is deadlock-free and no send blocks, the step is. The loss is computed on the last stage,
// each micro-batch's divided by the number of micro-batches (the gradients of the whole
// batch's mean, as the one-process step), and the recorded loss is the sum over them,
// broadcast from the last stage.
// The stages are the caller's: forward(chunk, input) runs this rank's virtual stage `chunk`
// (stage chunk * pp + rank) with autograd recording; the first stage's input is the
// micro-batch, every other stage's the received activation (shape `act_shape`, fp32).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/parallel/pp_schedule.h"

namespace sb::comm { class Communicator; }

namespace sb::parallel {

struct PipelineStages {
  std::function<torch::Tensor(int chunk, const torch::Tensor& input)> forward;
  // The last stage: one micro-batch's loss from its output.
  std::function<torch::Tensor(const torch::Tensor& output, int microbatch)> loss;
  std::vector<std::int64_t> act_shape;  // one micro-batch's activation between stages
};

// What one rank's step did, for the bubble: busy_s is the time in the stages' forward, loss
// and backward calls; the rest of step_s is waiting for messages (and moving them): the
// measured bubble is (step_s - busy_s) / step_s.
struct PpStepStats {
  double step_s = 0, busy_s = 0;
};

// Runs `schedule` for one step with micro-batch inputs `inputs` (read by the first stage only)
// and returns the step's loss (the sum of the micro-batches' scaled losses) on every pp rank.
// Gradients accumulate into the stages' parameters.
double pipeline_step(comm::Communicator& c, const PpScheduleInfo& schedule, int microbatches,
                     int v, const PipelineStages& stages, const std::vector<torch::Tensor>& inputs,
                     PpStepStats* stats = nullptr);

}  // namespace sb::parallel
