// config.json <-> ModelConfig through the family records: model_type picks the family that
// reads it (Family::hf_model_types), whose reader and writer hold transformers' field names
// and defaults (gpt2_family.cpp, bert_family.cpp); the file, the label maps of a family that
// classifies and the checks every model needs are here. A field we cannot honour is refused
// by name rather than ignored, because a silently different model would benchmark the wrong
// thing.
#include "workloads/models/hf_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config_reader.h"

namespace sb::models {
namespace {

using Json = nlohmann::json;
using Reader = HfConfigReader;

Reader read(const std::string& dir) {
  Reader r;
  r.file = dir + "/config.json";
  struct stat st;
  SB_REQUIRE(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
             "model folder '{}' does not exist (model = a preset name or a local Hugging Face "
             "folder with config.json and model.safetensors)", dir);
  std::ifstream f(r.file);
  SB_REQUIRE(f.good(), "model folder '{}' has no config.json (a Hugging Face model folder holds "
                       "config.json and model.safetensors)", dir);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    r.j = Json::parse(ss.str());
  } catch (const std::exception& e) {
    SB_FAIL("{}: not valid JSON: {}", r.file, e.what());
  }
  SB_CHECK(r.j.is_object(), "{}: the top level must be a JSON object", r.file);
  return r;
}

// id2label (its count is the label count, its names kept for export) or num_labels.
std::int64_t read_labels(const Reader& r, std::vector<std::string>& names) {
  if (r.has("id2label")) {
    const Json& m = r.j["id2label"];
    SB_CHECK(m.is_object() && !m.empty(), "{}: field 'id2label' must be a non-empty object",
             r.file);
    names.assign(m.size(), "");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      const bool digits = !k.empty() && k.size() < 10 && k.find_first_not_of("0123456789") == std::string::npos;
      const std::size_t id = digits ? std::stoul(k) : names.size();
      SB_CHECK(id < names.size() && it.value().is_string(),
               "{}: field 'id2label' must map the ids \"0\" ... \"{}\" to names; it has \"{}\": {}",
               r.file, names.size() - 1, k, it.value().dump());
      names[id] = it.value().get<std::string>();
    }
    return static_cast<std::int64_t>(m.size());
  }
  return r.has("num_labels") ? r.positive("num_labels") : 2;  // transformers' default
}

// The model_types the registered families read, in the order `shardbench models` lists the
// families (by their first preset; a family without presets after those, by name).
std::vector<std::string> known_model_types() {
  std::vector<std::string> fams;
  auto add = [&](const std::string& f) {
    if (std::find(fams.begin(), fams.end(), f) == fams.end()) fams.push_back(f);
  };
  for (const auto& p : preset_names()) add(preset_config(p).family);
  for (const auto& f : family_names()) add(f);
  std::vector<std::string> types;
  for (const auto& f : fams)
    for (const auto& t : family(f).hf_model_types) types.push_back(t);
  return types;
}

// "a", "b" <last> "c"
std::string quoted_list(const std::vector<std::string>& v, const char* last) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i == 0 ? "" : i + 1 == v.size() ? fmt::format(" {} ", last) : ", ") + ('"' + v[i] + '"');
  return s;
}

// Both maps, as transformers writes them: pipeline("text-classification") reports id2label's
// names (label i is label_names[i]; absent or "": LABEL_<i>).
void write_labels(const ModelConfig& c, const std::vector<std::string>& label_names, Json& j) {
  Json labels = Json::object(), ids = Json::object();
  for (std::int64_t i = 0; i < c.num_labels; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const std::string name = k < label_names.size() && !label_names[k].empty()
                                 ? label_names[k] : "LABEL_" + std::to_string(i);
    SB_CHECK(!ids.contains(name), "model {}: label name '{}' is given to two ids; "
             "config.json's label2id needs distinct names", c.preset, name);
    labels[std::to_string(i)] = name;
    ids[name] = i;
  }
  j["id2label"] = labels;
  j["label2id"] = ids;
}

}  // namespace

bool is_model_path(const std::string& model) { return model.find('/') != std::string::npos; }

ModelConfig hf_folder_config(const std::string& dir) {
  const Reader r = read(dir);
  SB_CHECK(r.has("model_type"), "{}: field 'model_type' is missing ({})", r.file,
           quoted_list(known_model_types(), "or"));
  const std::string type = r.text("model_type", "");
  const Family* f = family_reading(type);
  if (!f)
    SB_FAIL("{}: field 'model_type' is \"{}\"; shardbench implements {}", r.file, type,
            quoted_list(known_model_types(), "and"));
  ModelConfig c = f->hf_read_config(r);
  c.family = f->name, c.preset = dir;
  if (f->classifies) {
    std::vector<std::string> names;
    c.num_labels = read_labels(r, names);
  }
  SB_CHECK(c.d_model % c.n_head == 0, "{}: the hidden size {} is not a multiple of the {} heads",
           r.file, c.d_model, c.n_head);
  return c;
}

std::vector<std::string> hf_folder_labels(const std::string& dir) {
  std::vector<std::string> names;
  read_labels(read(dir), names);
  return names;
}

std::string hf_config_json(const ModelConfig& c, const std::vector<std::string>& label_names) {
  SB_CHECK(c.attn_width() == c.d_model, "model {}: {} heads of {} make an attention width of {}, not its "
           "hidden size {} (heads were pruned): a Hugging Face config has no field for that, so the "
           "folder could not be loaded; export the model before heads pruning, or prune ffn",
           c.preset, c.n_head, c.dh(), c.attn_width(), c.d_model);
  const Family& f = family(c.family);
  Json j = f.hf_write_config(c);
  if (f.classifies) write_labels(c, label_names, j);
  return j.dump(2) + "\n";
}

}  // namespace sb::models
