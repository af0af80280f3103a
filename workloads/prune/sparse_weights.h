// A magnitude-pruned model's weights served with sparse storage and kernels where they pay
// (the Modelcomp issue: "report what the pruned model really costs"). Each prunable matrix is
// kept either dense (fp32) or as CSR (fp32 values, int32 column indices and row offsets) run
// by LibTorch's sparse x dense matmul (MKL's sparse BLAS on x86). `kernel`: "dense", "csr",
// or "auto": per matrix, the faster of the two on an input of `rows` rows, timed here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/quant/quantizer.h"

namespace sb::prune {

// w (out, in) fp32 -> CSR with int32 indices; bytes of its three arrays.
torch::Tensor to_csr(const torch::Tensor& w);
std::int64_t csr_bytes(const torch::Tensor& csr);
// x (..., in) -> (..., out) = x W^T + b with W in CSR.
torch::Tensor csr_linear(const torch::Tensor& x, const torch::Tensor& csr, const torch::Tensor& b);

struct SparseChoice {
  std::int64_t csr_matrices = 0, dense_matrices = 0;
  double csr_seconds = 0, dense_seconds = 0;  // auto: the timings summed over matrices
};

// fp32 weights of `model` (pruned); the provider runs every linear on the chosen kernel.
std::unique_ptr<quant::QuantizedWeights> sparse_weights(const models::Model& model,
                                                        const models::UnitTensors& weights,
                                                        const std::string& kernel, std::int64_t rows,
                                                        SparseChoice* choice = nullptr);

}  // namespace sb::prune
