// The keys that choose the model and its variants for the tasks that build one (train, infer,
// serve), typed (config.h). Declared here, once, because several areas read them (models,
// data, fsdp, comm, quant, train, infer, serve); their values are names of sets the areas
// register, so the harness knows the keys, never the models.
#pragma once
#include <cstdint>
#include <string>

namespace sb {

template <class S> class Fields;

// Tasks train, infer, serve.
struct ModelKeys {
  std::string model;      // a preset or a local Hugging Face folder (a value with '/')
  std::string strategy;   // sharding strategy
  std::string attention;  // attention kernel
  std::int64_t batch = 0;  // GLOBAL samples per optimizer step or inference batch
  std::int64_t seq = 0;    // tokens per sample
  static void declare(Fields<ModelKeys>& f);  // harness/spec/model_keys.cpp
};

// Task train.
struct TrainChoice {
  std::string compression;  // communication compression policy
  std::string dtype;        // parameter and compute dtype, or "auto"
  static void declare(Fields<TrainChoice>& f);
};

// Tasks infer, serve.
struct InferChoice {
  std::string quantization;  // inference quantizer
  static void declare(Fields<InferChoice>& f);
};

}  // namespace sb
