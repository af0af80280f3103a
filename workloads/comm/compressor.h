// Compressors for collectives: one per file (compress_<name>.cpp), registered by name with a
// record of what it is (CompressorInfo: its form, settings, validation, state and wire bytes),
// which callers ask instead of comparing names. Two forms:
// - element-wise codecs (none, fp16, bf16, int8, topk): a Compressor maps a 1-D fp32 tensor of
//   n elements to a uint8 wire buffer whose size is a pure function of n (wire_bytes), so
//   collectives can use fixed-count calls; error feedback (what was not sent is added to the
//   next input) is a separate wrapper the collectives apply;
// - whole all-reduces (powersgd): a WholeAllReduce (whole_all_reduce.h) runs the gradient
//   all-reduce itself, as phases around exact plain collectives, and keeps its own state.
// State that lives from call to call (int8's stochastic-rounding generator, error-feedback
// residuals, PowerSGD's warm start) is saved and restored as a StateDict, so that a run resumed
// from a checkpoint compresses exactly as the uninterrupted run would have.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/core/registry.h"
#include "harness/workload.h"

namespace sb::comm {

// The data-parallel kinds (the FSDP engine's), then tensor parallelism's (workloads/parallel:
// the forward activations' all-reduces and their gradients' in backward), then pipeline
// parallelism's (the activations sent point to point between stages and their gradients).
enum class CollectiveKind { ParamAllGather, GradReduceScatter, GradAllReduce, TpAct, TpGrad, PpAct, PpGrad };
// "param_all_gather", "grad_reduce_scatter", "grad_all_reduce", "tp_act", "tp_grad", "pp_act",
// "pp_grad" (the CommEvent::kind values).
const char* kind_name(CollectiveKind k);
// Key prefix of each kind for the custom policy: compress.<prefix>.<field> ("compress.param",
// "compress.grad", "compress.allreduce", "compress.tp_act", "compress.tp_grad",
// "compress.pp_act", "compress.pp_grad").
const char* key_prefix(CollectiveKind k);
constexpr CollectiveKind kCollectiveKinds[] = {
    CollectiveKind::ParamAllGather, CollectiveKind::GradReduceScatter, CollectiveKind::GradAllReduce,
    CollectiveKind::TpAct, CollectiveKind::TpGrad, CollectiveKind::PpAct, CollectiveKind::PpGrad};
// Traffic of one batch's activations (tensor and pipeline parallelism's kinds): nothing carries
// over to the next batch, so error feedback has nothing to feed back.
inline bool activation_traffic(CollectiveKind k) {
  return k == CollectiveKind::TpAct || k == CollectiveKind::TpGrad || k == CollectiveKind::PpAct ||
         k == CollectiveKind::PpGrad;
}

struct CompressorConfig {
  std::string name = "none";      // a registered compressor (compressor_info)
  bool error_feedback = false;    // keep the residual per rank (not with an identity codec)
  std::uint64_t seed = 0;         // stochastic rounding, warm starts
  // The compressor's own settings (CompressorInfo::settings, keys compress.<collective>.<key>)
  // as given; one not given reads as its declared default. Values are doubles (integers and
  // switches exactly); settings of other compressors may be present and are ignored.
  std::map<std::string, double> settings;

  // key must be a setting some registered compressor declares (else sb::Error listing them).
  CompressorConfig& set(const std::string& key, double value);
  double get(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const { return static_cast<std::int64_t>(get(key)); }
  bool get_bool(const std::string& key) const { return get(key) != 0; }
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

class WholeAllReduce;  // whole_all_reduce.h

// One setting of a compressor: the key compress.<collective>.<key> of the custom policy (one
// per collective kind), its type, default and range. A setting name belongs to one compressor
// (registering another compressor with it fails: name yours differently).
struct CompressorSetting {
  std::string key;                 // "block"
  KeyType type = KeyType::Int;     // Int, Float or Bool
  double def = 0;                  // default
  // Range of Int and Float settings: lo <= v (lo < v when lo_open) and v <= hi; checked by the
  // policy's validation ("int8 block = 0 must be >= 1").
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  // What it sets, after the compressor's name: the key's doc is "custom policy: <compressor>
  // <what> on <collective>"; a switch set on another compressor is refused as "<what> applies
  // to <compressor> only".
  std::string what;
};

enum class CompressorForm {
  Elementwise,    // a codec (make): the collectives compress, send, decompress and reduce
  WholeAllReduce  // runs the gradient all-reduce itself (make_all_reduce), e.g. PowerSGD
};

// What a compressor is and can do; callers ask this, never the name.
struct CompressorInfo {
  CompressorForm form = CompressorForm::Elementwise;
  // The wire is the input as it is (none): a collective with it is not compressed, and error
  // feedback has nothing to keep.
  bool identity = false;
  std::vector<CompressorSetting> settings;
  // Element-wise form: the codec. Its wire bytes are Compressor::wire_bytes; its state is the
  // error-feedback residual the collectives keep (CompressedCollectives::state_bytes_of).
  std::function<std::unique_ptr<Compressor>(const CompressorConfig&)> make;
  // Whole all-reduce form: the all-reduce, built with the same seed on every rank; why it
  // cannot be element-wise (messages: "powersgd <why>"); the state bytes a new buffer of n
  // elements adds on a rank, and the bytes one all-reduce of n elements among `world` ranks
  // sends from a rank (docs/COMPRESSION.md).
  std::function<std::unique_ptr<WholeAllReduce>(const CompressorConfig&)> make_all_reduce;
  std::string why_whole;
  std::function<std::int64_t(const CompressorConfig&, std::int64_t n)> state_bytes;
  std::function<std::int64_t(const CompressorConfig&, std::int64_t n, int world)> wire_bytes;
  // Problems of this compressor on collective kind k beyond its settings' ranges (e.g. topk
  // on the parameter gather), each a sentence that says how to fix it; may be empty.
  std::function<void(const CompressorConfig&, CollectiveKind, std::vector<std::string>&)> validate;
};

// Each compress_<name>.cpp registers its compressor at static-init time: the record, the name
// in the harness name set "compressor" (which the compress.*.name keys accept), its settings'
// keys compress.{param,grad,allreduce}.<key>, and for an element-wise codec that is not the
// identity a "comm_impl" name of the micro task. A duplicate name or setting fails at start-up.
void register_compressor(const std::string& name, const std::string& doc, CompressorInfo info);
// An element-wise codec without settings.
using CompressorFactory = std::function<std::unique_ptr<Compressor>(const CompressorConfig&)>;
void register_compressor(const std::string& name, const std::string& doc, CompressorFactory f);

// Every registered compressor, both forms (an unknown name lists the known ones).
const Registry<CompressorInfo>& compressors();
const CompressorInfo& compressor_info(const std::string& name);
// The compressor that declares setting `key` and the declaration; nullptr when none does.
const CompressorSetting* find_setting(const std::string& key, std::string* owner = nullptr);
// "(0, 1]", ">= 1": the setting's range in messages.
std::string range_text(const CompressorSetting& s);
bool in_range(const CompressorSetting& s, double v);
// "32", "0.02": a setting's value as a suite writes it.
std::string value_text(const CompressorSetting& s, double v);

// An element-wise codec. Throws sb::Error listing the known names for an unknown cfg.name;
// a whole all-reduce (powersgd) is refused here with the reason.
std::unique_ptr<Compressor> make_compressor(const CompressorConfig& cfg);
// Element-wise compressors (what make_compressor accepts), sorted.
std::vector<std::string> compressor_names();

// Views a wire buffer (uint8, contiguous) at byte offset `offset` as `count` elements of
// `dtype` (no copy; the view aliases the wire buffer).
torch::Tensor wire_view(const torch::Tensor& wire, std::int64_t offset, std::int64_t count,
                        torch::ScalarType dtype);
// Shared argument checks of the compressors (throw sb::Error saying what to change).
void check_compress_input(const torch::Tensor& x, const std::string& who);
void check_wire(const torch::Tensor& wire, std::int64_t expected_bytes, const std::string& who);

}  // namespace sb::comm
