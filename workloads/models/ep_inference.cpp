// Expert-parallel inference's row exchanges, row blocks and capacity rule (ep_inference.h).
#include "workloads/models/ep_inference.h"

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/check.h"

namespace sb::models {

const char* ep_form_name(EpForm f) { return f == EpForm::Coherent ? "coherent" : "dispatch_combine"; }

EpForm parse_ep_form(const std::string& s) {
  if (s == "coherent") return EpForm::Coherent;
  SB_CHECK(s == "dispatch_combine", "expert-parallel inference form '{}' is not one of "
           "dispatch_combine, coherent", s);
  return EpForm::DispatchCombine;
}

TokenRows TokenRows::select(const torch::Tensor& index) const {
  return {x.index_select(0, index), id.index_select(0, index), expert.index_select(0, index),
          gate.index_select(0, index)};
}

namespace {

// A row's bytes: x's, then id and expert (int64), then gate (fp64).
torch::Tensor as_bytes(const torch::Tensor& t, std::int64_t n) {
  const std::int64_t width = (t.dim() == 2 ? t.size(1) : 1) * t.element_size();
  return t.contiguous().view(torch::kUInt8).view({n, width});
}

torch::Tensor pack(const TokenRows& r) {
  const std::int64_t n = r.size();
  return torch::cat({as_bytes(r.x, n), as_bytes(r.id, n), as_bytes(r.expert, n),
                     as_bytes(r.gate.to(torch::kFloat64), n)}, 1);
}

torch::Tensor field(const torch::Tensor& bytes, std::int64_t at, std::int64_t width, torch::ScalarType t) {
  return bytes.narrow(1, at, width).contiguous().view(t);
}

// The received bytes (n, row bytes) back to rows, padding (id -1) dropped, sorted by id.
TokenRows unpack(const torch::Tensor& bytes, const torch::Tensor& like_x) {
  const std::int64_t xw = like_x.size(1) * like_x.element_size();
  TokenRows r;
  r.x = field(bytes, 0, xw, like_x.scalar_type());
  r.id = field(bytes, xw, 8, torch::kLong).squeeze(1);
  r.expert = field(bytes, xw + 8, 8, torch::kLong).squeeze(1);
  r.gate = field(bytes, xw + 16, 8, torch::kFloat64).squeeze(1);
  const auto real = (r.id >= 0).nonzero().squeeze(1);
  r = r.select(real);
  return r.select(std::get<1>(r.id.sort()));
}

// m rows of padding (id -1) of rows' layout.
torch::Tensor padding(const TokenRows& like, std::int64_t m) {
  const auto o = like.id.options();
  return pack({torch::zeros({m, like.x.size(1)}, like.x.options()), torch::full({m}, -1, o),
               torch::full({m}, -1, o), torch::zeros({m}, like.gate.options().dtype(torch::kFloat64))});
}

}  // namespace

TokenRows exchange_rows(const ExpertParallel& ep, const TokenRows& rows, const torch::Tensor& dest,
                        const char* kind, EpLayerStats* stats) {
  SB_CHECK(ep.exchange && ep.max, "exchange_rows: expert parallelism without its collectives");
  const auto t0 = std::chrono::steady_clock::now();
  const auto bytes = pack(rows);
  std::vector<torch::Tensor> to(static_cast<std::size_t>(ep.size));
  std::int64_t most = 0;  // rows a rank's own block is not padded for: they stay out of the wire
  for (int j = 0; j < ep.size; ++j) {
    to[static_cast<std::size_t>(j)] = (dest == j).nonzero().squeeze(1);
    if (j != ep.rank) most = std::max(most, to[static_cast<std::size_t>(j)].size(0));
  }
  const std::int64_t M = ep.max(most);
  std::vector<torch::Tensor> blocks;
  for (int j = 0; j < ep.size; ++j) {
    const auto& idx = to[static_cast<std::size_t>(j)];
    blocks.push_back(j == ep.rank ? padding(rows, M)
                                  : torch::cat({bytes.index_select(0, idx), padding(rows, M - idx.size(0))}));
  }
  const auto sent = torch::stack(blocks);
  const auto got = ep.exchange(sent, kind);  // (ep, M, row bytes)
  if (stats) {  // what leaves this rank, padding included (the busbw convention: not its own block)
    stats->a2a_bytes += (ep.size - 1) * M * bytes.size(1);
    stats->a2a_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const auto mine = bytes.index_select(0, to[static_cast<std::size_t>(ep.rank)]);
  return unpack(torch::cat({got.view({ep.size * M, bytes.size(1)}), mine}), rows.x);
}

TokenRows gather_rows(const ExpertParallel& ep, const TokenRows& rows, const char* kind) {
  SB_CHECK(ep.gather && ep.max, "gather_rows: expert parallelism without its collectives");
  const auto bytes = pack(rows);
  const std::int64_t M = ep.max(rows.size());
  const auto got = ep.gather(torch::cat({bytes, padding(rows, M - rows.size())}), kind);  // (ep, M, bytes)
  return unpack(got.view({ep.size * M, bytes.size(1)}), rows.x);
}

torch::Tensor row_blocks(const std::function<torch::Tensor(const torch::Tensor&)>& f, const torch::Tensor& x,
                         std::int64_t block) {
  const std::int64_t n = x.size(0), blocks = std::max<std::int64_t>((n + block - 1) / block, 1);
  auto padded = x;
  if (blocks * block != n) {
    auto shape = x.sizes().vec();
    shape[0] = blocks * block - n;
    padded = torch::cat({x, torch::zeros(shape, x.options())});
  }
  std::vector<torch::Tensor> out;
  for (std::int64_t b = 0; b < blocks; ++b) out.push_back(f(padded.narrow(0, b * block, block)));
  return torch::cat(out).narrow(0, 0, n);
}

torch::Tensor expert_ranks(const ExpertParallel& ep, std::size_t m, std::int64_t experts) {
  if (ep.placement.empty()) return torch::arange(experts, torch::kLong).div(experts / ep.size, "floor");
  SB_CHECK(m < ep.placement.size(), "expert placement: no entry for MoE layer {} ({} given)", m, ep.placement.size());
  return torch::tensor(ep.placement[m], torch::kLong);
}

std::vector<std::int64_t> local_experts(const ExpertParallel& ep, std::size_t m, std::int64_t experts, int r) {
  const auto ranks = expert_ranks(ep, m, experts);
  std::vector<std::int64_t> out;
  for (std::int64_t e = 0; e < experts; ++e)
    if (ranks[e].item<std::int64_t>() == r) out.push_back(e);
  return out;
}

std::string placement_problem(const std::vector<std::vector<std::int64_t>>& placement, std::int64_t layers,
                              std::int64_t experts, int ep) {
  if (static_cast<std::int64_t>(placement.size()) != layers)
    return fmt::format("it places {} MoE layers; the model has {}", placement.size(), layers);
  for (std::size_t m = 0; m < placement.size(); ++m) {
    const auto& p = placement[m];
    if (static_cast<std::int64_t>(p.size()) != experts)
      return fmt::format("MoE layer {}: {} experts placed; the model has {}", m, p.size(), experts);
    std::vector<std::int64_t> per(static_cast<std::size_t>(ep), 0);
    for (const auto r : p) {
      if (r < 0 || r >= ep) return fmt::format("MoE layer {}: rank {} is outside the ep group's 0..{}", m, r, ep - 1);
      ++per[static_cast<std::size_t>(r)];
    }
    for (int r = 0; r < ep; ++r)
      if (per[static_cast<std::size_t>(r)] != experts / ep)
        return fmt::format("MoE layer {}: rank {} holds {} experts; each must hold {} (experts / ep)", m, r,
                           per[static_cast<std::size_t>(r)], experts / ep);
  }
  return "";
}

std::vector<std::vector<std::int64_t>> read_placement(const std::string& file, const std::string& model,
                                                      const MoeConfig& moe, std::int64_t n_layer, int ep) {
  std::ifstream in(file);
  SB_REQUIRE(in.good(), "{}: cannot read the expert placement file (write one with `shardbench moe-place "
           "RESULTS --ep {}`)", file, ep);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    SB_USER_FAIL("{}: not a placement file (JSON: {})", file, e.what());
  }
  const auto field = [&](const char* k) -> const nlohmann::json& {
    SB_REQUIRE(j.is_object() && j.contains(k), "{}: field '{}' is missing (moe-place writes it)", file, k);
    return j[k];
  };
  const std::string made_for = field("model").is_string() ? field("model").get<std::string>() : "";
  SB_REQUIRE(made_for == model, "{}: the placement is for model '{}'; this point's model is '{}' (place its "
           "own routing traces)", file, made_for, model);
  SB_REQUIRE(field("experts").is_number_integer() && field("experts").get<std::int64_t>() == moe.experts,
           "{}: field 'experts' is {}; model '{}' has {} experts", file, field("experts").dump(), model, moe.experts);
  SB_REQUIRE(field("ep").is_number_integer() && field("ep").get<std::int64_t>() == ep,
           "{}: field 'ep' is {}: the placement is for another mesh.ep than {} (run moe-place --ep {})", file,
           field("ep").dump(), ep, ep);
  const auto& pl = field("placement");
  SB_REQUIRE(pl.is_object(), "{}: field 'placement' must map each MoE block to its experts' ranks", file);
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t l = 0; l < n_layer; ++l) {
    if (!moe.layer(l)) continue;
    const std::string key = std::to_string(l);
    SB_REQUIRE(pl.contains(key) && pl[key].is_array(), "{}: placement has no entry for MoE block {}", file, l);
    std::vector<std::int64_t> ranks;
    for (const auto& r : pl[key]) {
      SB_REQUIRE(r.is_number_integer(), "{}: placement[\"{}\"] holds {}, not a rank", file, key, r.dump());
      ranks.push_back(r.get<std::int64_t>());
    }
    out.push_back(std::move(ranks));
  }
  SB_REQUIRE(static_cast<std::int64_t>(pl.size()) == static_cast<std::int64_t>(out.size()), "{}: placement names "
           "{} blocks; model '{}' has {} MoE blocks", file, pl.size(), model, out.size());
  const std::string bad = placement_problem(out, static_cast<std::int64_t>(out.size()), moe.experts, ep);
  SB_REQUIRE(bad.empty(), "{}: {}", file, bad);
  return out;
}

torch::Tensor place_experts(const torch::Tensor& full, const std::vector<std::int64_t>& ranks, int ep) {
  std::vector<std::int64_t> order;
  for (int r = 0; r < ep; ++r)
    for (std::size_t e = 0; e < ranks.size(); ++e)
      if (ranks[e] == r) order.push_back(static_cast<std::int64_t>(e));
  SB_CHECK(static_cast<std::int64_t>(order.size()) == full.size(0), "place_experts: {} placed of {} experts",
           order.size(), full.size(0));
  return full.index_select(0, torch::tensor(order, torch::kLong).to(full.device()));
}

std::vector<std::vector<torch::Tensor>> ep_rank_weights(const std::vector<UnitSpec>& units,
                                                        std::vector<std::vector<torch::Tensor>> whole,
                                                        const std::vector<std::vector<std::int64_t>>& placement,
                                                        int ep) {
  SB_CHECK(whole.size() == units.size(), "ep_rank_weights: {} units of weights for {} units", whole.size(),
           units.size());
  std::size_t m = 0;  // the experts units come in MoE layer order
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (!units[u].expert) continue;
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      auto& t = whole[u][i];
      if (!placement.empty()) t = place_experts(t, placement.at(m), ep);
      t = ep_slice(units[u].params[i], t);
    }
    ++m;
  }
  return whole;
}

torch::Tensor keep_at_expert(const MoeConfig& c, const TokenRows& arrived, std::int64_t group_tokens,
                             std::int64_t k) {
  const std::int64_t cap = c.capacity(group_tokens, false);
  const auto expert = arrived.expert.cpu(), group = arrived.id.cpu().div(group_tokens * k, "floor");
  const auto gate = arrived.gate.cpu();
  auto keep = torch::zeros({arrived.size()}, torch::kBool);
  // Rows are sorted by id, so each (group, expert)'s rows are in token order (a token takes an
  // expert at most once): a stable sort
  // by gate keeps the lower token on ties, as moe_route does.
  const auto key = group * c.experts + expert;
  const auto keys = std::get<0>(at::_unique(key));
  for (std::int64_t i = 0; i < keys.size(0); ++i) {
    const auto at = (key == keys[i]).nonzero().squeeze(1);
    auto take = at;
    if (at.size(0) > cap) {
      const auto order = std::get<1>(torch::sort(gate.index_select(0, at), /*stable=*/true, 0, /*descending=*/true));
      take = at.index_select(0, order.narrow(0, 0, cap));
    }
    keep.index_fill_(0, take, true);
  }
  return keep.to(arrived.id.device());
}

}  // namespace sb::models
