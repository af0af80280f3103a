// Activation checkpointing (checkpoint.h).
#include "workloads/models/checkpoint.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <future>
#include <optional>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"
#include "workloads/models/kv_store.h"
#include "workloads/models/model.h"

namespace sb::models {

namespace {

// The activation_checkpoint key's names: what the parser reads and plan checks the key against.
struct ModeName {
  const char* name;
  CheckpointMode mode;
  const char* doc;
};
constexpr ModeName kModes[] = {
    {"none", CheckpointMode::None, "keep every activation for backward"},
    {"full", CheckpointMode::Full,
     "recompute whole blocks in backward (every activation_checkpoint_every-th, from block 0), "
     "keeping only their inputs"},
    {"selective", CheckpointMode::Selective,
     "recompute each block's attention core (scores, softmax, dropout, x V) in backward"},
    {"chunked", CheckpointMode::Chunked,
     "FPDT's pipeline: run and recompute every block on seq_chunks chunks of the sequence, its "
     "keys and values kept in the chunk store (kv_offload) until backward"},
};

const sb::Registrar kRegister([] {
  for (const auto& m : kModes) sb::register_name("activation_checkpoint", m.name, m.doc);
});

}  // namespace

CheckpointMode checkpoint_mode_from_name(const std::string& name) {
  for (const auto& m : kModes)
    if (name == m.name) return m.mode;
  SB_FAIL("activation_checkpoint = \"{}\": use \"none\", \"full\" (whole blocks, every "
          "activation_checkpoint_every-th), \"selective\" (the attention core of every block) or "
          "\"chunked\" (whole blocks on seq_chunks chunks of the sequence)", name);
}

RecomputeScope::RecomputeScope(ParamProvider& p) : p_(p) { p_.begin_recompute(); }
RecomputeScope::~RecomputeScope() { p_.end_recompute(); }

namespace {

// What backward needs to run f again, carried in the context as a capsule.
struct Recipe : torch::CustomClassHolder {
  ParamProvider* p = nullptr;
  RecomputeFn f;
};

struct Recompute : torch::autograd::Function<Recompute> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::TensorList inputs,
                               c10::intrusive_ptr<Recipe> recipe) {
    ctx->save_for_backward(inputs.vec());
    std::vector<torch::Tensor> in = inputs.vec();
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(recipe);
    torch::NoGradGuard off;  // forward inside a Function runs without a graph anyway: be plain
    return recipe->f(in);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto recipe = c10::static_intrusive_pointer_cast<Recipe>(ctx->saved_data["recipe"].toCapsule());
    const auto saved = ctx->get_saved_variables();
    std::vector<torch::Tensor> in;  // fresh leaves: the recomputed graph ends at them
    in.reserve(saved.size());
    for (const auto& s : saved) in.push_back(s.defined() ? s.detach().requires_grad_(s.requires_grad()) : s);
    torch::Tensor out;
    {
      torch::AutoGradMode on(true);
      RecomputeScope scope(*recipe->p);
      out = recipe->f(in);
    }
    // Gradients flow into the inputs' leaves and into the parameters f acquired (their
    // accumulate hooks fire here, as in an ordinary backward).
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_out[0]});
    torch::autograd::variable_list grads;
    for (const auto& t : in) grads.push_back(t.defined() && t.requires_grad() ? t.grad() : torch::Tensor());
    grads.emplace_back();  // the recipe
    return grads;
  }
};

}  // namespace

torch::Tensor checkpointed(ParamProvider& p, RecomputeFn f, const std::vector<torch::Tensor>& inputs) {
  bool any = false;
  for (const auto& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!torch::GradMode::is_enabled() || !any) return f(inputs);
  auto recipe = c10::make_intrusive<Recipe>();
  recipe->p = &p;
  recipe->f = std::move(f);
  return Recompute::apply(torch::TensorList(inputs), recipe);
}

namespace {

// Rows [begin, begin + n) of each of x's B sequences of T: (B n, d).
torch::Tensor chunk_rows(const torch::Tensor& x, std::int64_t B, std::int64_t T, std::int64_t begin,
                         std::int64_t n) {
  return x.reshape({B, T, -1}).narrow(1, begin, n).reshape({B * n, -1});
}

struct ChunkRecipe : torch::CustomClassHolder {
  ParamProvider* p = nullptr;
  ChunkedBlock b;
  std::int64_t n0() const { return (b.T + b.chunks - 1) / b.chunks; }
};

// The keys (or values) a chunk's recomputation attends to: the earlier chunks' (a leaf
// collecting their gradients) joined with its own.
torch::Tensor joined(const torch::Tensor& earlier, const torch::Tensor& own) {
  return earlier.defined() ? torch::cat({earlier, own}, 2) : own;
}

// An empty (B, H, T, Dh) buffer for a sequence's keys or values, shaped and typed as one
// chunk's (B, H, n, Dh).
torch::Tensor sequence_buffer(const torch::Tensor& chunk, std::int64_t T) {
  auto shape = chunk.sizes().vec();
  shape[2] = T;
  return torch::empty(shape, chunk.options());
}

// RAII: the gradients arriving inside are parts of a unit's (ParamProvider::begin_partial_grads).
class PartialGrads {
 public:
  explicit PartialGrads(ParamProvider& p) : p_(p) { p_.begin_partial_grads(); }
  ~PartialGrads() { p_.end_partial_grads(); }
  PartialGrads(const PartialGrads&) = delete;
  PartialGrads& operator=(const PartialGrads&) = delete;

 private:
  ParamProvider& p_;
};

// Each chunk's rows of the block's input, kept for backward: the input itself in memory, or
// chunk by chunk in a store (read back in reverse, one ahead of its use).
struct Inputs {
  torch::Tensor x;
  KvStore* store = nullptr;
  std::future<KvStore::Chunk> next;
};

struct ChunkedFunction : torch::autograd::Function<ChunkedFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<ChunkRecipe> r) {
    const ChunkedBlock& b = r->b;
    const std::int64_t n0 = r->n0(), f = b.kv_scale;  // keys a token
    const bool offload = b.kv_offload != "none";
    // Offloading: each chunk's keys and values, and (a second store) its rows of x.
    auto store = std::make_shared<KvStore>(b.kv_offload, b.dir);
    auto inputs = std::make_shared<KvStore>(b.kv_offload, b.dir);
    torch::Tensor K, V;  // (B, H, T f, Dh): the keys and values so far
    std::vector<torch::Tensor> ys;
    for (std::int64_t s = 0; s < b.T; s += n0) {
      const std::int64_t n = std::min(n0, b.T - s);
      const ChunkedBlock::Kv kv = [&](const torch::Tensor& k, const torch::Tensor& v) {
        SB_CHECK(k.size(2) == n * f, "chunked block: a chunk of {} tokens gave {} keys, not {}", n, k.size(2), n * f);
        if (!K.defined()) K = sequence_buffer(k, b.T * f), V = sequence_buffer(v, b.T * f);
        K.narrow(2, s * f, n * f).copy_(k), V.narrow(2, s * f, n * f).copy_(v);
        if (offload) store->put(K.narrow(2, s * f, n * f), V.narrow(2, s * f, n * f));
        return std::make_pair(K.narrow(2, 0, (s + n) * f), V.narrow(2, 0, (s + n) * f));
      };
      const auto xc = chunk_rows(x, b.B, b.T, s, n);
      if (offload) inputs->put(xc, torch::Tensor());
      // The first chunk's acquire is the forward's; the later ones' are the same unit again,
      // which an engine must not learn as a second use (it would pin the unit).
      std::optional<RecomputeScope> again;
      if (s > 0) again.emplace(*r->p);
      ys.push_back(b.f(xc, s, n, kv).view({b.B, n, -1}));
    }
    // In memory x and the key/value buffer wait for backward; offloaded, the stores' copies.
    ctx->save_for_backward({offload ? torch::Tensor() : x, offload ? torch::Tensor() : K,
                            offload ? torch::Tensor() : V});
    ctx->saved_data["store"] = hold(std::move(store));
    ctx->saved_data["inputs"] = hold(std::move(inputs));
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(r);
    return (ys.size() == 1 ? ys[0] : torch::cat(ys, 1)).view({b.B * b.T, -1});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto r = c10::static_intrusive_pointer_cast<ChunkRecipe>(ctx->saved_data["recipe"].toCapsule());
    const ChunkedBlock& b = r->b;
    ParamProvider& p = *r->p;
    const auto saved = ctx->get_saved_variables();
    SB_CHECK(ctx->saved_data.count("store") == 1, "chunked block: a second backward through one forward "
             "(retain_graph); its stored chunks were freed after the first");
    const std::int64_t n0 = r->n0(), C = (b.T + n0 - 1) / n0, f = b.kv_scale;
    Inputs in{saved[0], nullptr, {}};
    if (!in.x.defined()) {
      in.store = &held(ctx->saved_data["inputs"].toTensor());
      SB_CHECK(in.store->size() == C, "chunked block: {} input chunks stored, {} expected", in.store->size(), C);
      in.next = in.store->fetch(C - 1);  // the first one backward needs: its read overlaps the keys'
    }
    torch::Tensor K = saved[1], V = saved[2];
    if (!K.defined()) {  // every chunk's keys and values back in order, each read issued one ahead
      KvStore& store = held(ctx->saved_data["store"].toTensor());
      SB_CHECK(store.size() == C, "chunked block: {} key/value chunks stored, {} expected", store.size(), C);
      auto next = store.fetch(0);
      for (std::int64_t j = 0; j < C; ++j) {
        auto [k, v] = store.take(next);
        if (j + 1 < C) next = store.fetch(j + 1);
        if (!K.defined()) K = sequence_buffer(k, b.T * f), V = sequence_buffer(v, b.T * f);
        K.narrow(2, j * n0 * f, k.size(2)).copy_(k), V.narrow(2, j * n0 * f, v.size(2)).copy_(v);
      }
    }
    // What later chunks' queries gave each chunk's keys and values (fp32 sums).
    const auto f32 = at::promote_types(K.scalar_type(), torch::kFloat32);
    auto dK = torch::zeros(K.sizes(), K.options().dtype(f32)), dV = torch::zeros(V.sizes(), V.options().dtype(f32));
    const torch::Tensor g = grad_out[0];
    torch::Tensor dx;  // (B, T, d): filled chunk by chunk
    for (std::int64_t i = C - 1; i >= 0; --i) {
      const std::int64_t s = i * n0, n = std::min(n0, b.T - s);
      torch::Tensor xc;
      if (in.store) {
        xc = in.store->take(in.next).first;
        if (i > 0) in.next = in.store->fetch(i - 1);  // read while this chunk computes
      } else {
        xc = chunk_rows(in.x, b.B, b.T, s, n);
      }
      auto xi = xc.detach().requires_grad_(true);
      if (!dx.defined()) dx = torch::zeros({b.B, b.T, xc.size(-1)}, xc.options());
      torch::Tensor Ke, Ve;  // the earlier chunks' keys and values: leaves collecting their gradients
      if (s > 0)
        Ke = K.narrow(2, 0, s * f).detach().requires_grad_(true), Ve = V.narrow(2, 0, s * f).detach().requires_grad_(true);
      torch::Tensor ki, vi, y;
      const ChunkedBlock::Kv kv = [&](const torch::Tensor& k, const torch::Tensor& v) {
        ki = k, vi = v;
        return std::make_pair(joined(Ke, k), joined(Ve, v));
      };
      {
        torch::AutoGradMode on(true);
        RecomputeScope scope(p);
        y = b.f(xi, s, n, kv);
      }
      std::vector<torch::Tensor> roots{y}, grads{chunk_rows(g, b.B, b.T, s, n)};
      if (i + 1 < C && ki.requires_grad()) roots.push_back(ki), grads.push_back(dK.narrow(2, s * f, n * f).to(ki.scalar_type()));
      if (i + 1 < C && vi.requires_grad()) roots.push_back(vi), grads.push_back(dV.narrow(2, s * f, n * f).to(vi.scalar_type()));
      if (y.requires_grad()) {
        std::optional<PartialGrads> part;  // chunk 0, the last backward reaches, completes each gradient
        if (i > 0) part.emplace(p);
        torch::autograd::backward(roots, grads);
      }
      if (xi.grad().defined()) dx.narrow(1, s, n).copy_(xi.grad().view({b.B, n, -1}));
      if (Ke.defined() && Ke.grad().defined()) dK.narrow(2, 0, s * f) += Ke.grad();
      if (Ve.defined() && Ve.grad().defined()) dV.narrow(2, 0, s * f) += Ve.grad();
    }
    // The stores (their host memory, their files) go now, block by block, not with the graph
    // after the whole backward: a deep model's would otherwise all stay open until its end.
    ctx->saved_data.erase("store");
    ctx->saved_data.erase("inputs");
    return {dx.view({b.B * b.T, -1}), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor chunked_block(ParamProvider& p, ChunkedBlock block, const torch::Tensor& x) {
  SB_CHECK(block.chunks >= 1 && block.chunks <= block.T, "activation_checkpoint = \"chunked\": seq_chunks = {} "
           "must be between 1 and the sequence's {} tokens", block.chunks, block.T);
  SB_CHECK(x.dim() == 2 && x.size(0) == block.B * block.T, "chunked_block: x is {} rows, not {} x {}", x.size(0),
           block.B, block.T);
  auto recipe = c10::make_intrusive<ChunkRecipe>();
  recipe->p = &p;
  recipe->b = std::move(block);
  if (torch::GradMode::is_enabled() && x.requires_grad()) return ChunkedFunction::apply(x, recipe);
  // Evaluation, or an input without a gradient: the same chunks in order, each attending to
  // the keys and values so far, nothing stored (autograd, if on, records the chunks' graphs).
  const ChunkedBlock& b = recipe->b;
  std::vector<torch::Tensor> ks, vs, ys;
  for (std::int64_t s = 0; s < b.T; s += recipe->n0()) {
    const std::int64_t n = std::min(recipe->n0(), b.T - s);
    const ChunkedBlock::Kv kv = [&](const torch::Tensor& k, const torch::Tensor& v) {
      ks.push_back(k), vs.push_back(v);
      return std::make_pair(torch::cat(ks, 2), torch::cat(vs, 2));
    };
    std::optional<RecomputeScope> again;
    if (s > 0) again.emplace(p);
    ys.push_back(b.f(chunk_rows(x, b.B, b.T, s, n), s, n, kv).view({b.B, n, -1}));
  }
  return torch::cat(ys, 1).view({b.B * b.T, -1});
}

torch::Tensor attend(const Attention& attn, ParamProvider& p, const torch::Tensor& q, const torch::Tensor& k,
                     const torch::Tensor& v, const AttentionMask& m, bool recompute) {
  if (!recompute) return attn.forward(q, k, v, m);
  const Attention* a = &attn;
  return checkpointed(p, [a, m](const std::vector<torch::Tensor>& in) {
    return a->forward(in[0], in[1], in[2], m);
  }, {q, k, v});
}

}  // namespace sb::models
