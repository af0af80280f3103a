// Sparse storage and kernels for magnitude-pruned weights (sparse_weights.h).
#include "workloads/prune/sparse_weights.h"

#include <chrono>

#include "harness/core/check.h"
#include "workloads/prune/pruner.h"

namespace sb::prune {
namespace {

double seconds(const std::function<void()>& f, int reps) {
  f();  // warm-up: first-call allocations
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

class SparseWeights final : public quant::QuantizedWeights {
 public:
  SparseWeights(const models::Model& model, const models::UnitTensors& weights, const std::string& kernel,
                std::int64_t rows, SparseChoice* choice) {
    SB_CHECK(kernel == "auto" || kernel == "dense" || kernel == "csr",
             "pruning.kernel '{}': use auto, dense or csr", kernel);
    const auto& units = model.units();
    for (std::size_t u = 0; u < units.size(); ++u) {
      auto& dst = params_.emplace_back();
      for (std::size_t i = 0; i < units[u].params.size(); ++i) {
        const auto& spec = units[u].params[i];
        auto w = weights.at(u).at(i).detach().to(torch::kFloat).contiguous();
        Param p;
        bool csr = false;
        if (is_prunable(spec.name, spec.shape) && kernel != "dense") {
          auto c = to_csr(w);
          if (kernel == "csr") {
            csr = true;
          } else {  // time both on `rows` rows of input
            auto x = torch::randn({rows, w.size(1)});
            const double ts = seconds([&] { csr_linear(x, c, torch::Tensor()); }, 2);
            const double td = seconds([&] { at::linear(x, w); }, 2);
            csr = ts < td;
            if (choice) choice->csr_seconds += ts, choice->dense_seconds += td;
          }
          if (csr) {
            p.csr = c;
            p.placeholder = torch::zeros({1}).expand(spec.shape);
            bytes_ += csr_bytes(c);
          }
        }
        if (!csr) {
          p.dense = w;
          bytes_ += 4 * w.numel();
        }
        if (choice && is_prunable(spec.name, spec.shape)) ++(csr ? choice->csr_matrices : choice->dense_matrices);
        dst.push_back(std::move(p));
      }
    }
  }
  std::vector<torch::Tensor> acquire(int unit) override {
    std::vector<torch::Tensor> out;
    for (const auto& p : params_.at(unit)) out.push_back(p.dense.defined() ? p.dense : p.placeholder);
    return out;
  }
  void release(int, const torch::Tensor&) override {}
  torch::Tensor linear(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) override {
    const auto& p = params_.at(unit).at(w_index);
    return p.csr.defined() ? csr_linear(x, p.csr, b) : at::linear(x, w, b);
  }
  std::int64_t model_bytes() const override { return bytes_; }

 private:
  struct Param {
    torch::Tensor dense, csr, placeholder;
  };
  std::vector<std::vector<Param>> params_;
  std::int64_t bytes_ = 0;
};

}  // namespace

torch::Tensor to_csr(const torch::Tensor& w) {
  auto c = w.to_sparse_csr();
  return torch::sparse_csr_tensor(c.crow_indices().to(torch::kInt), c.col_indices().to(torch::kInt),
                                  c.values(), c.sizes(), c.options());
}

std::int64_t csr_bytes(const torch::Tensor& csr) {
  auto nbytes = [](const torch::Tensor& t) { return t.numel() * static_cast<std::int64_t>(t.element_size()); };
  return nbytes(csr.crow_indices()) + nbytes(csr.col_indices()) + nbytes(csr.values());
}

torch::Tensor csr_linear(const torch::Tensor& x, const torch::Tensor& csr, const torch::Tensor& b) {
  const auto in = x.size(-1);
  auto x2 = x.reshape({-1, in});
  auto y = at::matmul(csr, x2.t()).t();  // (rows, out)
  if (b.defined()) y = y + b;
  auto shape = x.sizes().vec();
  shape.back() = csr.size(0);
  return y.reshape(shape);
}

std::unique_ptr<quant::QuantizedWeights> sparse_weights(const models::Model& model,
                                                        const models::UnitTensors& weights,
                                                        const std::string& kernel, std::int64_t rows,
                                                        SparseChoice* choice) {
  return std::make_unique<SparseWeights>(model, weights, kernel, rows, choice);
}

}  // namespace sb::prune
