// The compressor registry: name -> record (CompressorInfo), filled by the compress_<name>.cpp
// files, with the keys of every compressor's settings; the settings' reader.
#include "workloads/comm/compressor.h"

#include <algorithm>
#include <cmath>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::comm {
namespace {
// Function-local so that registration from other TUs' static initializers is order-safe.
Registry<CompressorInfo>& registry() {
  static Registry<CompressorInfo> r("compressor", "compressor");
  return r;
}
struct OwnedSetting {
  std::string owner;
  CompressorSetting decl;
};
std::map<std::string, OwnedSetting>& setting_table() {  // setting key -> its compressor
  static std::map<std::string, OwnedSetting> s;
  return s;
}

Value default_value(const CompressorSetting& s) {
  switch (s.type) {
    case KeyType::Bool: return s.def != 0;
    case KeyType::Int: return static_cast<std::int64_t>(s.def);
    default: return s.def;
  }
}

void check_record(const std::string& name, const CompressorInfo& info) {
  SB_CHECK(!registry().has(name),
           "compressor '{}' is registered twice (two files claim the name): rename one", name);
  const bool whole = info.form == CompressorForm::WholeAllReduce;
  SB_CHECK(whole ? (info.make_all_reduce && info.state_bytes && info.wire_bytes &&
                    !info.why_whole.empty() && !info.make)
                 : (info.make && !info.make_all_reduce && !info.state_bytes && !info.wire_bytes),
           "compressor '{}': {}", name,
           whole ? "a whole all-reduce record needs make_all_reduce, state_bytes, wire_bytes "
                   "and why_whole (and no make)"
                 : "an element-wise record needs make (its wire and state bytes follow from the "
                   "codec and the collective: leave make_all_reduce, state_bytes, wire_bytes empty)");
  for (const auto& s : info.settings) {
    SB_CHECK(s.type == KeyType::Int || s.type == KeyType::Float || s.type == KeyType::Bool,
             "compressor '{}': setting '{}' must be Int, Float or Bool", name, s.key);
    SB_CHECK(s.key != "name" && s.key != "error_feedback",
             "compressor '{}': setting '{}' is a key of every collective; name yours differently",
             name, s.key);
    SB_CHECK(s.type == KeyType::Bool || in_range(s, s.def),
             "compressor '{}': the default {} of setting '{}' is outside its range {}", name,
             s.def, s.key, range_text(s));
    auto it = setting_table().find(s.key);
    SB_CHECK(it == setting_table().end(),
             "compressor '{}': setting '{}' is already declared by compressor '{}' (keys "
             "compress.*.{}); name yours differently", name, s.key,
             it == setting_table().end() ? "" : it->second.owner, s.key);
  }
}

// compress.<collective>.<setting> for every collective kind (the custom policy's keys).
void register_setting_keys(const std::string& name, const CompressorInfo& info) {
  for (const auto& s : info.settings) {
    setting_table()[s.key] = {name, s};
    for (auto k : kCollectiveKinds)
      sb::register_key({std::string(key_prefix(k)) + "." + s.key, s.type, default_value(s), "",
                        "custom policy: " + name + " " + s.what + " on " + kind_name(k)});
  }
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

const char* key_prefix(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::ParamAllGather: return "compress.param";
    case CollectiveKind::GradReduceScatter: return "compress.grad";
    case CollectiveKind::GradAllReduce: return "compress.allreduce";
    case CollectiveKind::TpAct: return "compress.tp_act";
    case CollectiveKind::TpGrad: return "compress.tp_grad";
    case CollectiveKind::PpAct: return "compress.pp_act";
    case CollectiveKind::PpGrad: return "compress.pp_grad";
  }
  return "";
}

const char* kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::ParamAllGather: return "param_all_gather";
    case CollectiveKind::GradReduceScatter: return "grad_reduce_scatter";
    case CollectiveKind::GradAllReduce: return "grad_all_reduce";
    case CollectiveKind::TpAct: return "tp_act";
    case CollectiveKind::TpGrad: return "tp_grad";
    case CollectiveKind::PpAct: return "pp_act";
    case CollectiveKind::PpGrad: return "pp_grad";
  }
  return "?";
}

void register_compressor(const std::string& name, const std::string& doc, CompressorInfo info) {
  check_record(name, info);
  const bool codec = info.form == CompressorForm::Elementwise && !info.identity;
  register_setting_keys(name, info);
  registry().add(name, doc, std::move(info));
  // Every element-wise codec is also an implementation of the micro task's collectives
  // (workloads/micro/collective_case.h). Registered here, with the compressor, because the
  // micro task's own static registration may run before the compressors' (another library).
  if (codec)
    sb::register_name("comm_impl", name, "compressed collective through the Communicator (comm_backend): " + doc);
}

void register_compressor(const std::string& name, const std::string& doc, CompressorFactory f) {
  CompressorInfo info;
  info.make = std::move(f);
  register_compressor(name, doc, std::move(info));
}

const Registry<CompressorInfo>& compressors() { return registry(); }
const CompressorInfo& compressor_info(const std::string& name) { return registry().get(name); }

const CompressorSetting* find_setting(const std::string& key, std::string* owner) {
  auto it = setting_table().find(key);
  if (it == setting_table().end()) return nullptr;
  if (owner) *owner = it->second.owner;
  return &it->second.decl;
}

bool in_range(const CompressorSetting& s, double v) {
  return (s.lo_open ? v > s.lo : v >= s.lo) && v <= s.hi;
}

std::string range_text(const CompressorSetting& s) {
  if (std::isinf(s.hi)) return fmt::format("{} {}", s.lo_open ? ">" : ">=", s.lo);
  return fmt::format("in {}{}, {}]", s.lo_open ? "(" : "[", s.lo, s.hi);
}

std::string value_text(const CompressorSetting& s, double v) {
  if (s.type == KeyType::Bool) return v != 0 ? "true" : "false";
  if (s.type == KeyType::Int) return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

CompressorConfig& CompressorConfig::set(const std::string& key, double value) {
  SB_CHECK(find_setting(key), "compressor setting '{}' is declared by no compressor; known "
           "settings: {}", key, [] {
             std::vector<std::string> k;
             for (const auto& [n, s] : setting_table()) k.push_back(n);
             return fmt::format("{}", fmt::join(k, ", "));
           }());
  settings[key] = value;
  return *this;
}

double CompressorConfig::get(const std::string& key) const {
  auto it = settings.find(key);
  if (it != settings.end()) return it->second;
  const CompressorSetting* s = find_setting(key);
  SB_CHECK(s, "compressor setting '{}' is declared by no compressor", key);
  return s->def;
}

std::vector<std::string> compressor_names() {
  std::vector<std::string> names;
  registry().each([&](const std::string& name, const CompressorInfo& info) {
    if (info.form == CompressorForm::Elementwise) names.push_back(name);
  });
  return names;
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& cfg) {
  const CompressorInfo* info = registry().find(cfg.name);
  if (!info)
    SB_FAIL("unknown compressor \"{}\"; known: {}", cfg.name, fmt::join(compressor_names(), ", "));
  if (info->form != CompressorForm::Elementwise)
    SB_FAIL("compressor \"{}\" is not element-wise (it {}); use it only for the gradient "
            "all-reduce, through compressed_collectives.h (CompressedCollectives::"
            "all_reduce_grads)", cfg.name, info->why_whole);
  return info->make(cfg);
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
