// The FSDP engine's mechanics: flat buffers, gather/free, autograd hooks, gradient
// reduction, inference and memory accounting (the step and its optimizer: step.cpp).
// Strategy-specific choices come from the strategy's record (its Layout and mesh groups) and
// its class's reduce_grad / after_update (strategy_*.cpp).
#include "workloads/fsdp/engine.h"

#include "workloads/models/loss.h"

#include <algorithm>
#include <cmath>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/mpi_context.h"
#include "workloads/fsdp/unit.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"

namespace sb::fsdp {

namespace {

// Runs fn after W's AccumulateGrad stored the unit's full gradient in W.grad().
struct PostHook final : torch::autograd::FunctionPostHook {
  std::function<void()> fn;
  explicit PostHook(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn();
    return outputs;
  }
};

void free_storage(const torch::Tensor& t) {
  auto* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}
void alloc_storage(const torch::Tensor& t) {
  auto* s = t.storage().unsafeGetStorageImpl();
  const std::size_t n = t.numel() * t.element_size();
  s->set_data_ptr_noswap(c10::GetAllocator(t.device().type())->allocate(n));
  s->set_nbytes(n);
}
}  // namespace

// ---- construction ------------------------------------------------------------------------
namespace {
std::function<std::vector<torch::Tensor>(int)> from_vector(
    const std::vector<std::vector<torch::Tensor>>& initial, std::size_t units) {
  SB_CHECK(initial.size() == units, "initial weights have {} units, the model has {}",
           initial.size(), units);
  return [&initial](int u) { return initial[static_cast<std::size_t>(u)]; };
}
}  // namespace

std::function<torch::Tensor(int, std::int64_t, std::int64_t)> unit_slices(
    const models::Model& model, std::function<std::vector<torch::Tensor>(int)> initial_unit) {
  return [&model, initial_unit](int u, std::int64_t offset, std::int64_t size) {
    const auto& spec = model.units()[static_cast<std::size_t>(u)];
    const auto initial = initial_unit(u);  // this unit only
    SB_CHECK(initial.size() == spec.params.size(),
             "unit {} ('{}'): {} initial tensors for {} parameters", u, spec.name,
             initial.size(), spec.params.size());
    std::vector<torch::Tensor> flat;
    std::int64_t n = 0;
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const auto& p = spec.params[i];
      SB_CHECK(initial[i].numel() == p.numel(), "initial value of {} has {} elements, spec {}",
               p.name, initial[i].numel(), p.numel());
      flat.push_back(initial[i].detach().to(torch::kCPU, torch::kFloat32).reshape({-1}));
      n += p.numel();
    }
    if (offset + size > n) flat.push_back(torch::zeros({offset + size - n}));  // padding
    return torch::cat(flat).narrow(0, offset, size).clone();
  };
}

Engine::Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
               const std::vector<std::vector<torch::Tensor>>& initial)
    : Engine(model, comm, std::move(cfg), from_vector(initial, model.units().size())) {}

Engine::Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
               const std::function<std::vector<torch::Tensor>(int)>& initial_unit)
    : Engine(model, comm, std::move(cfg), unit_slices(model, initial_unit)) {}

Engine::Engine(models::Model& model, comm::Communicator& comm, EngineConfig cfg,
               const std::function<torch::Tensor(int, std::int64_t, std::int64_t)>& initial_slice)
    : model_(model), comm_(comm), cfg_(std::move(cfg)), info_(strategy_info(cfg_.strategy)),
      strategy_(make_strategy(cfg_.strategy)), layout_(info_.layout), shard_group_(info_.group(MeshDim::dp_shard, comm)) {
  coll_ = std::make_unique<Collectives>(comm_, cfg_.compression);
  if (model_.pipeline().on()) {  // the pipeline's own traffic (pipeline_step.cpp)
    const auto& policy = cfg_.compression;
    if (policy.compresses(comm::CollectiveKind::PpAct)) pp_act_codec_ = comm::make_compressor(policy.pp_act);
    if (policy.compresses(comm::CollectiveKind::PpGrad)) pp_grad_codec_ = comm::make_compressor(policy.pp_grad);
  }
  if (cfg_.loss_scaling) {
    SB_CHECK(cfg_.loss_scale_init > 0 && std::isfinite(cfg_.loss_scale_init) &&
                 cfg_.loss_scale_growth_interval >= 1,
             "loss scaling needs loss_scale_init > 0 (got {}) and loss_scale_growth_interval "
             ">= 1 (got {})", cfg_.loss_scale_init, cfg_.loss_scale_growth_interval);
    scale_ = cfg_.loss_scale_init;
  }
  const auto& specs = model_.units();
  if (cfg_.offload_master && !cfg_.forward_only) {
    const std::string why = master_on_disk_problem(cfg_.offload_optimizer, cfg_.strategy);
    SB_CHECK(why.empty(), "{}", why);
  }
  if (!cfg_.forward_only && cfg_.offload_optimizer != "none") make_offload_store();
  // Expert parallelism: the experts' units live on the expert-data-parallel group, a split of
  // the shard group (backend.h). Replicas (dp_replicate, hybrid sharding) hold the same split,
  // so an experts unit's replica group is every replica's rank of its ep index: the
  // Replica group itself (Collectives::group_of).
  for (std::size_t u = 0; u < specs.size(); ++u) {
    auto U = std::make_unique<Unit>();
    U->key = fmt::format("unit{}", u);
    U->expert = specs[u].expert;
    U->group = coll_->group_of(shard_group_, U->expert);
    // Padded to a multiple of the group and cut into shards when anything is sharded.
    const int N = layout_.sharded() ? comm_.size(U->group) : 1;
    const int r = layout_.sharded() ? comm_.rank(U->group) : 0;
    std::vector<std::int64_t> numels;
    std::vector<torch::Tensor> decay_parts, split_parts;
    for (const auto& p : specs[u].params) {
      numels.push_back(p.numel());
      U->shapes.push_back(p.shape);
      decay_parts.push_back(torch::full({p.numel()}, p.decay ? 1.0f : 0.0f));
      split_parts.push_back(torch::full({p.numel()}, p.tp != models::TpSplit::None ? 1.0f : 0.0f));
    }
    U->flat = flat_layout(numels);
    U->pp_copy = specs[u].pp_copy;
    U->pp_tied = specs[u].pp_tied;
    U->range = shard_range(U->flat.numel, N, r);
    const std::int64_t pad = U->range.padded - U->flat.numel;
    U->split_sizes = numels;
    U->split_sizes.push_back(pad);
    decay_parts.push_back(torch::zeros({pad}));
    split_parts.push_back(torch::zeros({pad}));
    auto decay = torch::cat(decay_parts).to(cfg_.device);  // (padded) 1 = weight decay applies
    const auto on = torch::TensorOptions().device(cfg_.device);  // fp32 on the engine's device
    // Only what this rank keeps: its shard where parameters are sharded, else the whole unit.
    const std::int64_t off = layout_.params_sharded ? U->range.offset : 0;
    const std::int64_t n = layout_.params_sharded ? U->range.size : U->range.padded;
    auto values = initial_slice(static_cast<int>(u), off, n);
    SB_CHECK(values.dim() == 1 && values.numel() == n,
             "initial slice of unit {} ('{}'): {} elements for [{}, {})", u, specs[u].name,
             values.numel(), off, off + n);
    values = values.to(cfg_.device, torch::kFloat32).contiguous();

    if (layout_.params_sharded) {
      U->master = values;  // (S)
      U->opt_off = 0;
      U->opt_n = U->range.size;
    } else {
      U->master = values;  // (padded)
      U->opt_off = layout_.optim_sharded ? U->range.offset : 0;
      U->opt_n = layout_.optim_sharded ? U->range.size : U->range.padded;
    }
    U->decay = decay.narrow(0, layout_.params_sharded ? U->range.offset : U->opt_off, U->opt_n)
                   .clone();
    U->master_n = n;
    if (store_) {  // on disk from here: the mask (and with offload_master the master) is not kept
      store_->add(U->decay, store_->holds_master() ? U->master : torch::Tensor());
      U->decay = torch::Tensor();
      if (store_->holds_master()) U->master = torch::Tensor();
    }
    if (comm_.size(comm::Group::Tp) > 1)  // the gradient norm counts split parameters per tp rank
      U->tp_split = torch::cat(split_parts).to(cfg_.device)
                        .narrow(0, layout_.params_sharded ? U->range.offset : U->opt_off, U->opt_n)
                        .clone();
    if (!cfg_.forward_only && cfg_.offload_optimizer == "none") {  // a teacher or a served
      U->exp_avg = torch::zeros({U->opt_n}, on);                     // model never steps
      U->exp_avg_sq = torch::zeros({U->opt_n}, on);
    }

    if (!layout_.params_sharded && cfg_.param_dtype == torch::kFloat32) {
      U->alias = true;  // the model computes on the fp32 replica itself
      U->W = U->master.variable_data();
      U->gathered = true;
    } else {
      U->W = torch::empty({U->range.padded}, on.dtype(cfg_.param_dtype));
      U->gathered = true;
      if (layout_.params_sharded) {
        free_storage(U->W);
        U->gathered = false;
      }
    }
    U->W.requires_grad_(true);
    U->W_raw = U->W.variable_data();
    U->acc_node = torch::autograd::impl::grad_accumulator(U->W);
    const int ui = static_cast<int>(u);
    U->acc_node->add_post_hook(std::make_unique<PostHook>([this, ui] { on_grad(ui); }));
    units_.push_back(std::move(U));
  }
  note_memory();
}

// The moments and decay masks go to a file (offload_store.h), unit by unit as they are made.
void Engine::make_offload_store() {
  SB_CHECK(cfg_.offload_optimizer == "disk", "offload_optimizer = \"{}\": known values are none "
           "and disk", cfg_.offload_optimizer);
  SB_CHECK(cfg_.device.is_cpu(), "offload_optimizer = \"disk\" streams the update on the CPU; "
           "this run's device is {}: set offload_optimizer = \"none\"", cfg_.device.str());
  store_ = std::make_unique<OffloadStore>(cfg_.offload_dir, fmt::format("rank{}", comm_.rank()),
                                          cfg_.offload_block, cfg_.offload_master);
}

Engine::~Engine() {
  // Unwinding a failure: waiting for our requests could hang on a dead peer (see
  // sb::abort_if_unwinding). Otherwise nothing may still write into our buffers.
  sb::abort_if_unwinding("the FSDP engine");
  for (auto& r : pending_grads_) r.wait();
  for (auto& U : units_) {
    if (U->reading.valid()) U->reading.wait();  // a master read not yet gathered: no request
    else if (U->gather_pending) U->gather_req.wait();
  }
}

// ---- gathering ---------------------------------------------------------------------------
void Engine::gather(int u, bool wait) {
  Unit& U = *units_[u];
  if (!U.gathered) {
    updates_.await(u);  // an overlapped update writes the master shard this gathers
    alloc_storage(U.W);
    U.gathered = true;
    // The fp32 master shard (S): Collectives casts it once, to what goes on the wire. On disk
    // (offload_master) it is read first, on an I/O thread, and gathered when it is waited for:
    // a prefetch's read overlaps the compute of the unit before.
    if (U.master.defined())
      U.gather_req = coll_->all_gather_params(U.master, U.W_raw, U.group);
    else
      U.reading = std::async(std::launch::async, [this, u] { return store_->read_master(u); });
    U.gather_pending = true;
    note_memory();
  }
  if (wait && U.gather_pending) {
    const double t0 = MPI_Wtime();
    if (U.reading.valid()) {  // the request holds the buffer until the gather is done
      U.gather_pending = false;   // no request yet: nothing to wait for if the read failed
      U.stage = U.reading.get();  // rethrows the read's error
      U.gather_pending = true;
      U.gather_req = coll_->all_gather_params(U.stage, U.W_raw, U.group);
    }
    U.gather_req.wait();
    gather_wait_s_ += MPI_Wtime() - t0;
    U.gather_pending = false;
    U.stage = torch::Tensor();
  }
}

void Engine::ensure_gathered(int u) {
  if (!layout_.params_sharded) return;
  gather(u, /*wait=*/true);
}

void Engine::prefetch(int u) {
  if (!cfg_.prefetch || !layout_.params_sharded) return;
  if (u < 0 || u >= static_cast<int>(units_.size()) || units_[u]->gathered) return;
  if (!updates_.done(u)) return;  // gathered when acquired: a prefetch must not block compute
  gather(u, /*wait=*/false);
}

void Engine::free_unit(int u) {
  Unit& U = *units_[u];
  if (!layout_.params_sharded || !U.gathered || hold_gathered_) return;
  if (U.gather_pending) gather(u, true);  // never free memory MPI is writing
  free_storage(U.W);
  U.gathered = false;
  note_memory();
}

// ---- ParamProvider -----------------------------------------------------------------------
std::vector<torch::Tensor> Engine::acquire(int u) {
  SB_CHECK(u >= 0 && u < static_cast<int>(units_.size()), "acquire({}): the model has {} units",
           u, units_.size());
  Unit& U = *units_[u];
  models::set_cpu_phase(recomputing_ > 0 ? "recomputation of unit" : "forward of unit", u);
  if (recomputing_ > 0) {  // on_backward gathered it (ensure_gathered waits or gathers now)
    ensure_gathered(u);
    return views(U);
  }
  if (U.uses++ > 0) U.pinned = true;  // learned once; kept for every later step
  comm_.progress();  // ProgressMode::Inline: move outstanding collectives (a no-op otherwise)
  ensure_gathered(u);
  // Prefetch what the previous forward acquired next; on the first forward guess u + 1.
  const std::size_t pos = acquire_order_.size();
  if (pos + 1 < last_acquire_order_.size() && last_acquire_order_[pos] == u)
    prefetch(last_acquire_order_[pos + 1]);
  else if (u + 1 < static_cast<int>(units_.size()) && units_[u + 1]->uses == 0)
    prefetch(u + 1);
  acquire_order_.push_back(u);

  return views(U);
}

// One split node per acquire: its backward concatenates the views' gradients into one
// (padded) gradient for W (zeros for unused views and the padding).
std::vector<torch::Tensor> Engine::views(Unit& U) {
  auto parts = U.W.split_with_sizes(U.split_sizes);
  std::vector<torch::Tensor> out;
  out.reserve(U.shapes.size());
  for (std::size_t i = 0; i < U.shapes.size(); ++i) out.push_back(parts[i].view(U.shapes[i]));
  return out;
}

torch::Tensor Engine::linear_cross_entropy(int, int, const torch::Tensor& x, const torch::Tensor& w,
                                           const torch::Tensor& targets) {
  models::set_cpu_phase("loss");
  return models::linear_cross_entropy(x, w, targets);
}

void Engine::release(int u, const torch::Tensor& out) {
  comm_.progress();
  if (recomputing_ > 0) return;  // the recomputation's backward frees it (on_grad)
  const int k = static_cast<int>(release_seq_.size());
  release_seq_.push_back(u);
  if (torch::GradMode::is_enabled() && out.defined() && out.requires_grad())
    out.register_hook([this, u, k](const torch::Tensor&) { on_backward(u, k); });
  if (layout_.reshard_after_forward && !units_[u]->pinned) free_unit(u);
}

// Fires when the gradient of the unit's output is complete, before the unit's own backward.
void Engine::on_backward(int u, int k) {
  // A unit used again later in forward (the LM head on the tied embedding): its later use's
  // backward runs first, and is named apart from the unit's own, the last. (A pipeline's
  // release_seq_ spans the step's micro-batches: there every release is the unit's.)
  const auto first = release_seq_.begin(), at = first + k;
  const bool later = !model_.pipeline().on() && std::find(first, at, u) != at;
  models::set_cpu_phase(later ? "backward of a later use of unit" : "backward of unit", u);
  comm_.progress();
  ensure_gathered(u);
  if (k > 0) prefetch(release_seq_[k - 1]);
}

// Fires after W's AccumulateGrad: W.grad() holds the unit's full (padded) gradient, or one
// part of it inside a chunked block's backward (partial_grads_).
void Engine::on_grad(int u) {
  sb::fault_point("backward");  // tests/mpi/failure_paths.sh
  models::set_cpu_phase(partial_grads_ > 0 ? "partial gradient of unit" : "gradient of unit", u);
  comm_.progress();
  release_reduced();
  Unit& U = *units_[u];
  torch::Tensor g = U.W.grad();
  U.W.mutable_grad() = torch::Tensor();  // never accumulate full gradients in W
  if (!g.defined()) return;
  if (partial_grads_ > 0) {  // more of this backward's gradient follows: the unit stays gathered
    // Summed in fp32 (as acc): a bf16 sum would round once more per chunk.
    U.part = U.part.defined() ? U.part.add_(g) : g.to(torch::kFloat32);
    note_memory();
    return;
  }
  if (U.part.defined()) g = U.part.add_(g), U.part = torch::Tensor();
  if (!final_micro_) {  // gradient accumulation: no communication on non-final micro-steps
    if (!U.acc.defined())
      U.acc = torch::zeros({U.range.padded}, torch::TensorOptions().device(cfg_.device));
    U.acc.add_(g);
  } else {
    torch::Tensor full = g;
    if (accumulating_ && U.acc.defined()) {
      U.acc.add_(g);
      full = U.acc;
    }
    reduce_unit(U, full);
  }
  if (layout_.params_sharded) free_unit(u);
  note_memory();
}

void Engine::reduce_unit(Unit& U, const torch::Tensor& full) {
  U.inflight = full.to(cfg_.reduce_dtype).contiguous();  // (padded)
  U.red = layout_.grads_sharded
              ? torch::empty({U.range.size}, U.inflight.options())
              : U.inflight;  // replicated gradients are reduced in place
  inflight_bytes_ += U.inflight.nbytes() + (U.red.is_same(U.inflight) ? 0 : U.red.nbytes());
  peak_inflight_ = std::max(peak_inflight_, inflight_bytes_);
  {
    Collectives::ExpertScope scope(*coll_, U.expert);
    strategy_->reduce_grad(*coll_, U.key, U.inflight, U.red, pending_grads_);
  }
  reducing_.emplace_back(&U, pending_grads_.size());
  U.reduced = true;
}

// A unit's full (padded) gradient is the reduction's input only: once its requests are done,
// only the shard `red` is needed. Kept until the end of backward, every unit's would be alive
// at once (gpt2-xl on 2 ranks: 3.1 GB a rank, twice its gradient shards).
void Engine::release_reduced() {
  while (released_ < reducing_.size()) {
    const std::size_t begin = released_ == 0 ? 0 : reducing_[released_ - 1].second;
    const auto [U, end] = reducing_[released_];
    for (std::size_t i = begin; i < end; ++i)
      if (!pending_grads_[i].test()) return;
    if (!U->red.is_same(U->inflight)) {  // a replicated gradient is reduced in place: keep it
      inflight_bytes_ -= U->inflight.nbytes();
      U->inflight = torch::Tensor();
    }
    ++released_;
  }
}

void Engine::begin_forward() {
  acquire_order_.clear();
  release_seq_.clear();
  for (auto& U : units_) U->uses = 0;
}

void Engine::end_forward() {
  if (!acquire_order_.empty()) last_acquire_order_ = acquire_order_;
  if (!torch::GradMode::is_enabled())  // nothing comes back for these: free them now
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) free_unit(u);
}

void Engine::finish_grads() {
  models::set_cpu_phase("finish gradients");
  // In issue order, each unit's full gradient freed as soon as its reductions are done
  // (release_reduced). Waited all first, every unit still in flight at backward's end kept its
  // full gradient while the last one, the tied embedding (the largest unit), was reduced: the
  // step's peak (measured: gpt2-long bf16 full_shard over sp 2, 608 MiB above the model state
  // at T 4096 and 8192 alike, with full recomputation and with chunked blocks).
  for (auto& r : pending_grads_) {
    r.wait();
    release_reduced();
  }
  pending_grads_.clear();
  reducing_.clear();
  released_ = 0;
  for (auto& U : units_) {
    if (!U->reduced) {  // the unit took no part in this step's loss
      U->grad = torch::zeros({layout_.grads_sharded ? U->range.size : U->range.padded},
                             torch::TensorOptions().device(cfg_.device).dtype(cfg_.reduce_dtype));
    } else if (U->acc.defined() && U->red.is_same(U->acc)) {
      U->grad = U->red.clone();  // acc is zeroed below for the next step
    } else {
      U->grad = U->red;
    }
    U->reduced = false;
    U->red = U->inflight = torch::Tensor();
    if (U->acc.defined()) U->acc.zero_();
  }
  inflight_bytes_ = 0;
}

void Engine::set_masks(const models::UnitTensors& masks) {
  updates_.drain();
  if (masks.empty()) {
    for (auto& U : units_) U->mask = torch::Tensor();
    return;
  }
  SB_CHECK(masks.size() == units_.size(), "set_masks: {} units of masks for {} units", masks.size(), units_.size());
  const auto slice = unit_slices(model_, from_vector(masks, units_.size()));
  torch::NoGradGuard ng;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& U = *units_[u];
    // The part of the flat unit this rank's master holds (as the constructor's initial slice).
    const std::int64_t off = layout_.params_sharded ? U.range.offset : 0;
    const std::int64_t n = layout_.params_sharded ? U.range.size : U.range.padded;
    U.mask = slice(static_cast<int>(u), off, n).to(cfg_.device, torch::kFloat32);
    if (U.master.defined())
      U.master.mul_(U.mask);
    else  // on disk: read, masked, written back
      store_->set_master(static_cast<int>(u), store_->read_master(static_cast<int>(u)).mul_(U.mask));
  }
  refresh_replicas();  // replicated low-precision copies see the zeros before the next forward
}

// ---- inference and inspection ------------------------------------------------------------
torch::Tensor Engine::forward_with(const std::function<torch::Tensor(models::ParamProvider&)>& f) {
  torch::NoGradGuard ng;
  refresh_replicas();
  begin_forward();
  auto out = f(*this);
  end_forward();
  return out;
}

torch::Tensor Engine::forward_logits(const models::Batch& b) {
  return forward_with([&](models::ParamProvider& p) { return model_.logits(p, b); });
}

torch::Tensor Engine::forward_classify(const models::Batch& b) {
  return forward_with([&](models::ParamProvider& p) { return model_.classify(p, b); });
}

torch::Tensor Engine::forward_loss(const models::Batch& b) {
  if (model_.pipeline().on()) return torch::tensor(pipeline_loss(b));
  return forward_with([&](models::ParamProvider& p) { return model_.loss(p, b); });
}

std::vector<std::vector<torch::Tensor>> Engine::full_params() {
  updates_.drain();
  std::vector<std::vector<torch::Tensor>> out;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const auto& U = units_[u];
    torch::Tensor mine = master_of(static_cast<int>(u));
    torch::Tensor full = mine;
    if (layout_.params_sharded) {
      full = torch::empty({U->range.padded}, mine.options());
      comm_.all_gather(mine, full, U->group);
    }
    auto parts = full.to(torch::kCPU).split_with_sizes(U->split_sizes);  // host copies
    std::vector<torch::Tensor> ps;
    for (std::size_t i = 0; i < U->shapes.size(); ++i)
      ps.push_back(parts[i].view(U->shapes[i]).clone());
    out.push_back(std::move(ps));
  }
  return out;
}

MemoryStats Engine::memory() const {
  MemoryStats m;
  for (const auto& U : units_) {
    if (U->master.defined()) m.param += U->master.nbytes();
    // A gather's master read (offload_param = "disk"): a communication buffer, as the model counts it.
    if (U->stage.defined() || U->reading.valid()) m.gathered += OffloadStore::master_read_bytes(U->master_n);
    if (U->grad.defined()) m.grad += U->grad.nbytes();
    if (U->acc.defined()) m.grad += U->acc.nbytes();
    if (U->exp_avg.defined()) m.optim += U->exp_avg.nbytes() + U->exp_avg_sq.nbytes();
    if (U->gathered && !U->alias) m.gathered += U->W.numel() * U->W.element_size();
  }
  m.compression = static_cast<std::uint64_t>(coll_->state_bytes());
  if (store_) m.offload += OffloadStore::staging_bytes(store_->block(), store_->holds_master());
  m.model_state = m.param + m.grad + m.optim + m.compression + m.gathered + m.offload;
  m.peak_model_state = std::max<std::uint64_t>(peak_, m.model_state);
  m.peak_gathered = std::max<std::uint64_t>(peak_gathered_, m.gathered);
  m.peak_comm_buffer = peak_inflight_;
  return m;
}

// Unit u's fp32 master (what this rank holds): the tensor itself, or read from disk.
torch::Tensor Engine::master_of(int u) const {
  const Unit& U = *units_[static_cast<std::size_t>(u)];
  return U.master.defined() ? U.master : store_->read_master(u);
}

// Replicated low-precision copies follow the fp32 replica (after every optimizer step).
void Engine::refresh_replicas() {
  if (layout_.params_sharded) return;
  updates_.drain();  // never overlapped here (overlaps_update); reads every master
  for (auto& U : units_)
    if (!U->alias) U->W_raw.copy_(U->master);
}

void Engine::note_memory() {
  const MemoryStats m = memory();
  peak_ = std::max<std::uint64_t>(peak_, m.model_state + inflight_bytes_);
  peak_gathered_ = std::max<std::uint64_t>(peak_gathered_, m.gathered);
}

}  // namespace sb::fsdp
