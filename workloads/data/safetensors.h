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
  std::string dtype_name = "F32";  // the file's: F32, BF16, I64, BOOL, ...
  std::vector<std::int64_t> shape;
  std::int64_t begin = 0, bytes = 0;  // absolute byte offset in the file, byte count
  // Whether a model parameter may come from it (F32, F16, BF16, F64). Integer and boolean
  // tensors are buffers (transformers 4.x saved position_ids as I64): read only to be skipped.
  bool parameter_dtype() const;
};
// The header alone, validated (every safetensors dtype: F64..BF16, F8_*, I64..I8, U64..U8,
// BOOL; offsets within the file), name -> entry.
std::map<std::string, StEntry> read_safetensors_header(const std::string& path);
// That tensor's bytes only, as fp32 on the CPU.
torch::Tensor read_entry(const StEntry& e);
// Every tensor of the file as fp32 (integers and booleans converted), CPU, name -> tensor.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);
// Writes floating tensors as F32 and integer / boolean ones in their own dtype (I64, I32,
// I16, I8, U8, BOOL), in the given order, atomically (temporary name, then rename).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

struct CheckpointLoadOptions {
  // Tensors a checkpoint may lack (BERT's task heads cls.* / classifier.*, e.g. a BertModel
  // checkpoint, and its pooler, e.g. a BertForMaskedLM one: Family::hf_optional) are
  // initialised from `seed` instead of being an error, as transformers initialises them.
  bool init_missing_heads = true;
  std::uint64_t seed = 1234;
};

// The entries of a checkpoint without reading data: a .safetensors file, or a folder with
// model.safetensors or with model.safetensors.index.json and the shards it names
// (model-0000i-of-0000n.safetensors). `described`, when given, receives the file that errors
// should name (the file, or the index). A folder with only pytorch_model.bin (PyTorch's
// pickles, not read here) is an error giving the one-line conversion
// (suite/data/convert_to_safetensors.py).
std::map<std::string, StEntry> checkpoint_entries(const std::string& path,
                                                  std::string* described = nullptr);

// A checkpoint read piece by piece: the constructor reads the headers only and checks every
// name, shape and dtype against the model (errors before any data is read); unit(u) reads
// that unit's tensors, slice() only a range of them. The FSDP engine builds from slices, so
// each rank reads its own shard and none holds the whole model (tests/mpi/fsdp_lazy_load.cpp).
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

  // The file's tensors that are not parameters, skipped (the family's reason: buffers such
  // as position ids or GPT-2's causal mask, tied copies, the NSP head), and the model's
  // parameters the file lacks, initialised from the seed.
  struct Skipped {
    std::string name, dtype, why;
  };
  const std::vector<Skipped>& skipped() const { return skipped_; }
  const std::vector<std::string>& initialised() const { return initialised_; }
  // One line saying both ("" when nothing was skipped or initialised): what loading prints
  // and records (text checkpoint_note), so that nothing is dropped silently.
  std::string note() const;

 private:
  const models::Model& model_;
  CheckpointLoadOptions opt_;
  std::string file_;  // what errors name
  std::map<std::string, StEntry> entries_;  // by our parameter name
  std::vector<Skipped> skipped_;
  std::vector<std::string> initialised_;
  std::int64_t bytes_read_ = 0;
};

// path: a .safetensors file, or a folder (checkpoint_entries). Accepts GPT-2 names
// with or without "transformer.", BERT names with or without "bert.", LayerNorm gamma/beta;
// GPT-2 Conv1D weights (stored (in, out)) are transposed to (out, in). Tensors the family
// names as not parameters (Family::hf_skip: buffers, tied copies, the NSP head) are skipped
// whatever their dtype (CheckpointReader::note says which); any other unknown tensor, a
// missing one, a wrong shape, or a parameter stored as integers is an error naming it.
// `note`, when given, receives CheckpointReader::note().
models::UnitTensors load_checkpoint(const models::Model& model, const std::string& path,
                                    const CheckpointLoadOptions& opt = {},
                                    std::string* note = nullptr);
// Hugging Face names (GPT-2 without prefix, Conv1D weights transposed back to (in, out)).
void save_checkpoint(const models::Model& model, const models::UnitTensors& weights,
                     const std::string& path);

// For `plan`: what loading checkpoint `path` into model `model` (a preset or a folder) would
// refuse, from the headers alone: the loader's own message, or "" when it loads. Also "" when
// there is nothing to check yet: no path, a path that does not exist (the task warns that an
// earlier point may write it), or a model that is itself invalid (the model check says so).
std::string checkpoint_problem(const std::string& model, const std::string& path);

// What an export keeps beside the weights, so that the folder is a complete Hugging Face
// model: the label names (id -> name; config.json id2label / label2id; ids past them keep
// the model's names or LABEL_<id>) and the tokenizer files of `tokenizer_dir` (vocab.txt,
// tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt,
// added_tokens.json: those present are copied; "" = none).
struct HfExport {
  std::vector<std::string> labels;
  std::string tokenizer_dir;
};
// The tokenizer files an export copies (in this order) when the source folder has them.
const std::vector<std::string>& hf_tokenizer_files();

// A Hugging Face model folder: model.safetensors (save_checkpoint's names), the tokenizer
// files, and config.json last (models/hf_config.h), which loads back as `model = dir` and,
// by layout and names, into transformers' GPT2LMHeadModel / BertForMaskedLM /
// BertForSequenceClassification, AutoTokenizer and pipeline("text-classification").
void export_hf_folder(const models::Model& model, const models::UnitTensors& weights,
                      const std::string& dir, const HfExport& extras = {});

}  // namespace sb::data
