// A local Hugging Face model folder as a model (the Realdata issue): its config.json read
// into a ModelConfig, so that `model = "/path/to/folder"` works wherever a preset name does.
// Only what a registered family implements is accepted (its record reads and writes the
// fields: family.h): any other model_type, activation, cross-attention, untied GPT-2 head, ...
// is an error naming the file, the field and its value, raised at plan time (validation reads
// the same function).
#pragma once
#include <string>
#include <vector>

#include "workloads/models/model.h"

namespace sb::models {

// Whether a `model` value names a folder rather than a preset: it holds a '/' (the suite's
// name check lets such values through; a preset name never has one).
bool is_model_path(const std::string& model);

// <dir>/config.json as a ModelConfig (the family whose record reads its model_type; preset =
// dir; a family that classifies: num_labels from id2label or num_labels). The folder's
// weights are not read here (data/safetensors.h: load_checkpoint on the folder).
ModelConfig hf_folder_config(const std::string& dir);

// The label names of <dir>/config.json by id (id2label; empty without one).
std::vector<std::string> hf_folder_labels(const std::string& dir);

// The Hugging Face config.json of a model, written by its family's record (export: config +
// model.safetensors load back here and, by layout and names, into transformers'
// GPT2LMHeadModel / BertFor* classes). A family that classifies: id2label and label2id name
// label i label_names[i] (absent or "": LABEL_<i>).
std::string hf_config_json(const ModelConfig& c, const std::vector<std::string>& label_names = {});

}  // namespace sb::models
