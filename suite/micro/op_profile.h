// Self time per op and per op class from LibTorch's profiler events (micro_profile_train,
// micro_bench_serve): where a step's time goes.
#pragma once
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sb::bench {

// The class of an op by name; "" when it has none (then its ancestor's counts).
inline std::string op_class(const std::string& n) {
  auto any = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* x) { return n == x; });
  };
  if (n == "sb::adamw") return "AdamW (sb::adamw)";
  if (n == "sb::grad_norm") return "gradient norm (sb::grad_norm)";
  if (any({"aten::bmm", "aten::baddbmm", "aten::softmax", "aten::_softmax", "aten::masked_fill",
           "aten::masked_fill_", "aten::_softmax_backward_data", "BmmBackward0",
           "BaddbmmBackward0", "SoftmaxBackward0", "MaskedFillBackward0",
           "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
           "ScaledDotProductFlashAttentionForCpuBackward0"}))
    return "attention (bmm, softmax, mask)";
  if (any({"aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "MmBackward0",
           "AddmmBackward0", "LinearBackward0"}))
    return "linear matmuls (mm, addmm)";
  if (any({"aten::layer_norm", "aten::native_layer_norm", "aten::native_layer_norm_backward",
           "NativeLayerNormBackward0"}))
    return "layer norm";
  if (any({"aten::gelu", "aten::gelu_backward", "GeluBackward0"})) return "GELU";
  if (any({"aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax",
           "aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss_forward",
           "aten::nll_loss_backward", "aten::_log_softmax_backward_data", "LogSoftmaxBackward0",
           "NllLossBackward0"}))
    return "softmax + cross-entropy (vocab)";
  if (any({"aten::embedding", "aten::embedding_backward", "aten::embedding_dense_backward",
           "EmbeddingBackward0"}))
    return "embedding";
  if (any({"aten::to", "aten::_to_copy", "aten::copy_", "ToCopyBackward0"})) return "casts and copies";
  return "";
}

struct Ev {
  std::string name;
  std::uint64_t start, end, thread;
};

// Self time per class, in ns, over events of one thread sorted by start.
// by_op: self time per op name (the "which op" behind a class); callers > 0: keyed by that
// many callers too, "grandparent > parent > op" (an add_ inside autograd's accumulation or the
// engine's).
inline void attribute(std::vector<Ev>& evs, std::map<std::string, double>& by_class,
               std::map<std::string, double>& by_op, double& ops_ns, int callers = 0) {
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;  // parents first
  });
  struct Open {
    const Ev* e;
    std::string cls;  // its own class or its nearest classed ancestor's
    std::string key;  // its by_op key
    double child_ns = 0;
  };
  std::vector<Open> stack;
  auto close = [&](const Open& o) {
    const double self = static_cast<double>(o.e->end - o.e->start) - o.child_ns;
    by_class[o.cls.empty() ? "other elementwise and views" : o.cls] += std::max(0.0, self);
    by_op[o.key] += std::max(0.0, self);
  };
  for (const Ev& e : evs) {
    while (!stack.empty() && stack.back().e->end <= e.start) {
      close(stack.back());
      stack.pop_back();
    }
    if (stack.empty()) ops_ns += static_cast<double>(e.end - e.start);
    else stack.back().child_ns += static_cast<double>(e.end - e.start);
    std::string cls = op_class(e.name);
    if (cls.empty() && !stack.empty()) cls = stack.back().cls;
    std::string key = e.name;
    for (int k = 1; k <= callers; ++k)
      key = (static_cast<int>(stack.size()) >= k ? stack[stack.size() - k].e->name : std::string("(top)")) +
            " > " + key;
    stack.push_back({&e, cls, std::move(key)});
  }
  while (!stack.empty()) {
    close(stack.back());
    stack.pop_back();
  }
}


// Runs f under the profiler (CPU activities); self time per class and per op, ns, summed over
// threads; ops_ns: time inside any op.
inline void profile_ops(const std::function<void()>& f, std::map<std::string, double>& by_class,
                        std::map<std::string, double>& by_op, double& ops_ns,
                        int callers = 0) {
  using namespace torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  const ProfilerConfig pc(ProfilerState::KINETO);
  const std::set<ActivityType> acts{ActivityType::CPU};
  prepareProfiler(pc, acts);
  enableProfiler(pc, acts);
  f();
  const auto result = disableProfiler();
  std::map<std::uint64_t, std::vector<Ev>> per_thread;
  for (const auto& e : result->events())
    if (e.durationNs() > 0)
      per_thread[e.startThreadId()].push_back(
          {e.name(), e.startNs(), e.startNs() + e.durationNs(), e.startThreadId()});
  ops_ns = 0;
  for (auto& [t, evs] : per_thread) attribute(evs, by_class, by_op, ops_ns, callers);
}

}  // namespace sb::bench
