// Compressors for collectives: one per file, chosen by name (none, fp16, bf16, int8, topk).
// A compressor maps a 1-D fp32 tensor of n elements to a uint8 wire buffer whose size is
// a pure function of n (wire_bytes), so collectives can use fixed-count MPI calls.
// Error feedback (what was not sent is added to the next input) is a separate wrapper.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::comm {

struct CompressorConfig {
  std::string name = "none";      // none | fp16 | bf16 | int8 | topk | powersgd
  std::int64_t block = 256;       // int8: elements per absmax block (one fp32 scale each)
  bool stochastic = false;        // int8: stochastic rounding
  double ratio = 0.01;            // topk: k = ceil(ratio * n), at least 1
  std::int64_t rank = 4;          // powersgd: approximation rank
  bool error_feedback = false;    // topk/int8/powersgd: keep the residual per rank
  std::uint64_t seed = 0;         // stochastic rounding
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  // Exact bytes on the wire for n input elements.
  virtual std::int64_t wire_bytes(std::int64_t n) const = 0;
  // x: (n) fp32 contiguous -> (wire_bytes(n)) uint8.
  virtual torch::Tensor compress(const torch::Tensor& x) = 0;
  // (wire_bytes(n)) uint8 -> (n) fp32.
  virtual torch::Tensor decompress(const torch::Tensor& wire, std::int64_t n) const = 0;
};

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& cfg);
std::vector<std::string> compressor_names();

}  // namespace sb::comm
