// One Hugging Face config.json being read, for a family's reader (Family::hf_read_config):
// every message names the file and the field, so that each family refuses what it cannot
// honour in the same words. Included by the families' own files and hf_config.cpp only (it
// brings the whole of nlohmann/json).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/models/model.h"

namespace sb::models {

// A size field of config.json and the ModelConfig member it holds: a family's one table of
// them is what it reads (each required and positive, in the table's order) and writes.
struct HfSize {
  const char* field;
  std::int64_t ModelConfig::*member;
};

struct HfConfigReader {
  using Json = nlohmann::json;
  std::string file;  // <dir>/config.json
  Json j;            // its top-level object

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }

  std::int64_t positive(const char* k) const {
    SB_CHECK(has(k), "{}: field '{}' is missing (a {} config.json has it)", file, k,
             j.value("model_type", std::string("?")));
    SB_CHECK(j[k].is_number_integer() && j[k].get<std::int64_t>() > 0,
             "{}: field '{}' is {}; it must be a positive integer", file, k, j[k].dump());
    return j[k].get<std::int64_t>();
  }
  double number(const char* k, double fallback) const {
    if (!has(k)) return fallback;
    SB_CHECK(j[k].is_number() && j[k].get<double>() > 0,
             "{}: field '{}' is {}; it must be a positive number", file, k, j[k].dump());
    return j[k].get<double>();
  }
  std::string text(const char* k, const std::string& fallback) const {
    if (!has(k)) return fallback;
    SB_CHECK(j[k].is_string(), "{}: field '{}' is {}; it must be a string", file, k, j[k].dump());
    return j[k].get<std::string>();
  }
  // A feature we do not implement: refused unless absent or at its harmless value.
  void must_be(const char* k, const Json& ok, const char* why) const {
    if (has(k) && j[k] != ok)
      SB_FAIL("{}: field '{}' is {}; shardbench supports only {} ({})", file, k, j[k].dump(),
              ok.dump(), why);
  }
  void one_of(const char* k, const std::string& v, std::initializer_list<const char*> ok,
              const char* why) const {
    for (const char* o : ok)
      if (v == o) return;
    std::string list;
    for (const char* o : ok) list += (list.empty() ? "" : ", ") + std::string(o);
    SB_FAIL("{}: field '{}' is \"{}\"; shardbench supports {} ({})", file, k, v, list, why);
  }
  void read_sizes(ModelConfig& c, std::initializer_list<HfSize> sizes) const {
    for (const HfSize& s : sizes) c.*s.member = positive(s.field);
  }
  static void write_sizes(const ModelConfig& c, std::initializer_list<HfSize> sizes, Json& j) {
    for (const HfSize& s : sizes) j[s.field] = c.*s.member;
  }
  // Our model interface has neither cross-attention nor an encoder-decoder: every family
  // implemented so far refuses both, first.
  void refuse_encoder_decoder() const {
    must_be("add_cross_attention", false, "no encoder-decoder cross-attention");
    must_be("is_encoder_decoder", false, "no encoder-decoder models");
  }
};

}  // namespace sb::models
