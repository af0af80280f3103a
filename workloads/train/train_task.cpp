// The "train" task's registration: its workload and the memory model `shardbench plan` shows
// (its keys and their rules are train_keys.cpp's).
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cmath>
#include <filesystem>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/spec/plan.h"
#include "harness/spec/mesh_config.h"
#include "harness/workload.h"
#include "workloads/comm/policy.h"
#include "workloads/data/labelled.h"
#include "workloads/models/device_config.h"
#include "workloads/models/dtype.h"
#include "workloads/models/family.h"
#include "workloads/models/loss.h"
#include "workloads/parallel/pp_schedule.h"
#include "workloads/models/model.h"
#include "workloads/train/train_config.h"
#include "workloads/train/train_workload.h"

namespace sb::train {
namespace {

using I = std::int64_t;

// dtype = "auto" as the run would resolve it: on the host, as this machine's CPU would (plan
// may run on another node than the job); on a GPU, bf16 (compute capability 8.0 and later).
torch::ScalarType planned_dtype(const Point& p) {
  const std::string& d = config<TrainChoice>(p).dtype;
  if (d != "auto") return models::dtype_from_name(d);
  return config<models::DeviceConfig>(p).device == "cpu" ? models::resolve_dtype(d, torch::kCPU) : torch::kBFloat16;
}

// The last tp rank's layout (the largest vocabulary range), for shapes only.
models::TensorParallel planning_layout(int tp) {
  models::TensorParallel shape;
  shape.rank = tp - 1, shape.size = tp;
  shape.copy_to = shape.reduce_from = [](const torch::Tensor&) -> torch::Tensor {
    SB_FAIL("a tensor-parallel layout made for planning ran a forward");
  };
  shape.cross_entropy = [](const torch::Tensor&, const torch::Tensor&, std::int64_t) -> torch::Tensor {
    SB_FAIL("a tensor-parallel layout made for planning ran a forward");
  };
  return shape;
}

// An expert-parallel layout (rank 0's experts: every rank holds as many), for shapes only.
models::ExpertParallel planning_experts(int ep) {
  models::ExpertParallel shape;
  shape.size = ep;
  shape.all_to_all = [](const torch::Tensor&, bool, const std::shared_ptr<double>&) -> torch::Tensor {
    SB_FAIL("an expert-parallel layout made for planning ran a forward");
  };
  shape.max = [](std::int64_t) -> std::int64_t { SB_FAIL("an expert-parallel layout made for planning ran a forward"); };
  return shape;
}

// The memory model of a point as `plan` sees it: the planned dtype, the mesh's shard group,
// where it is a node's ranks (0) taken as the world (plan does not know the nodes).
fsdp::MemoryPrediction planned_memory(const Point& p) {
  auto model = make_train_model(p);
  const int tp = config<MeshConfig>(p).tp;
  const bool tp_cut = tp > 1 && model->tensor_parallel_problem(tp).empty();
  if (tp_cut) model->set_tensor_parallel(planning_layout(tp));
  const int ep = config<MeshConfig>(p).ep;
  if (ep > 1 && model->expert_parallel_problem(ep).empty()) model->set_expert_parallel(planning_experts(ep));
  // The shard group spans dp_shard x sp (0: a node's ranks, which already hold the sp ones).
  const int sg = config<MeshConfig>(p).dp_shard * config<MeshConfig>(p).sp;
  const int pp = config<MeshConfig>(p).pp;
  const auto v = static_cast<int>(config<StepKeys>(p).pp_virtual_stages);
  if (pp <= 1 || !model->pipeline_problem(pp * v).empty())
    return fsdp::predict_memory(memory_inputs(p, *model, planned_dtype(p), sg));
  // A pipeline: the rank whose stages need the most (the first holds the embeddings and the
  // most micro-batches in flight, the last the head).
  fsdp::MemoryPrediction most;
  for (int r = 0; r < pp; ++r) {
    auto stage = make_train_model(p);
    if (tp_cut) stage->set_tensor_parallel(planning_layout(tp));
    stage->set_pipeline(pp, v, r, models::parse_stage_layers(config<StepKeys>(p).pp_layers));
    const auto m = fsdp::predict_memory(memory_inputs(p, *stage, planned_dtype(p), sg));
    const auto total = [](const fsdp::MemoryPrediction& x) {
      return x.model_state + x.gathered + x.activation_layers + x.activation_attention + x.activation_head;
    };
    if (r == 0 || total(m) > total(most)) most = m;
  }
  return most;
}

double state_bytes(const Point& p) { return static_cast<double>(planned_memory(p).model_state); }

std::vector<std::pair<std::string, double>> memory_terms(const Point& p) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& t : planned_memory(p).terms()) out.emplace_back(t.name, static_cast<double>(t.bytes));
  return out;
}

// The plan's pipeline columns (mesh.pp > 1, task = train; "-" otherwise): each stage's layers
// as the model is cut (models/pipeline.h), and the schedule's textbook bubble
// (p - 1) / (v m + p - 1) (parallel/pp_schedule.h ideal_bubble).
bool pipelined(const Point& p) {
  return p.has("task") && base_config(p).task == "train" && config<MeshConfig>(p).pp > 1;
}

std::string stages_cell(const Point& p) {
  if (!pipelined(p)) return "-";
  const int pp = config<MeshConfig>(p).pp, v = static_cast<int>(config<StepKeys>(p).pp_virtual_stages);
  auto model = models::make_model(config<ModelKeys>(p).model);
  model->set_pipeline(pp, v, 0, models::parse_stage_layers(config<StepKeys>(p).pp_layers));
  const auto& cut = model->pipeline();
  std::string out;
  for (int s = 0; s < cut.stages(); ++s)
    out += fmt::format("{}{}-{}", s ? "|" : "", cut.first_layer[s], cut.first_layer[s + 1] - 1);
  return out + "+head";
}

std::string bubble_cell(const Point& p) {
  if (!pipelined(p)) return "-";
  return fmt::format("{:.3f}", parallel::ideal_bubble(config<MeshConfig>(p).pp,
                                                      static_cast<int>(config<OptimKeys>(p).microbatches),
                                                      static_cast<int>(config<StepKeys>(p).pp_virtual_stages)));
}

// Offload to disk needs its files' room in offload_dir: the memory model's disk terms, for
// every rank of the point (plan does not know the nodes: as if on one, an upper bound).
void validate_offload_space(const Point& p, std::vector<Diagnostic>& out) {
  if (!p.has("task") || base_config(p).task != "train") return;
  const StepKeys& s = config<StepKeys>(p);
  if (s.offload_optimizer != "disk" && s.kv_offload != "disk") return;
  fsdp::MemoryPrediction m;
  try {
    m = planned_memory(p);
  } catch (const std::exception&) {
    return;  // a point the other checks refuse (they name why)
  }
  const std::string dir = offload_folder(s.offload_dir);
  struct statvfs fs{};
  struct stat st{};
  if (::statvfs(dir.c_str(), &fs) != 0 || ::stat(dir.c_str(), &st) != 0) return;  // validate_step names a missing folder
  const auto ranks = static_cast<std::uint64_t>(base_config(p).world);
  // Checkpoints on the same file system: two sets while a new one commits (the older is
  // removed after, checkpoint_set.cpp remove_other_sets).
  std::uint64_t ckpt = 0;
  const std::string& cdir = config<RunKeys>(p).checkpoint_dir;
  if (!cdir.empty()) {
    std::filesystem::path at = std::filesystem::absolute(cdir);  // created at run: its nearest existing folder
    std::error_code ec;
    while (at.has_parent_path() && at != at.root_path() && !std::filesystem::exists(at, ec)) at = at.parent_path();
    struct stat cst{};
    if (::stat(at.c_str(), &cst) == 0 && cst.st_dev == st.st_dev) ckpt = 2 * m.disk_checkpoint;
  }
  const std::uint64_t need = (m.disk_optim + m.disk_kv + ckpt) * ranks;
  const std::uint64_t free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (const std::string why = offload_space_problem(dir, need, free, m.disk_optim, m.disk_kv, ckpt, ranks); !why.empty())
    out.push_back({s.offload_dir.empty() ? (s.offload_optimizer == "disk" ? "offload_optimizer" : "kv_offload")
                                         : "offload_dir", why});
}

sb::Registrar reg([] {
  sb::register_validator(validate_offload_space);
  sb::register_plan_column({"pp_bubble", bubble_cell});
  sb::register_plan_column({"pp_layers", stages_cell});
  register_task({"train", [] { return make_train_workload(); }, state_bytes, memory_terms,
                 {{"batch", "lower it: fewer rows per step, fewer activations"},
                  {"microbatches", "raise it: the same batch in smaller micro-batches"},
                  {"strategy", "full_shard keeps 1/world of parameters, gradients and optimizer "
                               "state per rank"},
                  {"seq", "lower it: shorter rows, fewer activations"}},
                 [](const Point& p) {  // a rerun continues from checkpoint_dir with resume
                   const RunKeys& r = config<RunKeys>(p);
                   return r.resume ? r.checkpoint_dir : std::string();
                 }});
});

}  // namespace

fsdp::MemoryPrediction point_memory(const Point& p) { return planned_memory(p); }
torch::ScalarType point_dtype(const Point& p) { return planned_dtype(p); }

std::string offload_space_problem(const std::string& dir, std::uint64_t need, std::uint64_t free,
                                  std::uint64_t optim, std::uint64_t kv, std::uint64_t ckpt,
                                  std::uint64_t ranks) {
  if (need <= free) return "";
  const auto gib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 30); };
  const std::string sets = ckpt == 0 ? "" : fmt::format(" + {:.2f} GiB of two checkpoint sets in "
                                                        "checkpoint_dir, on the same file system", gib(ckpt));
  return fmt::format("offload to '{}' needs {:.2f} GiB of free disk ({} ranks x ({:.2f} GiB of "
                     "optimizer state + {:.2f} GiB of key/value chunks{}), as if every rank were on "
                     "this node) and it has {:.2f} GiB free; set offload_dir to a larger file "
                     "system{}, or shard more (strategy, mesh.dp_shard)",
                     dir, gib(need), ranks, gib(optim), gib(kv), sets, gib(free),
                     ckpt == 0 ? "" : " or checkpoint_dir to another one");
}

std::unique_ptr<models::Model> make_train_model(const Point& p) {
  models::ModelConfig c = models::preset_config(config<ModelKeys>(p).model);
  c.attention = config<ModelKeys>(p).attention;
  const StepKeys& s = config<StepKeys>(p);
  c.seq_chunks = s.seq_chunks;
  c.kv_offload = s.kv_offload;
  c.kv_offload_dir = offload_folder(s.offload_dir);
  models::apply_moe_keys(p, c);
  return models::make_model(c);
}

models::CheckpointConfig checkpoint_config(const Point& p) {
  const StepKeys& s = config<StepKeys>(p);
  return {models::checkpoint_mode_from_name(s.activation_checkpoint),
          static_cast<int>(s.activation_checkpoint_every)};
}

fsdp::MemoryInputs memory_inputs(const Point& p, const models::Model& model,
                                 torch::ScalarType param_dtype, int shard_group) {
  fsdp::MemoryInputs in;
  in.units = model.units();
  in.model = model.config();
  const ModelKeys& mk = config<ModelKeys>(p);
  in.strategy = mk.strategy;
  in.tp = config<MeshConfig>(p).tp;
  in.sequence_parallel = in.tp > 1 && config<StepKeys>(p).tp_sequence_parallel;
  in.pp = config<MeshConfig>(p).pp;
  in.sp = config<MeshConfig>(p).sp;
  in.ep = config<MeshConfig>(p).ep;
  // The ranks FSDP spans: the data-parallel ones and, under Ulysses, their sp ranks.
  in.world = static_cast<int>(base_config(p).world / std::max(1, in.tp * in.pp));
  in.shard_group = shard_group;
  in.param_dtype = param_dtype;
  in.reduce_dtype = models::dtype_from_name(config<StepKeys>(p).reduce_dtype);
  in.checkpoint = checkpoint_config(p);
  in.offload_optimizer = config<StepKeys>(p).offload_optimizer;
  in.offload_master = config<StepKeys>(p).offload_param == "disk";
  in.grad_accum = static_cast<int>(config<OptimKeys>(p).microbatches);
  in.policy = comm::policy_from_point(p);
  in.prefetch = config<StepKeys>(p).prefetch;
  // One micro-batch of this rank; the loss over every position (causal LM), the masked ones
  // (MLM: at most the masking probability of them) or one row each (labelled data).
  in.rows = mk.batch / std::max<I>(1, in.world / std::max(1, in.sp) * in.grad_accum);
  in.seq = mk.seq;  // the whole row's (attention's); activations hold seq / sp of it
  if (const auto& cut = model.pipeline(); cut.on()) {  // this rank's stages (models/pipeline.h)
    in.v = cut.v;
    in.stage_layers = 0;
    in.last_stage = false;
    for (int c = 0; c < cut.v; ++c) {
      in.stage_layers += cut.layers(cut.stage(c));
      in.last_stage = in.last_stage || cut.last(c);
    }
    const auto& schedule = parallel::find_pp_schedule(config<StepKeys>(p).pp_schedule);
    in.in_flight = parallel::simulate(schedule.make(cut.pp, in.grad_accum, cut.v), cut.pp, in.grad_accum,
                                      cut.v, 1.0, 2.0).peak_in_flight.at(static_cast<std::size_t>(cut.rank));
  }
  const auto& c = in.model;
  if (data::is_labelled_path(config<data::DataKeys>(p).data)) {
    in.loss_rows = in.rows;
    in.loss_classes = c.num_labels;
  } else {
    const bool causal = models::family(c.family).objective == models::Objective::CausalLm;
    const double share = causal ? 1.0 : data::MlmConfig{}.prob;
    in.loss_rows = static_cast<I>(std::ceil(share * static_cast<double>(in.rows * (in.seq / std::max(1, in.sp)))));
    in.loss_classes = c.vocab;
    // A causal LM's training loss without tp is loss.h's chunked one (Gpt2::lm_loss).
    if (causal && in.tp == 1) in.loss_chunk_rows = models::loss_chunk_rows(c.vocab);
  }
  return in;
}

}  // namespace sb::train
