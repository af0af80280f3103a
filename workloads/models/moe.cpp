// The MoE MLP's routing and experts (moe.h): a plain loop over experts, the reference the
// expert-parallel form is checked against.
#include "workloads/models/moe.h"

#include <chrono>
#include <cmath>

#include "harness/core/check.h"

namespace sb::models {

std::int64_t MoeConfig::capacity(std::int64_t tokens, bool training) const {
  const double f = training ? capacity_factor : eval_capacity_factor;
  if (f <= 0) return tokens * top_k;
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(top_k) * f * static_cast<double>(tokens) /
                                             static_cast<double>(experts)));
}

MoeRouting moe_route(const MoeConfig& c, const torch::Tensor& probs, bool training) {
  torch::NoGradGuard ng;
  SB_CHECK(c.top_k >= 1 && c.top_k <= c.experts, "moe.top_k {} must be in 1..{} (the experts)", c.top_k, c.experts);
  const std::int64_t N = probs.size(0), k = c.top_k, cap = c.capacity(N, training);
  const auto p = probs.detach().to(torch::kCPU, torch::kFloat32);
  MoeRouting r;
  r.choice = std::get<1>(p.topk(k, -1));  // (N, k), the highest probability first
  auto kept = torch::zeros({N, k}, torch::kBool);
  r.load.assign(static_cast<std::size_t>(c.experts), 0);
  for (std::int64_t e = 0; e < c.experts; ++e) {
    const auto at = (r.choice == e).nonzero();  // (m, 2): token, slot; tokens ascending
    const std::int64_t m = at.size(0);
    if (m == 0) continue;
    auto take = at;
    if (m > cap) {  // the highest scores for e; a stable sort keeps the lower token on ties
      const auto scores = p.index({at.select(1, 0), e});
      const auto order = std::get<1>(torch::sort(scores, /*stable=*/true, /*dim=*/0, /*descending=*/true));
      take = at.index_select(0, order.narrow(0, 0, cap));
    }
    kept.index_put_({take.select(1, 0), take.select(1, 1)}, true);
    r.load[static_cast<std::size_t>(e)] = take.size(0);
  }
  std::int64_t processed = 0;
  for (const auto n : r.load) processed += n;
  r.dropped_assignments = N * k - processed;
  r.dropped_tokens = kept.any(1).logical_not().sum().item<std::int64_t>();
  r.choice = r.choice.to(probs.device());
  r.kept = kept.to(probs.device());
  return r;
}

std::string expert_parallel_problem(const MoeConfig& c, int ep) {
  if (ep <= 1) return "";
  if (!c.on())
    return fmt::format("mesh.ep = {} splits a mixture of experts' experts, but the model is dense: "
                       "choose a gpt2-moe model or set mesh.ep = 1", ep);
  if (c.experts % ep != 0)
    return fmt::format("mesh.ep = {} must divide the model's {} experts (each expert-parallel rank "
                       "holds experts / ep of them): choose an ep that divides {}", ep, c.experts, c.experts);
  return "";
}

namespace {

// The reference: a plain loop over the experts, each on its kept tokens.
torch::Tensor experts_local(const MoeConfig& c, const torch::Tensor& x, const MoeRouting& r,
                            const torch::Tensor& gates, const torch::Tensor& fc,
                            const torch::Tensor& fc_b, const torch::Tensor& proj,
                            const torch::Tensor& proj_b) {
  auto y = torch::zeros_like(x);
  for (std::int64_t e = 0; e < c.experts; ++e) {
    const auto at = ((r.choice == e) & r.kept).nonzero();  // (m, 2)
    if (at.size(0) == 0) continue;
    const auto tok = at.select(1, 0), slot = at.select(1, 1);
    const auto h = at::gelu(at::linear(x.index_select(0, tok), fc[e], fc_b[e]), "tanh");
    const auto o = at::linear(h, proj[e], proj_b[e]);
    const auto g = gates.index({tok, slot}).to(x.scalar_type()).unsqueeze(1);
    y = y.index_add(0, tok, o * g);
  }
  return y;
}

// The experts' part of the expert-parallel form: the kept assignments of each expert in token
// order (the reference's order), dispatched as (E, C, d) slots, run on their ranks, returned.
torch::Tensor experts_parallel(const MoeConfig& c, const torch::Tensor& x, const MoeRouting& r,
                               const torch::Tensor& gates, const torch::Tensor& fc,
                               const torch::Tensor& fc_b, const torch::Tensor& proj,
                               const torch::Tensor& proj_b, const ExpertParallel& ep, MoeRouting& stats) {
  const std::int64_t E = c.experts, El = E / ep.size, d = x.size(1);
  const auto timed = [&stats](const auto& f) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = f();
    stats.a2a_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  SB_CHECK(fc.size(0) == El, "expert parallelism: {} local experts for {} experts over ep = {}",
           fc.size(0), E, ep.size);
  std::vector<torch::Tensor> toks, slots, dests;
  std::int64_t most = 0;
  const auto choice = r.choice.cpu(), kept = r.kept.cpu();
  for (std::int64_t e = 0; e < E; ++e) {
    const auto at = ((choice == e) & kept).nonzero();  // (m, 2): token, slot; tokens ascending
    most = std::max(most, at.size(0));
    toks.push_back(at.select(1, 0));
    slots.push_back(at.select(1, 1));
    dests.push_back(torch::arange(at.size(0), torch::kLong));  // its place among e's slots
  }
  const std::int64_t C = timed([&] { return std::max<std::int64_t>(ep.max(most), 1); });  // every rank's same slots
  for (std::int64_t e = 0; e < E; ++e) dests[static_cast<std::size_t>(e)] += e * C;
  const auto dev = x.device();
  const auto tok = torch::cat(toks).to(dev), slot = torch::cat(slots).to(dev), dest = torch::cat(dests).to(dev);
  // (E C, d) = (ep, El C, d): block j holds rank j's experts' slots.
  auto buf = torch::zeros({E * C, d}, x.options()).index_copy(0, dest, x.index_select(0, tok));
  stats.a2a_backward_s = std::make_shared<double>(0.0);
  auto in = timed([&] { return ep.all_to_all(buf.view({ep.size, El, C, d}), true, stats.a2a_backward_s); });  // (ep sources, El, C, d)
  // What leaves this rank in both (the combine's blocks are the dispatch's size); its own block
  // stays, as inference's exchange_rows counts.
  stats.a2a_bytes += 2 * (ep.size - 1) * (buf.numel() / ep.size) * buf.element_size();
  in = in.transpose(0, 1).reshape({El, ep.size * C, d});            // each local expert's rows
  const auto h = at::gelu(at::baddbmm(fc_b.unsqueeze(1), in, fc.transpose(1, 2)), "tanh");
  const auto o = at::baddbmm(proj_b.unsqueeze(1), h, proj.transpose(1, 2));  // (El, ep C, d)
  auto back = timed([&] {
    return ep.all_to_all(o.view({El, ep.size, C, d}).transpose(0, 1).contiguous(), false, stats.a2a_backward_s);
  });
  const auto rows = back.reshape({E * C, d}).index_select(0, dest);  // (M, d) in tok's order
  const auto g = gates.index({tok, slot}).to(x.scalar_type()).unsqueeze(1);
  return torch::zeros_like(x).index_add(0, tok, rows * g);
}

}  // namespace

MoeOutput moe_mlp(const MoeConfig& c, const torch::Tensor& x, const torch::Tensor& router,
                  const torch::Tensor& fc, const torch::Tensor& fc_b, const torch::Tensor& proj,
                  const torch::Tensor& proj_b, bool training, const ExpertParallel* ep) {
  const std::int64_t N = x.size(0), E = c.experts;
  // fp32 at least (double stays double: the finite-difference check runs in it).
  const auto rt = at::promote_types(x.scalar_type(), torch::kFloat32);
  const auto logits = torch::matmul(x.to(rt), router.to(rt).t());  // (N, E)
  const auto probs = torch::softmax(logits, -1);
  MoeOutput out;
  out.routing = moe_route(c, probs, training);
  const MoeRouting& r = out.routing;
  auto gates = probs.gather(1, r.choice);  // (N, k): differentiable through the router
  if (c.top_k > 1) gates = gates / gates.sum(1, true);
  if (ep && ep->on()) {
    out.y = experts_parallel(c, x, r, gates, fc, fc_b, proj, proj_b, *ep, out.routing);
  } else {
    SB_CHECK(fc.size(0) == E, "{} experts' weights for a model of {} experts", fc.size(0), E);
    out.y = experts_local(c, x, r, gates, fc, fc_b, proj, proj_b);
  }
  // Switch's load balancing over the first choices (no gradient through f) and ST-MoE's z-loss.
  const auto f = torch::zeros({E}, probs.options()).index_add(
                     0, r.choice.select(1, 0), torch::ones({N}, probs.options())) / static_cast<double>(N);
  out.aux = c.aux_loss_coef * static_cast<double>(E) * (f * probs.mean(0)).sum();
  out.z = c.z_loss_coef * torch::logsumexp(logits, -1).pow(2).mean();
  return out;
}

}  // namespace sb::models
