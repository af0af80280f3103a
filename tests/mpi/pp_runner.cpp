// A pipeline step (workloads/parallel/pp_runner.h) over mesh.pp = every rank, for each
// schedule (gpipe, 1f1b, interleaved_1f1b with 2 virtual stages) and several micro-batch
// counts: the loss and every stage's parameter gradients equal the one-process step on the
// whole model and batch (fp32, 1e-6 relative), and the trace holds exactly one activation
// message forward and one gradient message backward per micro-batch per stage boundary, each
// of one micro-batch's activation bytes.
#include <torch/types.h>

#include <ATen/ATen.h>

#include <mutex>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/comm/communicator.h"
#include "workloads/parallel/pp_runner.h"

using sb::comm::Communicator;
using sb::comm::Group;
using sbtest::world_size;

namespace {

constexpr std::int64_t kB = 3, kH = 8, kLayersPerStage = 2;

struct Model {
  std::vector<torch::Tensor> w, b;  // layer i: tanh(x @ w_i^T + b_i)
};

Model full_model(int layers) {
  torch::manual_seed(11);
  Model m;
  for (int i = 0; i < layers; ++i) {
    m.w.push_back((torch::randn({kH, kH}) * 0.5).set_requires_grad(true));
    m.b.push_back((torch::randn({kH}) * 0.1).set_requires_grad(true));
  }
  return m;
}

torch::Tensor run_layers(const Model& m, int from, int to, torch::Tensor x) {
  for (int i = from; i < to; ++i) x = torch::tanh(at::linear(x, m.w[i], m.b[i]));
  return x;
}

void check(const std::string& schedule, int micro, int v) {
  Communicator c(MPI_COMM_WORLD, [] {
    sb::Mesh mesh;
    mesh.pp = world_size();
    return mesh;
  }());
  const int pp = c.size(Group::Pp), r = c.rank(Group::Pp);
  const int layers = pp * v * kLayersPerStage;
  torch::manual_seed(5);
  std::vector<torch::Tensor> xs, ts;
  for (int mb = 0; mb < micro; ++mb) xs.push_back(torch::randn({kB, kH})), ts.push_back(torch::randn({kB, kH}));
  // The one-process step: the mean over micro-batches of each one's mean squared error.
  Model ref = full_model(layers);
  torch::Tensor ref_loss = torch::zeros({});
  for (int mb = 0; mb < micro; ++mb)
    ref_loss = ref_loss + (run_layers(ref, 0, layers, xs[mb]) - ts[mb]).pow(2).mean() / micro;
  ref_loss.backward();
  // The pipeline: every rank holds the same initial weights and uses its stages' layers.
  Model mine = full_model(layers);
  std::mutex mu;
  int act = 0, grad = 0;
  std::uint64_t bad_bytes = 0;
  c.set_trace_hook([&](const sb::CommEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (e.op != "send") return;
    (e.kind == "pp_act" ? act : grad) += 1;
    if (e.wire_bytes != static_cast<std::uint64_t>(kB * kH * 4) || e.dim != "pp") ++bad_bytes;
  }, MPI_Wtime());
  sb::parallel::PipelineStages st;
  st.act_shape = {kB, kH};
  st.forward = [&](int chunk, int, const torch::Tensor& x) {
    const int s = chunk * pp + r;
    return run_layers(mine, s * kLayersPerStage, (s + 1) * kLayersPerStage, x);
  };
  st.loss = [&](const torch::Tensor& y, int mb) { return (y - ts[mb]).pow(2).mean() / micro; };
  const double loss = sb::parallel::pipeline_step(c, sb::parallel::find_pp_schedule(schedule),
                                                  micro, v, st, xs);
  c.set_trace_hook(nullptr, 0);
  const std::string at = schedule + " m" + std::to_string(micro) + " v" + std::to_string(v);
  EXPECT_NEAR(loss, ref_loss.item<double>(), 1e-6 * std::abs(ref_loss.item<double>())) << at;
  for (int chunk = 0; chunk < v; ++chunk) {
    const int s = chunk * pp + r;
    for (int i = s * kLayersPerStage; i < (s + 1) * kLayersPerStage; ++i) {
      EXPECT_TRUE(torch::allclose(mine.w[i].grad(), ref.w[i].grad(), 1e-6, 1e-7)) << at << " layer " << i;
      EXPECT_TRUE(torch::allclose(mine.b[i].grad(), ref.b[i].grad(), 1e-6, 1e-7)) << at << " layer " << i;
    }
  }
  int counts[3] = {act, grad, static_cast<int>(bad_bytes)};
  MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(counts[0], micro * (pp * v - 1)) << at;  // one per micro-batch per boundary
  EXPECT_EQ(counts[1], micro * (pp * v - 1)) << at;
  EXPECT_EQ(counts[2], 0) << at;
}

TEST(PpRunner, EverySchedulesGradientsAreTheOneProcessStep) {
  const int n = world_size();
  for (const char* s : {"gpipe", "1f1b"})
    for (int m : {1, 3, 4}) check(s, m, 1);
  for (int m : {n, 2 * n}) check("interleaved_1f1b", m, 2);
}

}  // namespace
