// One pipeline step over the pp group (pp_runner.h).
#include "workloads/parallel/pp_runner.h"

#include <algorithm>
#include <chrono>

#include <torch/autograd.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/comm/compressor.h"

namespace sb::parallel {

using comm::Group;

namespace {
// x to pp rank `peer`, through `codec` when there is one (PipelineStages::act_codec).
comm::Request send_to(comm::Communicator& c, const torch::Tensor& x, int peer, const char* kind,
                      int tag, comm::Compressor* codec) {
  if (!codec) return c.send_async(x.contiguous(), peer, Group::Pp, kind, tag);
  const auto wire = codec->compress(x.to(torch::kFloat32).contiguous().view({-1}));
  return c.send_async(wire, peer, Group::Pp, kind, tag, static_cast<std::uint64_t>(x.numel()) * 4);
}
// Into x (its shape and dtype) from pp rank `peer`.
void recv_into(comm::Communicator& c, torch::Tensor& x, int peer, const char* kind, int tag,
               comm::Compressor* codec) {
  if (!codec) return c.recv(x, peer, Group::Pp, kind, tag);
  auto wire = torch::empty({codec->wire_bytes(x.numel())}, torch::kUInt8);
  c.recv(wire, peer, Group::Pp, kind, tag, static_cast<std::uint64_t>(x.numel()) * 4);
  x.copy_(codec->decompress(wire, x.numel()).view(x.sizes()));
}
}  // namespace

double pipeline_step(comm::Communicator& c, const PpScheduleInfo& schedule, int m, int v,
                     const PipelineStages& st, const std::vector<torch::Tensor>& inputs,
                     PpStepStats* stats) {
  using clock = std::chrono::steady_clock;
  const auto step0 = clock::now();
  double busy = 0;
  auto since = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  const int pp = c.size(Group::Pp), r = c.rank(Group::Pp), last = pp * v - 1;
  const std::string why = pp_schedule_refuses(schedule, pp, m, v);
  SB_CHECK(why.empty(), "{}", why);
  SB_CHECK(v * m * 2 <= 32767, "{} micro-batches x {} virtual stages exceed the message tags",
           m, v);
  const PpPlan plan = schedule.make(pp, m, v);
  // Per (chunk, micro-batch): the stage's input (a leaf when received) and output.
  std::vector<std::vector<torch::Tensor>> in(v, std::vector<torch::Tensor>(m)), out = in;
  std::vector<comm::Request> sends;
  torch::Tensor loss_sum = torch::zeros({1}, torch::kFloat64);
  auto tag = [&](int chunk, int mb, bool grad) { return 2 * (mb * v + chunk) + (grad ? 1 : 0); };
  // Completed sends are dropped after every action: each holds its tensor (an activation
  // would otherwise outlive its backward), and testing moves the ones in flight (Open MPI's
  // shared memory moves a message only inside MPI calls).
  auto prune = [&] {
    sends.erase(std::remove_if(sends.begin(), sends.end(), [](comm::Request& q) { return q.test(); }),
                sends.end());
  };
  for (const PpAction& a : plan[r]) {
    prune();
    const int s = a.chunk * pp + r;
    const int up = (r + pp - 1) % pp, down = (r + 1) % pp;  // the ranks of stages s - 1, s + 1
    if (a.forward) {
      torch::Tensor x;
      if (s == 0) {
        if (!inputs.empty()) x = inputs.at(a.microbatch);
      } else {
        x = torch::empty(st.act_shape, torch::TensorOptions().dtype(st.act_dtype));
        // The activation of stage s - 1, which sent it under the tag of its own chunk.
        const int from_chunk = (s - 1) / pp;
        recv_into(c, x, up, "pp_act", tag(from_chunk, a.microbatch, false), st.act_codec.get());
        x.set_requires_grad(true);
      }
      const auto t0 = clock::now();
      torch::Tensor y = st.forward(a.chunk, a.microbatch, x);
      in[a.chunk][a.microbatch] = x;
      if (s == last) {
        y = st.loss(y, a.microbatch);
        loss_sum += y.detach().to(torch::kFloat64);
      }
      busy += since(t0);
      if (s != last) {
        sends.push_back(send_to(c, y.detach(), down, "pp_act", tag(a.chunk, a.microbatch, false),
                                st.act_codec.get()));
        prune();
      }
      out[a.chunk][a.microbatch] = y;
    } else {
      torch::Tensor y = out[a.chunk][a.microbatch];
      SB_CHECK(y.defined(), "pipeline: backward of micro-batch {} on stage {} before its forward",
               a.microbatch, s);
      torch::Tensor g;
      if (s != last) {
        g = torch::empty(st.act_shape, torch::TensorOptions().dtype(st.act_dtype));
        const int from_chunk = (s + 1) / pp;
        recv_into(c, g, down, "pp_grad", tag(from_chunk, a.microbatch, true), st.grad_codec.get());
      }
      const auto t0 = clock::now();
      if (s == last)
        y.backward();
      else
        y.backward(g);
      busy += since(t0);
      if (s > 0)
        sends.push_back(send_to(c, in[a.chunk][a.microbatch].grad(), up, "pp_grad",
                                tag(a.chunk, a.microbatch, true), st.grad_codec.get()));
      prune();
      in[a.chunk][a.microbatch] = out[a.chunk][a.microbatch] = torch::Tensor();  // free them
    }
  }
  for (auto& q : sends) q.wait();
  // The loss lives on the last stage's rank: a sum over pp gives it to every rank.
  if (stats) stats->step_s = since(step0), stats->busy_s = busy;
  c.all_reduce(loss_sum, Group::Pp, "other");
  return loss_sum.item<double>();
}

double pipeline_forward(comm::Communicator& c, int v, const PipelineStages& st) {
  torch::NoGradGuard ng;
  const int pp = c.size(Group::Pp), r = c.rank(Group::Pp), last = pp * v - 1;
  const int up = (r + pp - 1) % pp, down = (r + 1) % pp;
  torch::Tensor loss = torch::zeros({1}, torch::kFloat64);
  std::vector<comm::Request> sends;
  for (int chunk = 0; chunk < v; ++chunk) {
    const int s = chunk * pp + r;
    torch::Tensor x;
    if (s > 0) {
      x = torch::empty(st.act_shape, torch::TensorOptions().dtype(st.act_dtype));
      recv_into(c, x, up, "pp_act", s - 1, st.act_codec.get());
    }
    torch::Tensor y = st.forward(chunk, 0, x);
    if (s == last)
      loss += st.loss(y, 0).to(torch::kFloat64);
    else
      sends.push_back(send_to(c, y, down, "pp_act", s, st.act_codec.get()));
  }
  for (auto& q : sends) q.wait();
  c.all_reduce(loss, Group::Pp, "other");
  return loss.item<double>();
}

}  // namespace sb::parallel
