// Attention registry (name -> variant) and the mask construction all variants share.
#include "workloads/models/attention.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::models {

namespace {
struct Entry {
  std::string doc;
  AttentionFactory make;
  int order = 0;
};
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
}  // namespace

void register_attention(const std::string& name, const std::string& doc, AttentionFactory make,
                        int order) {
  SB_CHECK(registry().emplace(name, Entry{doc, make, order}).second,
           "attention variant '{}' registered twice", name);
  sb::register_name("attention", name, doc);
}

torch::Tensor by_query_chunks(std::int64_t tq, std::int64_t chunk,
                              const std::function<torch::Tensor(std::int64_t, std::int64_t)>& run) {
  std::vector<torch::Tensor> outs;
  for (std::int64_t s = 0; s < tq; s += chunk) outs.push_back(run(s, std::min(chunk, tq - s)));
  return outs.size() == 1 ? outs[0] : torch::cat(outs, 2);
}

std::int64_t checked_attention_chunk(std::int64_t chunk) {
  SB_CHECK(chunk > 0, "attention_chunk must be positive, got {}", chunk);
  return chunk;
}

std::vector<std::pair<std::string, std::string>> attention_variants() {
  std::vector<std::tuple<int, std::string, std::string>> sorted;
  for (const auto& [name, e] : registry()) sorted.emplace_back(e.order, name, e.doc);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& [order, name, doc] : sorted) v.emplace_back(name, doc);
  return v;
}

std::unique_ptr<Attention> make_attention(const std::string& name, std::int64_t chunk) {
  AttentionOptions o;
  o.chunk = chunk;
  return make_attention(name, o);
}

std::unique_ptr<Attention> make_attention(const std::string& name, const AttentionOptions& opts) {
  const auto it = registry().find(name);
  if (it != registry().end()) return it->second.make(opts);
  std::string known;
  for (const auto& [n, doc] : attention_variants()) known += (known.empty() ? "" : ", ") + n;
  SB_FAIL("unknown attention variant '{}'; known: {}", name, known);
}

torch::Tensor attention_keep_mask(const AttentionMask& mask, std::int64_t q_begin,
                                  std::int64_t nq, std::int64_t k_begin, std::int64_t nk,
                                  const torch::Device& device) {
  torch::Tensor keep;  // broadcastable to (B, H, nq, nk)
  if (mask.causal) {
    auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
    auto qpos = torch::arange(mask.q_offset + q_begin, mask.q_offset + q_begin + nq, opts);
    auto kpos = torch::arange(k_begin, k_begin + nk, opts);
    keep = kpos.unsqueeze(0) <= qpos.unsqueeze(1);  // (nq, nk)
  }
  if (mask.key_keep.defined()) {
    auto kk = mask.key_keep.narrow(1, k_begin, nk).view({mask.key_keep.size(0), 1, 1, nk});
    keep = keep.defined() ? (keep & kk) : kk;  // (B, 1, nq|1, nk)
  }
  if (mask.segment_ids.defined()) {
    const auto B = mask.segment_ids.size(0);
    auto sq = mask.segment_ids.narrow(1, q_begin, nq).view({B, 1, nq, 1});
    auto sk = mask.segment_ids.narrow(1, k_begin, nk).view({B, 1, 1, nk});
    auto same = sq == sk;  // (B, 1, nq, nk)
    keep = keep.defined() ? (keep & same) : same;
  }
  return keep;
}

}  // namespace sb::models
