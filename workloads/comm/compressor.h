// Compressors for collectives: one per file, chosen by name (none, fp16, bf16, int8, topk).
// A compressor maps a 1-D fp32 tensor of n elements to a uint8 wire buffer whose size is
// a pure function of n (wire_bytes), so collectives can use fixed-count MPI calls.
// Error feedback (what was not sent is added to the next input) is a separate wrapper.
// State that lives from call to call (int8's stochastic-rounding generator, error-feedback
// residuals, PowerSGD's warm start) is saved and restored as a StateDict, so that a run resumed
// from a checkpoint compresses exactly as the uninterrupted run would have.
#pragma once
#include <cstdint>
#include <functional>
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

// Compression state by name, per rank: tensors (CPU, contiguous) under names such as
// "grad_ef/unit3" or "param/generator". Written into and read from FSDP checkpoints.
using StateDict = std::map<std::string, torch::Tensor>;

// The entries of `in` whose names start with `prefix`, with the prefix removed.
StateDict state_with_prefix(const StateDict& in, const std::string& prefix);

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
  // acc (n) fp32 += decompress(wire, n), bit-identical to that; sparse formats (topk)
  // override it to touch only their k entries.
  virtual void decompress_add(const torch::Tensor& wire, torch::Tensor& acc) const;
  // The element type of the wire when the wire is just the input cast to it (none: fp32,
  // fp16, bf16); Undefined for every other format. Collectives use it to cast once from any
  // input dtype and to gather such wires straight into a destination of that type.
  virtual torch::ScalarType cast_dtype() const { return torch::ScalarType::Undefined; }
  // State that changes from call to call, under names prefix + "..."; stateless compressors
  // (all but stochastic int8) add nothing. load_state restores exactly what save_state wrote
  // (a missing entry is an error naming it).
  virtual void save_state(StateDict& out, const std::string& prefix) const {}
  virtual void load_state(const StateDict& in, const std::string& prefix) {}
};

// Throws sb::Error listing the known names for an unknown cfg.name; "powersgd" is refused
// here with the reason (it is not element-wise: see compress_powersgd.h).
std::unique_ptr<Compressor> make_compressor(const CompressorConfig& cfg);
// Element-wise compressors (what make_compressor accepts), sorted.
std::vector<std::string> compressor_names();

// Each compress_<name>.cpp registers its compressor at static-init time (and the name in the
// harness name set "compressor", which the compress.*.name keys accept).
using CompressorFactory = std::function<std::unique_ptr<Compressor>(const CompressorConfig&)>;
void register_compressor(const std::string& name, const std::string& doc, CompressorFactory f);

// Views a wire buffer (uint8, contiguous) at byte offset `offset` as `count` elements of
// `dtype` (no copy; the view aliases the wire buffer).
torch::Tensor wire_view(const torch::Tensor& wire, std::int64_t offset, std::int64_t count,
                        torch::ScalarType dtype);
// Shared argument checks of the compressors (throw sb::Error saying what to change).
void check_compress_input(const torch::Tensor& x, const std::string& who);
void check_wire(const torch::Tensor& wire, std::int64_t expected_bytes, const std::string& who);

}  // namespace sb::comm
