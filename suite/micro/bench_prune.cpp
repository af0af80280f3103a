// Pruning micro-benchmark (the Modelcomp issue), 2 intra-op threads, every figure beside the
// dense baseline of the same run:
//  crossover  one gpt2 FFN matrix (3072 x 768), magnitude-pruned to each sparsity: CSR
//             (LibTorch's sparse x dense matmul, MKL) against the dense matmul, at 1, 8 and
//             1024 input rows; the sparsity from which CSR is faster, per row count.
//  model      a whole model (default gpt2), a batch of 8 x 128: dense fp32; magnitude 90%
//             (stored weights' bytes with indices against dense; latency with the kernels
//             pruning.kernel = auto picks); ffn 50% (a smaller dense model); latencies
//             interleaved over rounds, medians printed.
// Usage: micro_bench_prune [--model gpt2] [--rounds 3]
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "suite/micro/bench_util.h"
#include "workloads/infer/loadgen.h"
#include "workloads/models/params.h"
#include "workloads/prune/pruner.h"
#include "workloads/prune/sparse_weights.h"
#include "workloads/quant/quantizer.h"

namespace {

using sb::bench::arg;
using sb::bench::now_s;
using I = std::int64_t;

double time_s(const std::function<void()>& f, int reps) {
  f();
  const double t0 = now_s();
  for (int i = 0; i < reps; ++i) f();
  return (now_s() - t0) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(2);
  torch::NoGradGuard ng;
  const std::string model_name = arg(argc, argv, "--model", "gpt2");
  const int rounds = std::atoi(arg(argc, argv, "--rounds", "3").c_str());

  // 1. Crossover on one matrix.
  auto gen = at::detail::createCPUGenerator(1);
  auto w = torch::randn({3072, 768}, gen) * 0.02;
  std::printf("# one FFN matrix 3072 x 768, fp32, 2 threads: ms per matmul (dense | CSR)\n");
  std::printf("%-9s", "sparsity");
  const std::vector<I> row_counts = {1, 8, 1024};
  for (I r : row_counts) std::printf(" | %5lld rows: dense    CSR  ", static_cast<long long>(r));
  std::printf("\n");
  std::map<I, double> crossover;
  for (double s : {0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99}) {
    auto wp = torch::Tensor(w);
    {
      auto thr = std::get<0>(w.abs().reshape({-1}).kthvalue(static_cast<I>(s * static_cast<double>(w.numel()))));
      wp = w * (w.abs() > thr).to(torch::kFloat);
    }
    auto csr = sb::prune::to_csr(wp);
    std::printf("%-9.2f", s);
    for (I r : row_counts) {
      auto x = torch::randn({r, 768}, gen);
      const int reps = r >= 1024 ? 5 : 50;
      const double td = time_s([&] { at::linear(x, wp); }, reps);
      const double tc = time_s([&] { sb::prune::csr_linear(x, csr, torch::Tensor()); }, reps);
      std::printf(" |            %7.3f %7.3f", 1e3 * td, 1e3 * tc);
      if (tc < td && !crossover.count(r)) crossover[r] = s;
    }
    std::printf("\n");
  }
  for (I r : row_counts)
    std::printf("crossover at %lld rows: %s\n", static_cast<long long>(r),
                crossover.count(r) ? ("CSR faster from sparsity " + std::to_string(crossover[r]).substr(0, 4)).c_str()
                                   : "CSR never faster up to 0.99");

  // 2. A whole model.
  auto model = sb::models::make_model(model_name);
  const auto weights = sb::models::init_params(model->units(), 1);
  sb::models::Batch b;
  b.input_ids = torch::randint(model->config().vocab, {8, 128}, gen);
  auto dense = sb::quant::quantize("none", *model, weights);
  auto mag = sb::prune::prune("magnitude", *model, weights, {0.9, "global"});
  sb::prune::SparseChoice choice;
  auto mag_w = sb::prune::sparse_weights(*mag.model, mag.weights, "auto", 8 * 128, &choice);
  auto csr_all = sb::prune::sparse_weights(*mag.model, mag.weights, "csr", 8 * 128);
  auto ffn = sb::prune::prune("ffn", *model, weights, {0.5, "global"});
  auto ffn_w = sb::quant::quantize("none", *ffn.model, ffn.weights);
  std::vector<double> td, tm, tf;
  for (int r = 0; r < rounds; ++r) {
    td.push_back(time_s([&] { model->logits(*dense, b); }, 1));
    tm.push_back(time_s([&] { mag.model->logits(*mag_w, b); }, 1));
    tf.push_back(time_s([&] { ffn.model->logits(*ffn_w, b); }, 1));
    std::printf("round %d: dense %.0f ms, magnitude 90%% %.0f ms, ffn 50%% %.0f ms\n", r, 1e3 * td.back(),
                1e3 * tm.back(), 1e3 * tf.back());
  }
  const double d = sb::infer::quantile(td, 0.5), m = sb::infer::quantile(tm, 0.5), f = sb::infer::quantile(tf, 0.5);
  // Stored weights of the prunable matrices: all in CSR against dense fp32.
  I dense_prunable = 0;
  for (const auto& u : model->units())
    for (const auto& p : u.params)
      if (sb::prune::is_prunable(p.name, p.shape)) dense_prunable += 4 * p.numel();
  const double other = static_cast<double>(dense->model_bytes() - dense_prunable);
  const double csr_prunable = static_cast<double>(csr_all->model_bytes()) - other;
  std::printf("%s 8x128 fp32: dense %.0f ms\n", model_name.c_str(), 1e3 * d);
  std::printf("  magnitude 90%%: %.0f ms = %.2fx dense (kernels: %lld CSR, %lld dense, chosen by timing); "
              "pruned matrices stored in CSR: %.3fx their dense bytes (target <= 0.2: %s); whole model "
              "(embeddings dense) %.3fx\n", 1e3 * m, m / d, static_cast<long long>(choice.csr_matrices),
              static_cast<long long>(choice.dense_matrices), csr_prunable / static_cast<double>(dense_prunable),
              csr_prunable / static_cast<double>(dense_prunable) <= 0.2 ? "PASS" : "MISS",
              static_cast<double>(csr_all->model_bytes()) / static_cast<double>(dense->model_bytes()));
  std::printf("  ffn 50%%: %.0f ms = %.2fx faster than dense (target >= 1.5x: %s), %lld -> %lld parameters\n",
              1e3 * f, d / f, d / f >= 1.5 ? "PASS" : "MISS",
              static_cast<long long>(sb::models::count_params(model->units())),
              static_cast<long long>(sb::models::count_params(ffn.model->units())));
  return 0;
}
