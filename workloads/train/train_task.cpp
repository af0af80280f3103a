// The "train" task's registration: its config keys, the validators that refuse impossible
// combinations before any rank starts, and the model-state formula `shardbench plan` shows.
#include <cmath>
#include <filesystem>

#include "harness/core/check.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/workload.h"
#include "workloads/comm/policy.h"
#include "workloads/data/batches.h"
#include "workloads/data/labelled.h"
#include "workloads/data/safetensors.h"
#include "workloads/data/text_corpus.h"
#include "workloads/distill/distill_config.h"
#include "workloads/models/device_config.h"
#include "workloads/models/dtype.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/model.h"
#include "workloads/train/train_workload.h"

namespace sb::train {
namespace {

using I = std::int64_t;

bool is_train(const Point& p) { return p.has("task") && p.get_string("task") == "train"; }

// Input files are looked for at plan time, but only warned about: an earlier suite may write
// them (a checkpoint, an exported corpus). Relative paths are from the current directory.
void warn_missing_inputs(const Point& p, std::vector<Diagnostic>& out) {
  const std::string& data = config<data::DataKeys>(p).data;
  // A misspelt keyword is an error of data's own check (labelled_keys.cpp), not a missing file.
  if (data != "markov" && data::data_keyword_typo(data).empty() && !std::filesystem::exists(data))
    out.push_back({"data", fmt::format("data file '{}' does not exist (yet): the point will fail "
                                       "unless an earlier suite writes it; check the path",
                                       data), true});
  const std::string& dir = p.get_string("checkpoint_dir");
  if (p.get_bool("resume") && !dir.empty() && !std::filesystem::exists(dir))
    out.push_back({"checkpoint_dir", fmt::format("resume = true, but checkpoint_dir '{}' does not "
                                                 "exist (yet): the point starts at step 0 unless "
                                                 "an earlier suite or run saves a checkpoint "
                                                 "there; check the path", dir), true});
}

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
  if (p.get_string("reduce_dtype") == "auto")
    out.push_back({"reduce_dtype", "reduce_dtype takes fp32, bf16 or fp16 (\"auto\" is for "
                                   "dtype only)"});
  if (p.get_string("reduce_dtype") != "fp32" && p.has("compression") &&
      p.get_string("compression") != "none")
    out.push_back({"reduce_dtype", fmt::format("compression '{}' compresses fp32 gradients; set "
                                               "reduce_dtype = \"fp32\"",
                                               p.get_string("compression"))});
  // Loss scaling (fp16) scales the gradients the compressors keep residuals and warm starts
  // of: a skipped step or a new scale would poison them.
  if (p.get_string("dtype") == "fp16" && p.has("compression") &&
      p.get_string("compression") != "none")
    out.push_back({"compression", fmt::format("compression '{}' with dtype = \"fp16\": fp16 "
                                              "trains with dynamic loss scaling, whose skipped "
                                              "steps and changing scale the compressors' state "
                                              "cannot follow; use dtype = \"bf16\" or "
                                              "compression = \"none\"",
                                              p.get_string("compression"))});
  const std::string model = p.get_string("model");
  try {
    const auto& fam = models::family(models::preset_config(model).family);
    const std::string& d = config<data::DataKeys>(p).data;
    if (data::is_labelled_path(d) && !fam.classifies)
      out.push_back({"data", fmt::format("data = \"{}\" is labelled text for sequence "
                                         "classification; model family {} has no such head (use "
                                         "a BERT model)", d, fam.name)});
    else if (!data::is_labelled_path(d) && !fam.trains_on_token_files && d != "markov" &&
             !data::is_text_path(d) && data::data_keyword_typo(d).empty())
      out.push_back({"data", fmt::format("model family {} trains on data = \"markov\", text "
                                         "(.txt or a folder) or a labelled .jsonl/.csv (.bin "
                                         "token files are for causal LM families)", fam.name)});
  } catch (const sb::Error&) {
    // an unknown model is reported by the name check
  }
  const std::string init = p.get_string("init");
  if (!init.empty() && init != "seed" && !std::filesystem::exists(init))
    out.push_back({"init", fmt::format("init '{}' does not exist (yet): the point will fail "
                                       "unless an earlier suite writes it; check the path", init),
                   true});
  // The weights it starts from, checked from their headers (names, shapes, dtypes); a
  // distillation student made from its teacher's layers reads none.
  if (config<distill::DistillKeys>(p).student_init != "every_other")
    if (const std::string bad = data::checkpoint_problem(model, init_weights_path(p)); !bad.empty())
      out.push_back({init.empty() ? "model" : "init", bad});
  // A distillation teacher's weights, the same way (teacher_init, else the teacher folder).
  if (const std::string teacher = config<distill::DistillKeys>(p).teacher; !teacher.empty()) {
    const std::string ti = config<distill::DistillKeys>(p).teacher_init;
    const std::string from = !ti.empty() ? ti : models::is_model_path(teacher) ? teacher : "";
    if (const std::string bad = data::checkpoint_problem(teacher, from); !bad.empty())
      out.push_back({ti.empty() ? "teacher" : "teacher_init", bad});
  }
  if (p.get_string("checkpoint_dir").empty() && p.get_bool("resume"))
    out.push_back({"resume", "resume = true needs checkpoint_dir"});
  try {  // the same rule as infer's: positions beyond the model's do not exist
    const auto m = models::preset_config(model);
    if (p.get_int("seq") > m.max_pos)
      out.push_back({"seq", fmt::format("seq {} exceeds model {}'s {} positions; use seq <= {} "
                                        "or a model with more positions (`shardbench models`)",
                                        p.get_int("seq"), m.preset, m.max_pos, m.max_pos)});
  } catch (const sb::Error&) {
    // an unknown model is reported by the name check
  }
  warn_missing_inputs(p, out);
}

// dtype = "auto" as the run would resolve it: on the host, as this machine's CPU would (plan
// may run on another node than the job); on a GPU, bf16 (compute capability 8.0 and later).
torch::ScalarType planned_dtype(const Point& p) {
  const std::string d = p.get_string("dtype");
  if (d != "auto") return models::dtype_from_name(d);
  return config<models::DeviceConfig>(p).device == "cpu" ? models::resolve_dtype(d, torch::kCPU) : torch::kBFloat16;
}

// The memory model of a point as `plan` sees it: the planned dtype, the mesh's shard group,
// where it is a node's ranks (0) taken as the world (plan does not know the nodes).
fsdp::MemoryPrediction planned_memory(const Point& p) {
  auto model = models::make_model(p.get_string("model"), p.get_string("attention"));
  const int sg = config<MeshConfig>(p).dp_shard;
  return fsdp::predict_memory(memory_inputs(p, *model, planned_dtype(p), sg));
}

double state_bytes(const Point& p) { return static_cast<double>(planned_memory(p).model_state); }

std::vector<std::pair<std::string, double>> memory_terms(const Point& p) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& t : planned_memory(p).terms()) out.emplace_back(t.name, static_cast<double>(t.bytes));
  return out;
}

// Every key here is read by the train task only (a point of another task may not set it).
void key(KeySpec ks) {
  ks.tasks = {"train"};
  register_key(std::move(ks));
}

sb::Registrar reg([] {
  auto f = [](const char* k, double d, const char* doc) {
    key({k, KeyType::Float, d, "", doc});
  };
  auto i = [](const char* k, I d, I lo, I hi, const char* doc) {
    KeySpec ks{k, KeyType::Int, d, "", doc};
    ks.min_int = lo, ks.max_int = hi;
    key(std::move(ks));
  };
  auto s = [](const char* k, const char* d, const char* doc) {
    key({k, KeyType::String, std::string(d), "", doc});
  };
  const I int_max = std::numeric_limits<std::int32_t>::max();
  f("lr", 6e-4, "peak learning rate (AdamW)");
  f("min_lr", 6e-5, "cosine floor of the learning rate");
  f("weight_decay", 0.1, "decoupled AdamW weight decay (not on biases and LayerNorm)");
  f("grad_clip", 1.0, "global gradient L2-norm clip; <= 0 disables");
  i("lr_warmup", 0, 0, int_max, "optimizer steps of linear learning-rate warm-up");
  i("grad_accum", 1, 1, I{1} << 16, "micro-batches per optimizer step (no communication until "
    "the last)");
  i("shard_group", 0, 0, I{1} << 20, "ranks per shard group (hybrid_shard); 0 = ranks per node");
  key({"reduce_dtype", KeyType::Name, std::string("fp32"), "dtype",
       "dtype of gradient collectives (fp32, bf16, fp16)"});
  key({"prefetch", KeyType::Bool, true, "",
       "all-gather the next unit while the current one computes"});
  i("eval_every", 0, 0, int_max, "evaluate held-out loss every N steps (0 = only at the end)");
  i("eval_batches", 4, 0, I{1} << 20, "held-out global batches per evaluation");
  s("data", "markov", data::kDataDoc);
  // "auto": poll where parameters are sharded (a unit's all-gather then completes while the
  // peer computes, instead of waiting for the peer's next unit boundary), inline otherwise
  // (poll's 20 us sleeps slow libnbc's many-round all-reduce). docs/FSDP.md "Benchmark".
  register_name("comm_progress", "auto",
                "poll for strategies whose layout shards parameters, inline for the others");
  key({"comm_progress", KeyType::Name, std::string("auto"), "comm_progress",
       "how overlapped collectives progress: auto, thread, poll or inline (docs/FSDP.md)"});
  s("checkpoint_dir", "", "directory of sharded checkpoints (saved at the end; empty = none)");
  {  // an output: a later point may read the folder (models/folder_check.h)
    KeySpec ks{"export_folder", KeyType::String, std::string(""), "",
               "after training, write a Hugging Face model folder (config.json + "
               "model.safetensors) here, loadable as model = <folder> (rank 0 writes; empty = "
               "none)"};
    ks.writes_path = true;
    key(std::move(ks));
  }
  s("init", "",
    "the weights training starts from: a safetensors file or model folder; empty = the model "
    "folder's weights when model is a folder, else seeded; \"seed\" = seeded always");
  key({"resume", KeyType::Bool, false, "",
       "continue from checkpoint_dir's newest committed checkpoint (step 0 when there is none)"});
  s("export_safetensors", "",
    "after training, write the full fp32 parameters to this one safetensors file with Hugging "
    "Face names (rank 0 writes; empty = none)");
  {
    KeySpec ks{"loss_scale_init", KeyType::Float, 65536.0, "",
               "fp16 (dtype or reduce_dtype): the initial dynamic loss scale (docs/FSDP.md)"};
    ks.min_float = 1.0;
    ks.max_float = 1e30;
    key(std::move(ks));
  }
  i("loss_scale_growth_interval", 2000, 1, int_max,
    "fp16: finite steps in a row before the loss scale doubles (halved on a skipped step)");
  f("peak_gflops", 0.0, "peak GFLOP/s of one rank for MFU; 0 = measure once per run");
  register_validator(validate);
  register_task({"train", [] { return make_train_workload(); }, state_bytes, memory_terms,
                 {{"batch", "lower it: fewer rows per step, fewer activations"},
                  {"grad_accum", "raise it: the same batch in smaller micro-batches"},
                  {"strategy", "full_shard keeps 1/world of parameters, gradients and optimizer "
                               "state per rank"},
                  {"seq", "lower it: shorter rows, fewer activations"}}});
});

}  // namespace

fsdp::MemoryInputs memory_inputs(const Point& p, const models::Model& model,
                                 torch::ScalarType param_dtype, int shard_group) {
  fsdp::MemoryInputs in;
  in.units = model.units();
  in.model = model.config();
  in.strategy = p.get_string("strategy");
  in.world = static_cast<int>(p.get_int("world"));
  in.shard_group = shard_group;
  in.param_dtype = param_dtype;
  in.grad_accum = static_cast<int>(p.get_int("grad_accum"));
  in.policy = comm::policy_from_point(p);
  in.prefetch = p.get_bool("prefetch");
  // One micro-batch of this rank; the loss over every position (causal LM), the masked ones
  // (MLM: at most the masking probability of them) or one row each (labelled data).
  in.rows = p.get_int("batch") / std::max<I>(1, in.world * in.grad_accum);
  in.seq = p.get_int("seq");
  const auto& c = in.model;
  if (data::is_labelled_path(config<data::DataKeys>(p).data)) {
    in.loss_rows = in.rows;
    in.loss_classes = c.num_labels;
  } else {
    const bool causal = models::family(c.family).objective == models::Objective::CausalLm;
    const double share = causal ? 1.0 : data::MlmConfig{}.prob;
    in.loss_rows = static_cast<I>(std::ceil(share * static_cast<double>(in.rows * in.seq)));
    in.loss_classes = c.vocab;
  }
  return in;
}

}  // namespace sb::train
