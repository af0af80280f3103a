// Declarations of harness/spec/model_keys.h (`shardbench keys` lists them).
#include "harness/spec/model_keys.h"

#include <cstdint>

#include "harness/spec/config.h"

namespace sb {

void ModelKeys::declare(Fields<ModelKeys>& f) {
  using I = std::int64_t;
  f.tasks({"train", "infer", "serve", "shapes"});  // the tasks that build (or time) a model
  f.name("model", &ModelKeys::model, "model", "gpt2-tiny",
         "model architecture and size: a preset, or a local Hugging Face folder (config.json + "
         "model.safetensors; a value with '/')")
      .accepts_path();
  f.name("strategy", &ModelKeys::strategy, "strategy", "no_shard", "sharding strategy (ZeRO stage)")
      .tasks({"train", "infer", "serve"});
  f.name("attention", &ModelKeys::attention, "attention", "naive", "attention kernel");
  f.add("batch", &ModelKeys::batch, 8,
        "GLOBAL samples per optimizer step or per inference batch; divisible by world")
      .range(I{1}, I{1} << 24);
  f.add("seq", &ModelKeys::seq, 64, "sequence length in tokens").range(I{1}, I{1} << 20);
}
SB_CONFIG_SECTION(ModelKeys);

void TrainChoice::declare(Fields<TrainChoice>& f) {
  f.tasks({"train"});
  f.name("compression", &TrainChoice::compression, "compression", "none",
         "communication compression policy");
  f.name("dtype", &TrainChoice::dtype, "dtype", "fp32",
         "parameter and compute dtype: fp32, bf16, fp16, or auto (bf16 where the device has bf16 "
         "matrix units, else fp32)")
      .tasks({"train", "shapes"});
}
SB_CONFIG_SECTION(TrainChoice);

void InferChoice::declare(Fields<InferChoice>& f) {
  f.tasks({"infer", "serve"});
  f.name("quantization", &InferChoice::quantization, "quantization", "none",
         "inference quantization");
}
SB_CONFIG_SECTION(InferChoice);

}  // namespace sb
