// safetensors files (8-byte little-endian header length, JSON header of dtype / shape /
// data_offsets, raw little-endian data) and model checkpoints in them with Hugging Face
// tensor names, mapped to and from the [unit][param] layout of a Model.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace sb::data {

// One tensor of a safetensors file: where its bytes are, what they hold.
struct StEntry {
  std::string file;
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<std::int64_t> shape;
  std::int64_t begin = 0, bytes = 0;  // absolute byte offset in the file, byte count
};
// The header alone, validated (dtypes, offsets within the file), name -> entry.
std::map<std::string, StEntry> read_safetensors_header(const std::string& path);
// That tensor's bytes only, as fp32 on the CPU.
torch::Tensor read_entry(const StEntry& e);
// Every tensor of the file as fp32 (F32, F16, BF16 and F64 are read), CPU, name -> tensor.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);
// Writes F32 tensors in the given order, atomically (temporary name, then rename).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

struct CheckpointLoadOptions {
  // Task heads absent from the file (BERT's cls.* / classifier.*, e.g. a BertModel
  // checkpoint) are initialised from `seed` instead of being an error.
  bool init_missing_heads = true;
  std::uint64_t seed = 1234;
};

// The entries of a checkpoint without reading data: a .safetensors file, or a folder with
// model.safetensors or with model.safetensors.index.json and the shards it names
// (model-0000i-of-0000n.safetensors). `described`, when given, receives the file that errors
// should name (the file, or the index).
std::map<std::string, StEntry> checkpoint_entries(const std::string& path,
                                                  std::string* described = nullptr);

// A checkpoint read piece by piece: the constructor reads the headers only and checks every
// name and shape against the model (errors before any data is read); unit(u) reads that
// unit's tensors, slice() only a range of them. The FSDP engine builds from slices, so each
// rank reads its own shard and none holds the whole model (tests/mpi/fsdp_lazy_load.cpp).
class CheckpointReader {
 public:
  CheckpointReader(const models::Model& model, const std::string& path,
                   CheckpointLoadOptions opt = {});
  // fp32, spec shapes; Conv1D weights as transposed views of the file's (in, out) layout.
  std::vector<torch::Tensor> unit(int u);
  // Elements [offset, offset + size) of unit u's parameters flattened in spec order (fp32,
  // 1-D, zeros past the unit's end), reading only their bytes: a byte range per tensor, and
  // for a Conv1D weight (stored transposed) one run per stored row of the columns the range
  // touches. The FSDP engine's slice source: each rank reads its own shard.
  torch::Tensor slice(int u, std::int64_t offset, std::int64_t size);
  std::int64_t bytes_read() const { return bytes_read_; }

 private:
  const models::Model& model_;
  CheckpointLoadOptions opt_;
  std::string file_;  // what errors name
  std::map<std::string, StEntry> entries_;  // by our parameter name
  std::int64_t bytes_read_ = 0;
};

// path: a .safetensors file, or a folder (checkpoint_entries). Accepts GPT-2 names
// with or without "transformer.", BERT names with or without "bert.", LayerNorm gamma/beta;
// GPT-2 Conv1D weights (stored (in, out)) are transposed to (out, in). Buffers and tied
// copies (attn.bias, lm_head.weight, cls.predictions.decoder.*, position_ids, NSP head) are
// skipped; any other unknown tensor, a missing one or a wrong shape is an error.
models::UnitTensors load_checkpoint(const models::Model& model, const std::string& path,
                                    const CheckpointLoadOptions& opt = {});
// Hugging Face names (GPT-2 without prefix, Conv1D weights transposed back to (in, out)).
void save_checkpoint(const models::Model& model, const models::UnitTensors& weights,
                     const std::string& path);

// A Hugging Face model folder: model.safetensors (save_checkpoint's names) and config.json
// (models/hf_config.h), which loads back as `model = dir` and, by layout and names, into
// transformers' GPT2LMHeadModel / BertForMaskedLM / BertForSequenceClassification.
void export_hf_folder(const models::Model& model, const models::UnitTensors& weights,
                      const std::string& dir);

}  // namespace sb::data
