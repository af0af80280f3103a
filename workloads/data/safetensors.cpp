// safetensors reader/writer and the Hugging Face checkpoint mapping.
#include "workloads/data/safetensors.h"

#include <sys/stat.h>
#include <fmt/ranges.h>  // fmt::join

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::data {
namespace {

std::int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}
bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// GPT-2's Conv1D layers store weights (in, out): the family says which.
bool is_conv1d(const models::ModelConfig& c, const std::string& name) {
  return models::family(c.family).hf_transposed(name);
}

// The model's name for a file's tensor name ("" = skip this tensor): the family's name map.
std::string canonical_name(const models::ModelConfig& c, const std::string& n) {
  return models::family(c.family).hf_name(n);
}

// Every dtype of the safetensors format, with its width in bytes.
struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  std::int64_t width;
};
const std::vector<DtypeInfo>& dtypes() {
  static const std::vector<DtypeInfo> d = {
      {"F64", torch::kFloat64, 8},      {"F32", torch::kFloat32, 4},
      {"F16", torch::kFloat16, 2},      {"BF16", torch::kBFloat16, 2},
      {"F8_E5M2", torch::kFloat8_e5m2, 1}, {"F8_E4M3", torch::kFloat8_e4m3fn, 1},
      {"I64", torch::kInt64, 8},        {"I32", torch::kInt32, 4},
      {"I16", torch::kInt16, 2},        {"I8", torch::kInt8, 1},
      {"U64", torch::kUInt64, 8},       {"U32", torch::kUInt32, 4},
      {"U16", torch::kUInt16, 2},       {"U8", torch::kUInt8, 1},
      {"BOOL", torch::kBool, 1}};
  return d;
}
const DtypeInfo* dtype_named(const std::string& name) {
  for (const auto& d : dtypes())
    if (name == d.name) return &d;
  return nullptr;
}
// The dtypes a parameter may be stored in (read as fp32). FP8 is refused: real FP8
// checkpoints carry scales beside the weights, which a plain cast would drop.
bool is_parameter_dtype(const std::string& name) {
  return name == "F32" || name == "F16" || name == "BF16" || name == "F64";
}

// "a, b, c, ... (12 in all)": at most `max` names.
std::string name_list(const std::vector<std::string>& names, std::size_t max = 8) {
  std::string list;
  for (std::size_t k = 0; k < names.size() && k < max; ++k) list += (k ? ", " : "") + names[k];
  if (names.size() > max) list += fmt::format(", ... ({} in all)", names.size());
  return list;
}


}  // namespace

bool StEntry::parameter_dtype() const { return is_parameter_dtype(dtype_name); }

std::map<std::string, StEntry> read_safetensors_header(const std::string& path) {
  const std::int64_t size = file_size(path);
  SB_CHECK(size >= 8, "safetensors '{}': missing or shorter than its 8-byte header length", path);
  std::ifstream f(path, std::ios::binary);
  SB_CHECK(f.good(), "cannot open safetensors '{}'", path);
  std::uint64_t hlen = 0;
  unsigned char lb[8];
  f.read(reinterpret_cast<char*>(lb), 8);
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | lb[i];  // little-endian
  SB_CHECK(hlen <= static_cast<std::uint64_t>(size - 8), "safetensors '{}': header length {} exceeds the file ({} bytes)",
           path, hlen, size);
  std::string header(hlen, '\0');
  f.read(header.data(), static_cast<std::streamsize>(hlen));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    SB_FAIL("safetensors '{}': header is not valid JSON: {}", path, e.what());
  }
  const std::int64_t data_begin = 8 + static_cast<std::int64_t>(hlen), data_size = size - data_begin;
  std::map<std::string, StEntry> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    SB_CHECK(e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
             "safetensors '{}': tensor '{}' lacks dtype, shape or data_offsets", path, it.key());
    const std::string dtype = e["dtype"].get<std::string>();
    StEntry x;
    x.file = path;
    x.shape = e["shape"].get<std::vector<std::int64_t>>();
    const auto off = e["data_offsets"].get<std::vector<std::int64_t>>();
    const DtypeInfo* info = dtype_named(dtype);
    if (!info) {
      std::vector<std::string> known;
      for (const auto& d : dtypes()) known.push_back(d.name);
      SB_FAIL("safetensors '{}': tensor '{}' has dtype {}, which the safetensors format does "
              "not define; known: {}", path, it.key(), dtype, fmt::join(known, ", "));
    }
    x.dtype = info->type;
    x.dtype_name = dtype;
    const std::int64_t width = info->width;
    std::int64_t numel = 1;
    for (auto d : x.shape) numel *= d;
    SB_CHECK(off.size() == 2 && off[0] >= 0 && off[1] <= data_size && off[1] - off[0] == numel * width,
             "safetensors '{}': tensor '{}' ({} {} elements) has data_offsets [{}, {}] inconsistent with "
             "its size or the file's {} data bytes", path, it.key(), numel, dtype, off.size() ? off[0] : -1,
             off.size() > 1 ? off[1] : -1, data_size);
    x.begin = data_begin + off[0];
    x.bytes = numel * width;
    out[it.key()] = std::move(x);
  }
  return out;
}

torch::Tensor read_entry(const StEntry& e) {
  std::ifstream f(e.file, std::ios::binary);
  SB_CHECK(f.good(), "cannot open safetensors '{}'", e.file);
  auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
  f.seekg(e.begin);
  f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.bytes));
  SB_CHECK(f.good(), "safetensors '{}': short read of {} bytes at {}", e.file, e.bytes, e.begin);
  return e.dtype == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, e] : read_safetensors_header(path)) out[name] = read_entry(e);
  return out;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  nlohmann::json j;
  j["__metadata__"] = {{"format", "pt"}};
  std::vector<torch::Tensor> data;
  std::int64_t off = 0;
  for (const auto& [name, t0] : tensors) {
    SB_CHECK(!j.contains(name), "write_safetensors: tensor name '{}' given twice", name);
    // Integer and boolean tensors keep their dtype (buffers); everything else is F32.
    const DtypeInfo* kept = nullptr;
    for (const char* n : {"I64", "I32", "I16", "I8", "U8", "BOOL"})
      if (dtype_named(n)->type == t0.scalar_type()) kept = dtype_named(n);
    auto t = t0.detach().to(torch::kCPU, kept ? kept->type : torch::kFloat32).contiguous();
    const std::int64_t bytes = t.numel() * (kept ? kept->width : 4);
    j[name] = {{"dtype", kept ? kept->name : "F32"}, {"shape", t.sizes().vec()},
               {"data_offsets", {off, off + bytes}}};
    off += bytes;
    data.push_back(t);
  }
  std::string header = j.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    SB_CHECK(f.good(), "cannot create '{}'", tmp);
    unsigned char lb[8];
    std::uint64_t hlen = header.size();
    for (int i = 0; i < 8; ++i) lb[i] = static_cast<unsigned char>(hlen >> (8 * i));
    f.write(reinterpret_cast<const char*>(lb), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& t : data)
      f.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    SB_CHECK(f.good(), "writing '{}' failed (disk full?)", tmp);
  }
  SB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}'", tmp, path);
}

namespace {

// A folder without safetensors weights: what it holds instead, and the fix. PyTorch's
// pytorch_model.bin is a zip of pickles, which only Python reads faithfully (any class may be
// pickled in it): it is converted once, by the project's own Python.
[[noreturn]] void no_weights(const std::string& dir) {
  for (const char* bin : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (file_size(dir + "/" + bin) >= 0)
      SB_FAIL("model folder '{}' holds {} (PyTorch's pickle format) but no model.safetensors: "
              "shardbench reads safetensors only; convert it once, weights unchanged, with "
              "`.venv/bin/python suite/data/convert_to_safetensors.py {}` (from the shardbench "
              "checkout; docs/DATA.md)", dir, bin, dir);
  SB_FAIL("model folder '{}' has no weights: it needs model.safetensors, or "
          "model.safetensors.index.json and its shards (transformers' save_pretrained writes "
          "them); a train point may start from seeded weights instead: init = \"seed\"", dir);
}

}  // namespace

std::map<std::string, StEntry> checkpoint_entries(const std::string& path, std::string* described) {
  if (!is_dir(path)) {
    if (described) *described = path;
    return read_safetensors_header(path);
  }
  const std::string single = path + "/model.safetensors";
  const std::string index = path + "/model.safetensors.index.json";
  if (file_size(single) < 0 && file_size(index) < 0) no_weights(path);
  if (file_size(single) >= 0) {
    if (described) *described = single;
    return read_safetensors_header(single);
  }
  if (described) *described = index;
  // Sharded (transformers' save_pretrained with max_shard_size): {"weight_map": {tensor:
  // shard file}}; each shard's header is read once, and every mapped tensor must be in it.
  std::ifstream f(index);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    SB_FAIL("{}: not valid JSON: {}", index, e.what());
  }
  SB_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object() &&
               !j["weight_map"].empty(),
           "{}: needs a non-empty object 'weight_map' (tensor name -> shard file)", index);
  std::map<std::string, std::set<std::string>> by_shard;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    SB_CHECK(it.value().is_string(), "{}: weight_map['{}'] must be a file name", index, it.key());
    const std::string shard = it.value().get<std::string>();
    SB_CHECK(shard.find('/') == std::string::npos && !shard.empty(),
             "{}: weight_map['{}'] = \"{}\" must name a file in the folder", index, it.key(), shard);
    by_shard[shard].insert(it.key());
  }
  std::map<std::string, StEntry> out;
  for (const auto& [shard, names] : by_shard) {
    const std::string file = path + "/" + shard;
    SB_CHECK(file_size(file) >= 0, "{}: shard '{}' (holding {} tensors) is missing from '{}'",
             index, shard, names.size(), path);
    for (auto& [name, e] : read_safetensors_header(file)) {
      SB_CHECK(names.count(name), "{}: tensor '{}' is in shard '{}' but the index maps it "
                                  "elsewhere or not at all", index, name, shard);
      out[name] = e;
    }
    for (const auto& n : names)
      SB_CHECK(out.count(n), "{}: the index maps tensor '{}' to shard '{}', which lacks it",
               index, n, shard);
  }
  return out;
}

CheckpointReader::CheckpointReader(const models::Model& model, const std::string& path,
                                   CheckpointLoadOptions opt)
    : model_(model), opt_(opt) {
  const auto& c = model.config();
  const auto& fam = models::family(c.family);
  std::vector<std::string> integer;  // parameters stored as integers: an error, named
  for (auto& [name, e] : checkpoint_entries(path, &file_)) {
    const std::string n = canonical_name(c, name);
    if (n.empty()) {
      skipped_.push_back({name, e.dtype_name, fam.hf_skip(name)});
      continue;
    }
    if (!e.parameter_dtype()) integer.push_back(fmt::format("'{}' ({})", name, e.dtype_name));
    entries_[n] = e;
  }
  // Everything is checked from the headers, before a byte of data is read.
  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const auto& u : model.units())
    for (const auto& spec : u.params) {
      auto it = entries_.find(spec.name);
      if (it == entries_.end()) {
        if (opt_.init_missing_heads && (models::is_task_head(spec.name) || fam.hf_optional(spec.name)))
          initialised_.push_back(spec.name);
        else
          missing.push_back(spec.name);
        continue;
      }
      used.insert(spec.name);
      const bool conv = is_conv1d(c, spec.name);
      auto shape = it->second.shape;
      if (conv && shape.size() == 2) std::swap(shape[0], shape[1]);
      // A parameter split over tp (models/tensor_parallel.h): the file holds the whole one.
      auto expect = spec.full_shape.empty() ? spec.shape : spec.full_shape;
      if (spec.ep_size > 1) expect[0] *= spec.ep_size;  // the whole stack of experts
      SB_CHECK(shape == expect,
               "checkpoint '{}': tensor '{}' has shape ({}){}, model '{}' expects ({}); wrong preset?", file_,
               spec.name, fmt::join(it->second.shape, ", "), conv ? " (Conv1D, transposed on load)" : "",
               c.preset, fmt::join(expect, ", "));
    }
  SB_CHECK(missing.empty(), "checkpoint '{}' lacks {} tensors of model '{}': {}", file_,
           missing.size(), c.preset, name_list(missing));
  std::vector<std::string> unknown;
  for (const auto& [n, e] : entries_)
    if (!used.count(n)) unknown.push_back(n);
  SB_CHECK(unknown.empty(), "checkpoint '{}' holds {} tensors model '{}' does not have: {}; wrong preset?",
           file_, unknown.size(), c.preset, name_list(unknown));
  SB_CHECK(integer.empty(), "checkpoint '{}': parameter tensor{} {} of model '{}' {} stored as "
           "integers; a parameter needs F32, F16, BF16 or F64 (re-save the model in floating "
           "point)", file_, integer.size() == 1 ? "" : "s", name_list(integer),
           c.preset, integer.size() == 1 ? "is" : "are");
}

std::string CheckpointReader::note() const {
  std::string out;
  if (!skipped_.empty()) {
    // By reason, in the file's order of names: "causal-mask buffer: h.0.attn.bias, ...".
    std::vector<std::pair<std::string, std::vector<std::string>>> by_why;
    for (const auto& s : skipped_) {
      auto it = std::find_if(by_why.begin(), by_why.end(), [&](const auto& w) { return w.first == s.why; });
      if (it == by_why.end()) it = by_why.insert(by_why.end(), {s.why, {}});
      it->second.push_back(fmt::format("{} [{}]", s.name, s.dtype));
    }
    std::vector<std::string> parts;
    for (const auto& [why, names] : by_why) parts.push_back(why + ": " + name_list(names, 3));
    out = fmt::format("skipped {} {} ({})", skipped_.size(),
                      skipped_.size() == 1 ? "tensor that is not a parameter"
                                           : "tensors that are not parameters",
                      fmt::join(parts, "; "));
  }
  if (!initialised_.empty())
    out += fmt::format("{}initialised {} parameter{} the checkpoint lacks from seed {}: {}",
                       out.empty() ? "" : "; ", initialised_.size(),
                       initialised_.size() == 1 ? "" : "s", opt_.seed, name_list(initialised_));
  return out.empty() ? out : fmt::format("checkpoint '{}': {}", file_, out);
}

std::vector<torch::Tensor> CheckpointReader::unit(int u) {
  const auto& units = model_.units();
  SB_CHECK(u >= 0 && u < static_cast<int>(units.size()), "CheckpointReader::unit({}): the model "
           "has {} units", u, units.size());
  std::vector<torch::Tensor> out;
  for (std::size_t i = 0; i < units[u].params.size(); ++i) {
    const auto& spec = units[u].params[i];
    auto it = entries_.find(spec.name);
    if (it == entries_.end()) {  // a tensor the constructor allowed to be missing
      out.push_back(models::init_param(spec, opt_.seed, u, static_cast<int>(i)));
      continue;
    }
    auto t = read_entry(it->second);
    bytes_read_ += it->second.bytes;
    // Conv1D weights are stored (in, out): a transposed view, not a copy (a third of GPT-2's
    // bytes; whoever needs them contiguous copies once, as the engine's flattening does).
    if (is_conv1d(model_.config(), spec.name)) t = t.t();
    out.push_back(spec.tp == models::TpSplit::None ? models::ep_slice(spec, t) : models::tp_slice(spec, t));
  }
  return out;
}

namespace {

// Elements [a, b) of a tensor stored row-major in the file (width bytes each), as fp32.
torch::Tensor read_elements(std::ifstream& f, const StEntry& e, std::int64_t width, std::int64_t a,
                            std::int64_t b) {
  auto t = torch::empty({b - a}, torch::TensorOptions().dtype(e.dtype));
  f.seekg(e.begin + a * width);
  f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>((b - a) * width));
  SB_CHECK(f.good(), "safetensors '{}': short read of {} bytes at {}", e.file, (b - a) * width,
           e.begin + a * width);
  return t.to(torch::kFloat32);
}

}  // namespace

torch::Tensor CheckpointReader::slice(int u, std::int64_t offset, std::int64_t size) {
  const auto& units = model_.units();
  SB_CHECK(u >= 0 && u < static_cast<int>(units.size()) && offset >= 0 && size >= 0,
           "CheckpointReader::slice({}, {}, {}): the model has {} units", u, offset, size,
           units.size());
  std::vector<torch::Tensor> parts;
  std::int64_t at = 0;  // the parameter's first element in the unit's flat layout
  const std::int64_t end = offset + size;
  for (std::size_t i = 0; i < units[u].params.size() && at < end; ++i) {
    const auto& spec = units[u].params[i];
    const std::int64_t n = spec.numel(), a = std::max(offset, at) - at, b = std::min(end, at + n) - at;
    at += n;
    if (a >= b) continue;
    auto it = entries_.find(spec.name);
    if (it == entries_.end()) {  // a tensor the constructor allowed to be missing
      parts.push_back(models::init_param(spec, opt_.seed, u, static_cast<int>(i)).reshape({-1}).slice(0, a, b));
      continue;
    }
    const StEntry& e = it->second;
    if (spec.tp != models::TpSplit::None || spec.ep_size > 1) {  // this rank's block of the whole
      auto t = read_entry(e).to(torch::kFloat32);
      bytes_read_ += e.bytes;
      if (is_conv1d(model_.config(), spec.name)) t = t.t();
      t = spec.ep_size > 1 ? models::ep_slice(spec, t) : models::tp_slice(spec, t);
      parts.push_back(t.reshape({-1}).slice(0, a, b));
      continue;
    }
    std::ifstream f(e.file, std::ios::binary);
    SB_CHECK(f.good(), "cannot open safetensors '{}'", e.file);
    const std::int64_t width = e.bytes / n;
    if (!is_conv1d(model_.config(), spec.name)) {  // our flat order is the file's
      parts.push_back(read_elements(f, e, width, a, b));
      bytes_read_ += (b - a) * width;
      continue;
    }
    // Conv1D: ours (O, I), the file's (I, O). Elements [a, b) touch our rows o0..o1, i.e. the
    // file's columns o0..o1: one run of them per file row, then transposed back.
    const std::int64_t O = spec.shape[0], I = spec.shape[1], o0 = a / I, o1 = (b - 1) / I;
    auto block = torch::empty({I, o1 - o0 + 1});
    for (std::int64_t r = 0; r < I; ++r)
      block[r].copy_(read_elements(f, e, width, r * O + o0, r * O + o1 + 1));
    bytes_read_ += I * (o1 - o0 + 1) * width;
    parts.push_back(block.t().reshape({-1}).slice(0, a - o0 * I, b - o0 * I));
  }
  if (at < end) parts.push_back(torch::zeros({end - std::max(at, offset)}));  // shard padding
  return parts.empty() ? torch::zeros({0}) : torch::cat(parts);
}

models::UnitTensors load_checkpoint(const models::Model& model, const std::string& path,
                                    const CheckpointLoadOptions& opt, std::string* note) {
  CheckpointReader r(model, path, opt);
  models::UnitTensors out;
  for (int u = 0; u < static_cast<int>(model.units().size()); ++u) out.push_back(r.unit(u));
  if (note) *note = r.note();
  return out;
}

void save_checkpoint(const models::Model& model, const models::UnitTensors& weights, const std::string& path) {
  const auto& units = model.units();
  SB_CHECK(weights.size() == units.size(), "save_checkpoint: {} units given, model '{}' has {}", weights.size(),
           model.config().preset, units.size());
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (std::size_t u = 0; u < units.size(); ++u) {
    SB_CHECK(weights[u].size() == units[u].params.size(), "save_checkpoint: unit {} has {} tensors, expected {}",
             u, weights[u].size(), units[u].params.size());
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      const auto& spec = units[u].params[i];
      const auto& t = weights[u][i];
      named.emplace_back(spec.name, is_conv1d(model.config(), spec.name) ? t.detach().t() : t.detach());
    }
  }
  write_safetensors(is_dir(path) ? path + "/model.safetensors" : path, named);
}

std::string checkpoint_problem(const std::string& model, const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return "";
  std::unique_ptr<models::Model> m;
  try {
    m = models::make_model(model);
  } catch (const sb::Error&) {
    return "";
  }
  try {
    CheckpointReader check(*m, path);  // headers only
  } catch (const sb::Error& e) {
    return e.message();
  }
  return "";
}

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> f = {
      "vocab.txt",  "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
      "vocab.json", "merges.txt",     "added_tokens.json"};
  return f;
}

namespace {

// Writes `text` to `path` by way of a temporary name.
void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    SB_CHECK(f.good(), "cannot create '{}'", tmp);
    f << text;
    SB_CHECK(f.good(), "writing '{}' failed (disk full?)", tmp);
  }
  SB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}'", tmp, path);
}

// The tokenizer files `from` has, copied into `dir` (each by way of a temporary name).
void copy_tokenizer_files(const std::string& from, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (from.empty() || fs::equivalent(from, dir, ec)) return;
  for (const auto& name : hf_tokenizer_files()) {
    const std::string src = from + "/" + name, dst = dir + "/" + name, tmp = dst + ".tmp";
    if (!fs::is_regular_file(src)) continue;
    fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
    SB_CHECK(!ec, "cannot copy the tokenizer file '{}' to '{}': {}", src, tmp, ec.message());
    SB_CHECK(std::rename(tmp.c_str(), dst.c_str()) == 0, "cannot rename '{}' to '{}'", tmp, dst);
  }
}

}  // namespace

void export_hf_folder(const models::Model& model, const models::UnitTensors& weights,
                      const std::string& dir, const HfExport& extras) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SB_CHECK(!ec && is_dir(dir), "cannot create model folder '{}': {}", dir, ec.message());
  // The weights and tokenizer first, then config.json, each by rename: a folder whose
  // config.json exists is complete, and an interrupted export never leaves a half-written
  // file under its final name.
  save_checkpoint(model, weights, dir + "/model.safetensors");
  copy_tokenizer_files(extras.tokenizer_dir, dir);
  // Label names: the data's (the ids training used), then the source folder's, else LABEL_<i>.
  const models::ModelConfig& c = model.config();
  SB_CHECK(static_cast<std::int64_t>(extras.labels.size()) <= c.num_labels,
           "export to '{}': {} label names for a model of {} labels", dir, extras.labels.size(),
           c.num_labels);
  std::vector<std::string> labels;
  if (models::is_model_path(c.preset) && std::filesystem::exists(c.preset + "/config.json"))
    labels = models::hf_folder_labels(c.preset);
  if (labels.size() < extras.labels.size()) labels.resize(extras.labels.size());
  std::copy(extras.labels.begin(), extras.labels.end(), labels.begin());
  write_file(dir + "/config.json", models::hf_config_json(c, labels));
}

}  // namespace sb::data
