// Activation checkpointing (checkpoint.h).
#include "workloads/models/checkpoint.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"
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
};

const sb::Registrar kRegister([] {
  for (const auto& m : kModes) sb::register_name("activation_checkpoint", m.name, m.doc);
});

}  // namespace

CheckpointMode checkpoint_mode_from_name(const std::string& name) {
  for (const auto& m : kModes)
    if (name == m.name) return m.mode;
  SB_FAIL("activation_checkpoint = \"{}\": use \"none\", \"full\" (whole blocks, every "
          "activation_checkpoint_every-th) or \"selective\" (the attention core of every block)", name);
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

torch::Tensor attend(const Attention& attn, ParamProvider& p, const torch::Tensor& q, const torch::Tensor& k,
                     const torch::Tensor& v, const AttentionMask& m, bool recompute) {
  if (!recompute) return attn.forward(q, k, v, m);
  const Attention* a = &attn;
  return checkpointed(p, [a, m](const std::vector<torch::Tensor>& in) {
    return a->forward(in[0], in[1], in[2], m);
  }, {q, k, v});
}

}  // namespace sb::models
