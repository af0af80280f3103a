// Cast compressors (none, fp16, bf16): the wire holds the n elements in a narrower float type.
#pragma once
#include <string>

#include "workloads/comm/compressor.h"

namespace sb::comm {

class CastCompressor final : public Compressor {
 public:
  CastCompressor(std::string name, torch::ScalarType wire_dtype)
      : name_(std::move(name)), dtype_(wire_dtype) {}
  std::string name() const override { return name_; }
  std::int64_t wire_bytes(std::int64_t n) const override {
    return n * static_cast<std::int64_t>(c10::elementSize(dtype_));
  }
  torch::ScalarType cast_dtype() const override { return dtype_; }
  // x: (n) fp32 -> (n * sizeof(wire dtype)) uint8, round-to-nearest-even cast.
  torch::Tensor compress(const torch::Tensor& x) override {
    check_compress_input(x, name_);
    auto wire = torch::empty({wire_bytes(x.numel())}, torch::kUInt8);
    wire_view(wire, 0, x.numel(), dtype_).copy_(x);
    return wire;
  }
  torch::Tensor decompress(const torch::Tensor& wire, std::int64_t n) const override {
    check_wire(wire, wire_bytes(n), name_);
    return wire_view(wire, 0, n, dtype_).to(torch::kFloat);
  }

 private:
  std::string name_;
  torch::ScalarType dtype_;
};

}  // namespace sb::comm
