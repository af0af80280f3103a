// BERT requests (bert_executor.h).
#include "workloads/serve/bert_executor.h"

#include <algorithm>
#include <numeric>

#include "harness/core/check.h"

namespace sb::serve {

std::vector<std::vector<std::int64_t>> pack_rows(const std::vector<std::int64_t>& lens, std::int64_t cap) {
  std::vector<std::int64_t> order(lens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return lens[a] > lens[b]; });
  std::vector<std::vector<std::int64_t>> rows;
  std::vector<std::int64_t> used;
  for (auto i : order) {
    SB_CHECK(lens[i] >= 1 && lens[i] <= cap, "pack_rows: item {} of {} tokens does not fit rows of {}",
             i, lens[i], cap);
    std::size_t r = 0;
    while (r < rows.size() && used[r] + lens[i] > cap) ++r;
    if (r == rows.size()) rows.emplace_back(), used.push_back(0);
    rows[r].push_back(i);
    used[r] += lens[i];
  }
  return rows;
}

models::Batch bert_batch(const std::vector<std::vector<std::int64_t>>& prompts, bool packed) {
  const auto n = static_cast<std::int64_t>(prompts.size());
  std::vector<std::int64_t> lens;
  for (const auto& p : prompts) {
    SB_CHECK(!p.empty(), "BERT request with an empty prompt");
    lens.push_back(static_cast<std::int64_t>(p.size()));
  }
  const std::int64_t longest = *std::max_element(lens.begin(), lens.end());
  // Padded: row i is request i. Packed: rows from first-fit decreasing.
  std::vector<std::vector<std::int64_t>> rows;
  if (packed) {
    rows = pack_rows(lens, longest);
  } else {
    for (std::int64_t i = 0; i < n; ++i) rows.push_back({i});
  }
  const auto R = static_cast<std::int64_t>(rows.size());
  auto ids = torch::zeros({R, longest}, torch::kLong);  // 0: [PAD]
  auto keep = torch::zeros({R, longest}, torch::kLong);
  auto pos = torch::zeros({R, longest}, torch::kLong);
  auto seg = torch::zeros({R, longest}, torch::kLong);
  auto cls = torch::zeros({n}, torch::kLong);
  auto a_ids = ids.accessor<std::int64_t, 2>(), a_keep = keep.accessor<std::int64_t, 2>();
  auto a_pos = pos.accessor<std::int64_t, 2>(), a_seg = seg.accessor<std::int64_t, 2>();
  auto a_cls = cls.accessor<std::int64_t, 1>();
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t at = 0, s = 0;
    for (auto i : rows[r]) {
      a_cls[i] = r * longest + at;
      for (std::int64_t t = 0; t < lens[i]; ++t, ++at) {
        a_ids[r][at] = prompts[i][t], a_keep[r][at] = 1, a_pos[r][at] = t, a_seg[r][at] = s;
      }
      ++s;
    }
    // Padding joins the row's last segment: its queries then see real keys (never none),
    // and no real query sees it (attention_mask 0).
    for (; at < longest; ++at) a_seg[r][at] = s - 1;
  }
  models::Batch b;
  b.input_ids = ids;
  b.attention_mask = keep;
  if (packed) b.position_ids = pos, b.segment_ids = seg, b.cls_index = cls;
  return b;
}

BertExecutor::BertExecutor(models::Model& model, RunForward run, PromptOf prompt, std::int64_t rows,
                           bool packed)
    : model_(model), run_(std::move(run)), prompt_(std::move(prompt)), rows_(rows), packed_(packed) {
  SB_CHECK(rows >= 1, "BERT serving needs at least one row, got {}", rows);
  run_([&](models::ParamProvider& p) {  // the device the weights compute on
    auto word = p.acquire(0)[0];
    p.release(0, word);
    device_ = word.device();
    return word;
  });
}

std::vector<std::int64_t> BertExecutor::prefill(std::int64_t, const std::vector<std::int64_t>& requests) {
  std::vector<std::vector<std::int64_t>> prompts;
  for (auto id : requests) prompts.push_back(prompt_(id));
  auto b = bert_batch(prompts, packed_);
  for (auto* t : {&b.input_ids, &b.attention_mask, &b.position_ids, &b.segment_ids, &b.cls_index})
    if (t->defined()) *t = t->to(device_);
  auto logits = run_([&](models::ParamProvider& p) { return model_.classify(p, b); });  // (n, labels)
  auto label = std::get<1>(logits.max(-1)).cpu();
  return {label.data_ptr<std::int64_t>(), label.data_ptr<std::int64_t>() + label.numel()};
}

std::vector<std::int64_t> BertExecutor::decode(const std::vector<std::int64_t>&, const std::vector<std::int64_t>&,
                                               const std::vector<std::int64_t>&) {
  SB_FAIL("serve: a BERT request ends at its prefill (one result); decode was called (a bug)");
}

std::int64_t BertExecutor::prefill_cost(const std::vector<std::int64_t>& prompt_lens) const {
  if (!packed_) return Executor::prefill_cost(prompt_lens);
  const std::int64_t longest = *std::max_element(prompt_lens.begin(), prompt_lens.end());
  return static_cast<std::int64_t>(pack_rows(prompt_lens, longest).size()) * longest;
}

}  // namespace sb::serve
