// The compressor registry: name -> factory, filled by the compress_<name>.cpp files.
#include "workloads/comm/compressor.h"

#include <algorithm>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::comm {
namespace {
struct Entry {
  std::string doc;
  CompressorFactory make;
};
// Function-local so that registration from other TUs' static initializers is order-safe.
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
}  // namespace

StateDict state_with_prefix(const StateDict& in, const std::string& prefix) {
  StateDict out;
  for (auto it = in.lower_bound(prefix); it != in.end() && it->first.rfind(prefix, 0) == 0; ++it)
    out[it->first.substr(prefix.size())] = it->second;
  return out;
}

void Compressor::decompress_add(const torch::Tensor& wire, torch::Tensor& acc) const {
  acc.add_(decompress(wire, acc.numel()));
}

void register_compressor(const std::string& name, const std::string& doc, CompressorFactory f) {
  registry()[name] = Entry{doc, std::move(f)};
  sb::register_name("compressor", name, doc);
  // Every element-wise compressor is also an implementation of the micro task's collectives
  // (workloads/micro/collective_case.h). Registered here, with the compressor, because the
  // micro task's own static registration may run before the compressors' (another library).
  if (name != "none")
    sb::register_name("comm_impl", name, "compressed collective through the Communicator (comm_backend): " + doc);
}

std::vector<std::string> compressor_names() {
  std::vector<std::string> names;
  for (const auto& [name, e] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& cfg) {
  if (cfg.name == "powersgd")
    SB_FAIL("compressor \"powersgd\" is not element-wise (it needs an all-reduce between its "
            "two halves); use it only for the gradient all-reduce, through "
            "compressed_collectives.h (CompressedCollectives::all_reduce_grads or PowerSGD)");
  auto it = registry().find(cfg.name);
  if (it == registry().end())
    SB_FAIL("unknown compressor \"{}\"; known: {}", cfg.name, fmt::join(compressor_names(), ", "));
  return it->second.make(cfg);
}

torch::Tensor wire_view(const torch::Tensor& wire, std::int64_t offset, std::int64_t count,
                        torch::ScalarType dtype) {
  SB_CHECK(wire.scalar_type() == torch::kUInt8 && wire.is_contiguous() && wire.dim() == 1,
           "wire buffers are contiguous 1-D uint8 (got {} {})", c10::toString(wire.scalar_type()),
           c10::str(wire.sizes()));
  const std::int64_t bytes = count * static_cast<std::int64_t>(c10::elementSize(dtype));
  SB_CHECK(offset >= 0 && offset + bytes <= wire.numel(),
           "wire buffer of {} bytes is too short for {} elements of {} at byte {}",
           wire.numel(), count, c10::toString(dtype), offset);
  return torch::from_blob(wire.data_ptr<std::uint8_t>() + offset, {count},
                          torch::TensorOptions().dtype(dtype));
}

void check_compress_input(const torch::Tensor& x, const std::string& who) {
  SB_CHECK(x.scalar_type() == torch::kFloat && x.dim() == 1 && x.is_contiguous(),
           "{}: compressors take a contiguous 1-D fp32 tensor, got {} of shape {}{}; flatten "
           "the buffer (.reshape(-1).contiguous()) and cast it to fp32 first",
           who, c10::toString(x.scalar_type()), c10::str(x.sizes()),
           x.is_contiguous() ? "" : " (non-contiguous)");
}

void check_wire(const torch::Tensor& wire, std::int64_t expected_bytes, const std::string& who) {
  SB_CHECK(wire.scalar_type() == torch::kUInt8 && wire.dim() == 1 && wire.is_contiguous() &&
               wire.numel() == expected_bytes,
           "{}: expected a contiguous uint8 wire buffer of {} bytes, got {} of shape {}; the "
           "element count passed to decompress must be the one given to compress",
           who, expected_bytes, c10::toString(wire.scalar_type()), c10::str(wire.sizes()));
}

}  // namespace sb::comm
