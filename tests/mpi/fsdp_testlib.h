// Helpers shared by the FSDP MPI tests: deterministic synthetic global batches (GPT-2 next
// token, BERT MLM), slicing per rank, and a driver running N steps of an engine.
#pragma once
#include <filesystem>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <torch/types.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/train/reference_trainer.h"

namespace sbtest {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The global batch of `step`: (B, T) tokens from a generator seeded by the step alone.
// GPT-2: targets are the next tokens. BERT: ~15% of positions (at least one per row) are
// replaced by token vocab-1 and are the only targets.
inline sb::models::Batch global_batch(const sb::models::ModelConfig& c, std::int64_t B,
                                      std::int64_t T, std::int64_t step) {
  auto gen = at::detail::createCPUGenerator(1000 + static_cast<std::uint64_t>(step));
  sb::models::Batch b;
  if (c.family == "gpt2") {
    auto tok = torch::randint(c.vocab, {B, T + 1}, gen, torch::kInt64);
    b.input_ids = tok.narrow(1, 0, T).contiguous();
    b.targets = tok.narrow(1, 1, T).contiguous();
  } else {
    auto tok = torch::randint(c.vocab - 1, {B, T}, gen, torch::kInt64);
    auto mask = torch::rand({B, T}, gen) < 0.15;
    mask.select(1, step % T).fill_(true);  // at least one target per row
    b.targets = torch::where(mask, tok, torch::full_like(tok, -100));
    b.input_ids = torch::where(mask, torch::full_like(tok, c.vocab - 1), tok);
  }
  return b;
}

// Rows [r * B/n, (r+1) * B/n) of every tensor.
inline sb::models::Batch slice(const sb::models::Batch& g, int r, int n) {
  const std::int64_t rows = g.input_ids.size(0) / n;
  auto cut = [&](const torch::Tensor& t) {
    return t.defined() ? t.narrow(0, r * rows, rows).contiguous() : t;
  };
  sb::models::Batch b;
  b.input_ids = cut(g.input_ids);
  b.targets = cut(g.targets);
  b.attention_mask = cut(g.attention_mask);
  b.token_type_ids = cut(g.token_type_ids);
  b.labels = cut(g.labels);
  b.row0 = g.row0 + r * rows;  // dropout masks follow the rows
  b.dropout_step = g.dropout_step;
  b.seq_begin = g.seq_begin, b.seq_full = g.seq_full, b.seq_stripe = g.seq_stripe;  // a sequence slice's
  return b;
}

inline sb::optim::AdamWConfig test_adamw(std::int64_t steps) {
  sb::optim::AdamWConfig a;
  a.lr = 3e-3;
  a.min_lr = 3e-4;
  a.weight_decay = 0.1;
  a.grad_clip = 1.0;
  a.warmup_steps = 2;
  a.total_steps = steps;
  return a;
}

// The message of the sb::Error f throws, "no error" when it does not throw.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "no error";
}

// A directory all ranks agree on (rank 0 creates it; the name travels by broadcast). The
// barrier first: a test that asks for the same name again (an engine a loop iteration, each
// with its offload file there) must not have rank 0 empty the folder while another rank's
// last engine still removes its own file in it (remove_all then throws, now and then).
inline std::string shared_tmpdir(const std::string& prefix, const std::string& tag) {
  char buf[256] = {0};
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::string d = fmt::format("{}/{}_{}_{}_{}", std::filesystem::temp_directory_path().string(),
                                prefix, tag, getpid(), world_size());
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    std::snprintf(buf, sizeof buf, "%s", d.c_str());
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf;
}

// Whether a strategy's record runs collectives over dp_replicate (hybrid sharding): its tests
// build the communicator with shard groups (emulated nodes).
inline bool replicates(const std::string& strategy) {
  return sb::fsdp::strategy_info(strategy).uses(sb::fsdp::MeshDim::dp_replicate);
}

// An engine configuration for the tests: strategy, and AdamW over `steps` steps.
inline sb::fsdp::EngineConfig engine_config(const std::string& strategy, std::int64_t steps = 10) {
  sb::fsdp::EngineConfig c;
  c.strategy = strategy;
  c.adamw = test_adamw(steps);
  return c;
}

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<std::vector<torch::Tensor>> params;  // final, full, fp32
};

// Runs `steps` optimizer steps of a fresh engine on comm, global batch B x T per step split
// evenly over comm's world ranks and then into `accum` micro-batches.
inline RunResult run_engine(sb::models::Model& model, sb::comm::Communicator& comm,
                            sb::fsdp::EngineConfig cfg, std::int64_t B, std::int64_t T,
                            int steps, int accum = 1, std::int64_t first_step = 0,
                            sb::fsdp::Engine* engine_out = nullptr) {
  RunResult res;
  std::unique_ptr<sb::fsdp::Engine> own;
  sb::fsdp::Engine* e = engine_out;
  if (!e) {
    own = std::make_unique<sb::fsdp::Engine>(model, comm, cfg,
                                             sb::models::init_params(model.units(), 1234));
    e = own.get();
  }
  for (int s = 0; s < steps; ++s) {
    auto g = global_batch(model.config(), B, T, first_step + s);
    auto mine = slice(g, comm.rank(), comm.size());
    std::vector<sb::models::Batch> micro;
    for (int m = 0; m < accum; ++m) micro.push_back(slice(mine, m, accum));
    auto st = e->step(micro, sb::fsdp::loss_terms(g));
    res.losses.push_back(st.loss);
    res.norms.push_back(st.grad_norm);
  }
  res.params = e->full_params();
  return res;
}

// The one-process trainer (sb::train::ReferenceTrainer: plain autograd on persistent fp32
// tensors, parameters seeded 1234 as run_engine's) on `steps` global batches B x T: losses,
// gradient norms and final parameters, the reference the engine's runs are held to.
inline RunResult run_reference(sb::models::Model& model, int steps, std::int64_t B, std::int64_t T) {
  sb::train::TrainConfig tc;
  tc.adamw = test_adamw(steps);
  tc.seed = 1234;
  sb::train::ReferenceTrainer ref(model, tc);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    auto st = ref.step({global_batch(model.config(), B, T, s)});
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  for (const auto& unit : ref.params()) {
    r.params.emplace_back();
    for (const auto& t : unit) r.params.back().push_back(t.detach().clone());
  }
  return r;
}

// run_reference of a fresh model of `preset`, run once per (preset, steps, B, T) in a process
// (the tests compare many meshes against one reference).
inline const RunResult& cached_reference(const std::string& preset, int steps, std::int64_t B,
                                         std::int64_t T) {
  static std::map<std::tuple<std::string, int, std::int64_t, std::int64_t>, RunResult> cache;
  const auto key = std::make_tuple(preset, steps, B, T);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto model = sb::models::make_model(preset);
  return cache[key] = run_reference(*model, steps, B, T);
}

// Largest |a - b| / (|b| + 1e-3) over all parameters; and max abs difference.
inline double max_param_diff(const std::vector<std::vector<torch::Tensor>>& a,
                             const std::vector<std::vector<torch::Tensor>>& b) {
  double d = 0;
  for (std::size_t u = 0; u < a.size(); ++u)
    for (std::size_t i = 0; i < a[u].size(); ++i)
      d = std::max(d, (a[u][i] - b[u][i]).abs().max().item<double>());
  return d;
}

}  // namespace sbtest
