// Declarations of train_config.h (`shardbench keys` lists them) and the train task's cross-key
// rules, which plan runs before any rank starts.
#include <algorithm>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/model_keys.h"
#include "workloads/data/labelled.h"
#include "workloads/data/safetensors.h"
#include "workloads/data/text_corpus.h"
#include "workloads/distill/distill_config.h"
#include "workloads/fsdp/offload_store.h"
#include "workloads/data/data_config.h"
#include "workloads/models/attention.h"
#include "workloads/models/device_config.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"
#include "workloads/models/model.h"
#include "workloads/train/train_config.h"
#include "workloads/train/train_workload.h"

namespace sb::train {
namespace {

using I = std::int64_t;
const I kIntMax = std::numeric_limits<std::int32_t>::max();

// The ranks a global batch is split over: world without tp, pp and sp (which read the same rows).
I data_parallel_ranks(const Point& p) {
  const I world = base_config(p).world;
  if (!p.has("mesh.tp")) return world;
  const MeshConfig& m = config<MeshConfig>(p);
  const I split = I{m.tp} * m.pp * m.sp;
  return split >= 1 && world % split == 0 ? world / split : world;
}

void validate_optim(const OptimKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const BaseConfig& b = base_config(p);
  const I batch = config<ModelKeys>(p).batch;
  if (c.microbatches < 1) out.push_back({"microbatches", fmt::format("microbatches {} must be >= 1", c.microbatches)});
  else if (const I dp = data_parallel_ranks(p); dp >= 1 && batch % (dp * c.microbatches) != 0)
    out.push_back({"batch", fmt::format("batch {} is not divisible by {} {} x microbatches {} "
                                        "= {}; use a multiple of {}", batch,
                                        dp == b.world ? "world" : "the data-parallel ranks", dp,
                                        c.microbatches, dp * c.microbatches, dp * c.microbatches)});
  if (c.lr <= 0) out.push_back({"lr", "lr must be > 0"});
  if (c.min_lr > c.lr)
    out.push_back({"min_lr", fmt::format("min_lr {} exceeds lr {}", c.min_lr, c.lr)});
  if (c.lr_warmup < 0 || c.lr_warmup >= std::max<I>(1, b.steps))
    out.push_back({"lr_warmup", "lr_warmup must be >= 0 and smaller than steps"});
  // Dropping attention probabilities needs a variant that forms them (its record says).
  if (c.attention_dropout > 0) {
    const std::string& name = config<ModelKeys>(p).attention;
    try {
      if (!models::make_attention(name, 128)->drops_probabilities())
        out.push_back({"attention_dropout", fmt::format("attention_dropout = {} drops attention "
                       "probabilities, which attention = \"{}\" never forms; set attention = "
                       "\"naive\" or \"chunked\", or attention_dropout = 0", c.attention_dropout, name)});
    } catch (const std::exception&) {  // an unknown variant: the attention key's check names it
    }
  }
}

}  // namespace

std::string offload_folder(const std::string& offload_dir) {
  if (!offload_dir.empty()) return offload_dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

namespace {

// FPDT's pipeline over whole blocks (models/checkpoint.h, chunked_block): a dense causal model
// on whole rows (no row split over tp), in seq_chunks chunks (under Ulysses, of each rank's
// slice, equal), no attention dropout (its masks are keyed by a query's place among the rows
// it is computed with).
void validate_chunked(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  if (c.activation_checkpoint != "chunked") return;
  const std::string& model = config<ModelKeys>(p).model;
  if (c.seq_chunks < 1)
    out.push_back({"seq_chunks", "activation_checkpoint = \"chunked\" runs each block on seq_chunks "
                   "chunks of the sequence; set seq_chunks (1 or more; 1 keeps the block's keys and "
                   "values, 2 and more chunk it)"});
  try {
    if (models::family(models::preset_config(model).family).objective != models::Objective::CausalLm)
      out.push_back({"activation_checkpoint", fmt::format("activation_checkpoint = \"chunked\" pipelines "
                     "a causal model's chunks; model '{}' attends both ways: use \"full\" or "
                     "\"selective\"", model)});
  } catch (const sb::Error&) {  // an unknown model: the model key's check names it
  }
  // Inside Ulysses each rank's slice is its stripes of the chunks (models::Gpt2::in_chunks).
  if (const int sp = p.has("mesh.sp") ? config<MeshConfig>(p).sp : 1; sp > 1 && c.seq_chunks >= 1) {
    const std::int64_t local = config<ModelKeys>(p).seq / sp;
    if (local > 0 && local % c.seq_chunks != 0)  // more stripes than tokens included
      out.push_back({"seq_chunks", fmt::format("activation_checkpoint = \"chunked\" under mesh.sp = {} cuts "
                     "each rank's {} tokens (seq / sp) into seq_chunks = {} equal stripes; use a seq_chunks "
                     "that divides {}", sp, local, c.seq_chunks, local)});
  }
  if (c.tp_sequence_parallel && p.has("mesh.tp") && config<MeshConfig>(p).tp > 1)
    out.push_back({"tp_sequence_parallel", "activation_checkpoint = \"chunked\" runs whole blocks on "
                   "whole rows; tp_sequence_parallel = true splits their rows over mesh.tp: set it "
                   "to false, or use \"full\""});
  if (const double pa = config<OptimKeys>(p).attention_dropout; pa > 0)
    out.push_back({"attention_dropout", fmt::format("attention_dropout = {} with activation_checkpoint "
                   "= \"chunked\": the probabilities' masks would depend on the chunks; set "
                   "attention_dropout = 0 (dropout, the residual one, is independent of them)", pa)});
}

// seq_chunks and kv_offload ask for a variant that streams chunks (its record says), or for
// chunked blocks, whose pipeline they drive.
void validate_fpdt(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  if (c.seq_chunks == 0 && c.kv_offload == "none") return;
  const std::string& name = config<ModelKeys>(p).attention;
  bool streams = c.activation_checkpoint == "chunked";
  try {
    streams = streams || models::make_attention(name, 128)->streams_chunks();
  } catch (const std::exception&) {  // an unknown variant: the attention key's check names it
    return;
  }
  // Each key set is named, so that one fix is not followed by another error.
  const auto refuse = [&](const char* key) {
    out.push_back({key, fmt::format("{} streams a sequence's chunks, which attention = \"{}\" does "
                   "not; set attention = \"fpdt\" or activation_checkpoint = \"chunked\", or "
                   "drop {}", key, name, key)});
  };
  if (!streams && c.seq_chunks != 0) refuse("seq_chunks");
  if (!streams && c.kv_offload != "none") refuse("kv_offload");
  if (c.seq_chunks > config<ModelKeys>(p).seq)
    out.push_back({"seq_chunks", fmt::format("seq_chunks {} exceeds seq {}: a chunk needs a token; "
                   "use at most {}", c.seq_chunks, config<ModelKeys>(p).seq, config<ModelKeys>(p).seq)});
  if (c.kv_offload == "host" && config<models::DeviceConfig>(p).device == "cpu")
    out.push_back({"kv_offload", "kv_offload = \"host\" moves key/value chunks to host memory, "
                   "where a CPU run keeps them already; use \"disk\" (a file under offload_dir) or "
                   "\"none\""});
}

// A mixture of experts is not recomputed yet (its aux losses' graph would be lost).
void validate_moe(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  if (c.activation_checkpoint == "none" || c.activation_checkpoint == "auto") return;
  try {
    if (!models::preset_config(config<ModelKeys>(p).model).moe.on()) return;
  } catch (const std::exception&) {
    return;  // an unknown model: the model key's check names it
  }
  out.push_back({"activation_checkpoint", fmt::format("model '{}' is a mixture of experts, which "
                 "activation checkpointing does not recompute yet (its aux losses' graph would be "
                 "lost); set activation_checkpoint = \"none\"", config<ModelKeys>(p).model)});
}

// The master goes to the optimizer's file, and is read back by gathers: only where there are
// both.
void validate_offload_param(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  if (c.offload_param != "disk") return;
  std::string why;
  try {
    why = fsdp::master_on_disk_problem(c.offload_optimizer, config<ModelKeys>(p).strategy);
  } catch (const std::exception&) {
    return;  // an unknown strategy: the strategy key's check names it
  }
  if (!why.empty()) out.push_back({"offload_param", why});
}

// Keys that would have no effect: warned, not refused (the point still runs as asked).
void warn_no_effect(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  if (c.activation_checkpoint == "full" && c.activation_checkpoint_every > 1) try {
      const std::int64_t L = models::preset_config(config<ModelKeys>(p).model).n_layer;
      if (L > 0 && c.activation_checkpoint_every >= L)
        out.push_back({"activation_checkpoint_every", fmt::format("activation_checkpoint_every = {} recomputes "
                       "block l when l % {} == 0: of the {} blocks of model '{}' only block 0; use at most {}",
                       c.activation_checkpoint_every, c.activation_checkpoint_every, L,
                       config<ModelKeys>(p).model, L - 1), true});
    } catch (const std::exception&) {  // a folder or an unknown model: its block count is not known here
    }
  if (!c.offload_overlap && c.offload_optimizer == "none")
    out.push_back({"offload_overlap", "offload_overlap = false finishes an offloaded update inside "
                   "the step, and offload_optimizer = \"none\" offloads nothing: it has no effect; "
                   "drop it", true});
}

void validate_step(const StepKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  validate_moe(c, p, out);
  warn_no_effect(c, p, out);
  const int world = base_config(p).world;
  if (c.activation_checkpoint_every != 1 && c.activation_checkpoint != "full")
    out.push_back({"activation_checkpoint_every",
                   fmt::format("activation_checkpoint_every = {} picks the blocks that \"full\" "
                               "recomputes; set activation_checkpoint = \"full\" or drop "
                               "activation_checkpoint_every", c.activation_checkpoint_every)});
  if (c.shard_group < 0 || (c.shard_group > 0 && world % c.shard_group != 0))
    out.push_back({"shard_group", fmt::format("shard_group {} must divide world {} (0 = ranks per "
                                              "node)", c.shard_group, world)});
  if (c.offload_optimizer == "none" && c.kv_offload != "disk" && !c.offload_dir.empty())
    out.push_back({"offload_dir", fmt::format("offload_dir = \"{}\" holds offloaded state, and "
                   "offload_optimizer = \"none\" with kv_offload = \"{}\" offloads nothing to disk: "
                   "set offload_optimizer or kv_offload = \"disk\", or drop offload_dir",
                   c.offload_dir, c.kv_offload)});
  validate_fpdt(c, p, out);
  validate_chunked(c, p, out);
  validate_offload_param(c, p, out);
  if (c.offload_optimizer == "disk" || c.kv_offload == "disk") {
    const std::string dir = offload_folder(c.offload_dir);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
      out.push_back({"offload_dir", fmt::format("offload_dir '{}' is not a writable folder; create "
                                                "it or name another", dir)});
  }
  const TrainChoice& t = config<TrainChoice>(p);
  if (c.reduce_dtype == "auto")
    out.push_back({"reduce_dtype", "reduce_dtype takes fp32, bf16 or fp16 (\"auto\" is for "
                                   "dtype only)"});
  if (c.reduce_dtype != "fp32" && t.compression != "none")
    out.push_back({"reduce_dtype", fmt::format("compression '{}' compresses fp32 gradients; set "
                                               "reduce_dtype = \"fp32\"", t.compression)});
  // Loss scaling (fp16) scales the gradients the compressors keep residuals and warm starts
  // of: a skipped step or a new scale would poison them.
  if (t.dtype == "fp16" && t.compression != "none")
    out.push_back({"compression", fmt::format("compression '{}' with dtype = \"fp16\": fp16 "
                                              "trains with dynamic loss scaling, whose skipped "
                                              "steps and changing scale the compressors' state "
                                              "cannot follow; use dtype = \"bf16\" or "
                                              "compression = \"none\"", t.compression)});
}

// The data a model family can train on (an unknown model is reported by the name check).
void check_data_for_family(const std::string& model, const Point& p, std::vector<Diagnostic>& out) {
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
  }
}

// The weights a point starts from and a distillation teacher's, checked from their headers
// (names, shapes, dtypes); a distillation student made from its teacher's layers reads none.
void check_weights(const RunKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const std::string& model = config<ModelKeys>(p).model;
  if (!c.init.empty() && c.init != "seed" && !std::filesystem::exists(c.init))
    out.push_back({"init", fmt::format("init '{}' does not exist (yet): the point will fail "
                                       "unless an earlier suite writes it; check the path", c.init),
                   true});
  const auto& d = config<distill::DistillKeys>(p);
  if (!c.init.empty() && d.student_init != "none")
    out.push_back({"init", fmt::format("init and distill.student_init = \"{}\" both set the student's "
                                       "first weights; keep one", d.student_init)});
  if (d.student_init != "every_other")
    if (const std::string bad = data::checkpoint_problem(model, init_weights_path(p)); !bad.empty())
      out.push_back({c.init.empty() ? "model" : "init", bad});
  if (!d.teacher.empty()) {
    const std::string from = !d.teacher_init.empty() ? d.teacher_init
                             : models::is_model_path(d.teacher) ? d.teacher : "";
    if (const std::string bad = data::checkpoint_problem(d.teacher, from); !bad.empty())
      out.push_back({d.teacher_init.empty() ? "teacher" : "teacher_init", bad});
  }
}

// Input files are looked for at plan time, but only warned about: an earlier suite may write
// them (a checkpoint, an exported corpus). Relative paths are from the current directory.
void warn_missing_inputs(const RunKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const std::string& data = config<data::DataKeys>(p).data;
  // A misspelt keyword is an error of data's own check (labelled_keys.cpp), not a missing file.
  if (data != "markov" && data::data_keyword_typo(data).empty() && !std::filesystem::exists(data))
    out.push_back({"data", fmt::format("data file '{}' does not exist (yet): the point will fail "
                                       "unless an earlier suite writes it; check the path",
                                       data), true});
  if (c.resume && !c.checkpoint_dir.empty() && !std::filesystem::exists(c.checkpoint_dir))
    out.push_back({"checkpoint_dir", fmt::format("resume = true, but checkpoint_dir '{}' does not "
                                                 "exist (yet): the point starts at step 0 unless "
                                                 "an earlier suite or run saves a checkpoint "
                                                 "there; check the path", c.checkpoint_dir), true});
}

void validate_run(const RunKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const ModelKeys& m = config<ModelKeys>(p);
  check_data_for_family(m.model, p, out);
  check_weights(c, p, out);
  if (c.checkpoint_dir.empty() && c.resume)
    out.push_back({"resume", "resume = true needs checkpoint_dir"});
  // positions beyond the model's do not exist (train and infer alike)
  if (const std::string bad = models::seq_problem(m.model, m.seq); !bad.empty())
    out.push_back({"seq", bad});
  warn_missing_inputs(c, p, out);
}

}  // namespace

void OptimKeys::declare(Fields<OptimKeys>& f) {
  f.tasks({"train"});
  f.add("lr", &OptimKeys::lr, 6e-4, "peak learning rate (AdamW)");
  f.add("min_lr", &OptimKeys::min_lr, 6e-5, "cosine floor of the learning rate");
  f.add("weight_decay", &OptimKeys::weight_decay, 0.1,
        "decoupled AdamW weight decay (not on biases and LayerNorm)");
  f.add("grad_clip", &OptimKeys::grad_clip, 1.0, "global gradient L2-norm clip; <= 0 disables");
  f.add("lr_warmup", &OptimKeys::lr_warmup, 0, "optimizer steps of linear learning-rate warm-up")
      .range(0, kIntMax);
  f.add("microbatches", &OptimKeys::microbatches, 1,
        "micro-batches per optimizer step (Megatron's meaning): with mesh.pp > 1 the pipeline's, "
        "otherwise gradient accumulation (no communication until the last)")
      .range(1, I{1} << 16);
  f.add("grad_accum", &OptimKeys::grad_accum, 1, "the old name of microbatches (set one of them)")
      .range(1, I{1} << 16);
  f.add("loss_scale_init", &OptimKeys::loss_scale_init, 65536.0,
        "fp16 (dtype or reduce_dtype): the initial dynamic loss scale (docs/FSDP.md)")
      .range(1.0, 1e30);
  f.add("loss_scale_growth_interval", &OptimKeys::loss_scale_growth_interval, 2000,
        "fp16: finite steps in a row before the loss scale doubles (halved on a skipped step)")
      .range(1, kIntMax);
  f.add("dropout", &OptimKeys::dropout, 0.0,
        "dropout probability on the embeddings and each block's attention and MLP outputs, "
        "training only, masks independent of the mesh (docs/FSDP.md \"Dropout\")")
      .range(0.0, 0.95);
  f.add("attention_dropout", &OptimKeys::attention_dropout, 0.0,
        "dropout probability on the attention probabilities, training only (attention = naive "
        "or chunked: the variants that form them), masks independent of the mesh")
      .range(0.0, 0.95);
  f.validate(validate_optim);
}
SB_CONFIG_SECTION(OptimKeys);

void StepKeys::declare(Fields<StepKeys>& f) {
  f.tasks({"train"});
  f.add("shard_group", &StepKeys::shard_group, 0,
        "ranks per shard group (hybrid_shard); 0 = ranks per node").range(0, I{1} << 20);
  f.name("reduce_dtype", &StepKeys::reduce_dtype, "dtype", "fp32",
         "dtype of gradient collectives (fp32, bf16, fp16)");
  f.add("prefetch", &StepKeys::prefetch, true, "all-gather the next unit while the current one computes");
  f.add("tp_sequence_parallel", &StepKeys::tp_sequence_parallel, false,
        "Megatron's sequence parallelism with mesh.tp > 1: LayerNorm regions hold 1/tp of the "
        "rows; reduce-scatter and all-gather replace the all-reduces (docs/FSDP.md)");
  f.name("pp_schedule", &StepKeys::pp_schedule, "pp_schedule", "1f1b",
         "pipeline schedule with mesh.pp > 1: gpipe, 1f1b or interleaved_1f1b (docs/FSDP.md); "
         "microbatches is the step's micro-batches");
  f.add("pp_virtual_stages", &StepKeys::pp_virtual_stages, 1,
        "model stages per pipeline rank (interleaved_1f1b: 2 or more)").range(1, 64);
  f.add("pp_layers", &StepKeys::pp_layers, std::string(""),
        "with mesh.pp > 1, the layers of each stage in stage order, e.g. \"9,3\" (mesh.pp x "
        "pp_virtual_stages counts adding up to the model's layers); \"\" = balanced by counted FLOPs");
  // "auto": poll where parameters are sharded (a unit's all-gather then completes while the
  // peer computes, instead of waiting for the peer's next unit boundary), inline otherwise
  // (poll's 20 us sleeps slow libnbc's many-round all-reduce). docs/FSDP.md "Benchmark".
  register_name("comm_progress", "auto",
                "poll for strategies whose layout shards parameters, inline for the others");
  f.name("comm_progress", &StepKeys::comm_progress, "comm_progress", "auto",
         "how overlapped collectives progress: auto, thread, poll or inline (docs/FSDP.md)");
  // The names: models/checkpoint.cpp registers them beside their parser.
  f.name("activation_checkpoint", &StepKeys::activation_checkpoint, "activation_checkpoint", "none",
         "activation checkpointing: none, full, selective or chunked (FPDT's pipeline of whole "
         "blocks over seq_chunks chunks; docs/FSDP.md \"Activation checkpointing\", \"FPDT\")");
  f.add("activation_checkpoint_every", &StepKeys::activation_checkpoint_every, 1,
        "with activation_checkpoint = \"full\": recompute block l when l % k == 0 (1: every block)")
      .range(1, 1 << 16);
  register_name("offload_optimizer", "none", "the Adam moments stay in memory");
  register_name("offload_optimizer", "disk",
                "the Adam moments and decay mask in a file under offload_dir (O_DIRECT), streamed "
                "through the update in blocks with reads and writes overlapped");
  f.name("offload_optimizer", &StepKeys::offload_optimizer, "offload_optimizer", "none",
         "where the optimizer state lives: none (memory) or disk (docs/FSDP.md \"Optimizer state "
         "on disk\")");
  f.add("offload_overlap", &StepKeys::offload_overlap, true,
        "with offload_optimizer = \"disk\" and a strategy that shards parameters: each unit's "
        "update runs on a thread after the step and the next forward waits for it before "
        "gathering the unit (false: the update finishes inside the step) (docs/FSDP.md "
        "\"Optimizer state on disk\")");
  register_name("offload_param", "none", "the fp32 master weights stay in memory");
  register_name("offload_param", "disk",
                "the fp32 master weights in the optimizer state's file (offload_optimizer = "
                "\"disk\"), streamed by the update; each gather reads its unit's shard from disk "
                "(in fp32 training the master is the compute copy: parameter offload)");
  f.name("offload_param", &StepKeys::offload_param, "offload_param", "none",
         "where the fp32 master weights live: none (memory) or disk (with offload_optimizer = "
         "\"disk\" and a strategy that shards parameters) (docs/FSDP.md \"Optimizer state on "
         "disk\")");
  f.add("offload_dir", &StepKeys::offload_dir, std::string(""),
        "folder of the offloaded optimizer state (offload_optimizer = \"disk\": one file a "
        "rank, removed at exit) and key/value chunks (kv_offload = \"disk\"); empty = $TMPDIR or /tmp");
  f.add("seq_chunks", &StepKeys::seq_chunks, 0,
        "with attention = \"fpdt\": chunks each sequence's attention streams through (0: "
        "chunks of attention_chunk = 128 tokens); with activation_checkpoint = \"chunked\": the "
        "chunks whole blocks run on (docs/FSDP.md \"FPDT\")")
      .range(0, 1 << 20);
  register_name("kv_offload", "none", "FPDT's key/value chunks stay in memory until backward");
  register_name("kv_offload", "host", "FPDT's key/value chunks in host memory (GPU runs)");
  register_name("kv_offload", "disk",
                "FPDT's key/value chunks in a file under offload_dir (O_DIRECT), written while "
                "later chunks compute and read back one chunk ahead of backward");
  f.name("kv_offload", &StepKeys::kv_offload, "kv_offload", "none",
         "with attention = \"fpdt\": where the key/value chunks wait for backward: none, host "
         "or disk (docs/FSDP.md \"FPDT\")");
  f.add("peak_gflops", &StepKeys::peak_gflops, 0.0,
        "peak GFLOP/s of one rank for MFU; 0 = measure once per run");
  f.validate(validate_step);
}
SB_CONFIG_SECTION(StepKeys);

void RunKeys::declare(Fields<RunKeys>& f) {
  f.tasks({"train"});
  f.add("eval_every", &RunKeys::eval_every, 0,
        "evaluate held-out loss every N steps (0 = only at the end)").range(0, kIntMax);
  f.add("eval_batches", &RunKeys::eval_batches, 4, "held-out global batches per evaluation")
      .range(0, I{1} << 20);
  f.add("checkpoint_dir", &RunKeys::checkpoint_dir, std::string(""),
        "directory of sharded checkpoints (saved at the end; empty = none)");
  f.add("resume", &RunKeys::resume, false,
        "continue from checkpoint_dir's newest committed checkpoint (step 0 when there is none)");
  f.add("init", &RunKeys::init, std::string(""),
        "the weights training starts from: a safetensors file or model folder; empty = the model "
        "folder's weights when model is a folder, else seeded; \"seed\" = seeded always");
  // An output: a later point may read the folder (models/folder_check.h).
  f.add("export_folder", &RunKeys::export_folder, std::string(""),
        "after training, write a Hugging Face model folder (config.json + model.safetensors) "
        "here, loadable as model = <folder> (rank 0 writes; empty = none)")
      .writes_path();
  f.add("export_safetensors", &RunKeys::export_safetensors, std::string(""),
        "after training, write the full fp32 parameters to this one safetensors file with Hugging "
        "Face names (rank 0 writes; empty = none)");
  f.validate(validate_run);
}
SB_CONFIG_SECTION(RunKeys);

}  // namespace sb::train
