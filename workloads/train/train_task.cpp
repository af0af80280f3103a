// The "train" task's registration: its config keys, the validators that refuse impossible
// combinations before any rank starts, and the model-state formula `shardbench plan` shows.
#include "harness/workload.h"
#include "workloads/fsdp/engine.h"
#include "workloads/train/train_workload.h"

namespace sb::train {
namespace {

using I = std::int64_t;

bool is_train(const Point& p) { return p.has("task") && p.get_string("task") == "train"; }

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (!is_train(p)) return;
  const I world = p.get_int("world"), batch = p.get_int("batch");
  const I accum = p.get_int("grad_accum"), sg = p.get_int("shard_group");
  if (accum < 1) out.push_back({"grad_accum", fmt::format("grad_accum {} must be >= 1", accum)});
  else if (world >= 1 && batch % (world * accum) != 0)
    out.push_back({"batch", fmt::format("batch {} is not divisible by world {} x grad_accum {} "
                                        "= {}; use a multiple of {}", batch, world, accum,
                                        world * accum, world * accum)});
  if (sg < 0 || (sg > 0 && world % sg != 0))
    out.push_back({"shard_group", fmt::format("shard_group {} must divide world {} (0 = ranks per "
                                              "node)", sg, world)});
  if (p.get_double("lr") <= 0) out.push_back({"lr", "lr must be > 0"});
  if (p.get_double("min_lr") > p.get_double("lr"))
    out.push_back({"min_lr", fmt::format("min_lr {} exceeds lr {}", p.get_double("min_lr"),
                                         p.get_double("lr"))});
  if (p.get_int("lr_warmup") < 0 || p.get_int("lr_warmup") >= std::max<I>(1, p.get_int("steps")))
    out.push_back({"lr_warmup", "lr_warmup must be >= 0 and smaller than steps"});
  if (p.get_string("reduce_dtype") != "fp32" && p.has("compression") &&
      p.get_string("compression") != "none")
    out.push_back({"reduce_dtype", fmt::format("compression '{}' compresses fp32 gradients; set "
                                               "reduce_dtype = \"fp32\"",
                                               p.get_string("compression"))});
  const std::string model = p.get_string("model");
  if (model.rfind("bert", 0) == 0 && p.get_string("data") != "markov")
    out.push_back({"data", "BERT trains on data = \"markov\" (MLM masking); token files are for "
                           "GPT-2"});
  if (p.get_string("checkpoint_dir").empty() && p.get_bool("resume"))
    out.push_back({"resume", "resume = true needs checkpoint_dir"});
}

double state_bytes(const Point& p) {
  auto model = models::make_model(p.get_string("model"), p.get_string("attention"));
  const int world = static_cast<int>(p.get_int("world"));
  int sg = static_cast<int>(p.get_int("shard_group"));
  if (sg == 0) sg = world;  // plan does not know the nodes: assume one
  return static_cast<double>(fsdp::model_state_bytes(
      model->units(), p.get_string("strategy"), world, sg,
      fsdp::dtype_from_name(p.get_string("dtype")), static_cast<int>(p.get_int("grad_accum"))));
}

sb::Registrar reg([] {
  auto f = [](const char* k, double d, const char* doc) {
    register_key({k, KeyType::Float, d, "", doc});
  };
  auto i = [](const char* k, I d, const char* doc) { register_key({k, KeyType::Int, d, "", doc}); };
  auto s = [](const char* k, const char* d, const char* doc) {
    register_key({k, KeyType::String, std::string(d), "", doc});
  };
  f("lr", 6e-4, "peak learning rate (AdamW)");
  f("min_lr", 6e-5, "cosine floor of the learning rate");
  f("weight_decay", 0.1, "decoupled AdamW weight decay (not on biases and LayerNorm)");
  f("grad_clip", 1.0, "global gradient L2-norm clip; <= 0 disables");
  i("lr_warmup", 0, "optimizer steps of linear learning-rate warm-up");
  i("grad_accum", 1, "micro-batches per optimizer step (no communication until the last)");
  i("shard_group", 0, "ranks per shard group (hybrid_shard); 0 = ranks per node");
  register_key({"reduce_dtype", KeyType::Name, std::string("fp32"), "dtype",
                "dtype of gradient collectives (fp32, bf16, fp16)"});
  register_key({"prefetch", KeyType::Bool, true, "",
                "all-gather the next unit while the current one computes"});
  i("eval_every", 0, "evaluate held-out loss every N steps (0 = only at the end)");
  i("eval_batches", 4, "held-out global batches per evaluation");
  s("data", "markov", "training data: markov (synthetic, known loss floor) or a .bin token file");
  // "auto": poll where parameters are sharded (a unit's all-gather then completes while the
  // peer computes, instead of waiting for the peer's next unit boundary), inline otherwise
  // (poll's 20 us sleeps slow libnbc's many-round all-reduce). docs/FSDP.md "Benchmark".
  register_name("comm_progress", "auto",
                "poll for strategies that shard parameters (full_shard, shard_grad_op, "
                "hybrid_shard), inline for no_shard and zero1");
  register_key({"comm_progress", KeyType::Name, std::string("auto"), "comm_progress",
                "how overlapped collectives progress: auto, thread, poll or inline "
                "(docs/FSDP.md)"});
  s("checkpoint_dir", "", "directory of sharded checkpoints (saved at the end; empty = none)");
  register_key({"resume", KeyType::Bool, false, "", "load checkpoint_dir before the first step"});
  s("export_safetensors", "",
    "after training, write the full fp32 parameters to this one safetensors file with Hugging "
    "Face names (rank 0 writes; empty = none)");
  f("peak_gflops", 0.0, "peak GFLOP/s of one rank for MFU; 0 = measure once per run");
  register_validator(validate);
  register_task({"train", [] { return make_train_workload(); }, state_bytes});
});

}  // namespace
}  // namespace sb::train
