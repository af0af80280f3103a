// The serve task's model for BERT requests: each request is a text to classify; its one
// result (the predicted label, recorded as its only output token) comes at the end of its
// prefill, so a request never decodes and holds no KV cache.
//
// Two ways to batch prompts of different lengths:
// - padded: one row per request, padded to the longest prompt (what a static batcher does);
// - packed: prompts placed end to end in rows of the longest prompt's length (first-fit
//   decreasing), each with its own positions 0.. and an attention mask that keeps it apart
//   from its row's other prompts (block-diagonal; models::AttentionMask::segment_ids), so a
//   short prompt no longer costs a long one's row. A packed row never exceeds the padded row's
//   length, so attention (quadratic in the row) costs no more than with padding.
// Tests: tests/unit/serve_bert.cpp (both equal each request classified alone).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/serve/forward.h"
#include "workloads/serve/server.h"

namespace sb::serve {

// First-fit decreasing: item indices per row, rows of at most `cap` tokens (every length <=
// cap). Rows come out in order of their first (longest) item; within a row, by length
// descending, ties by index.
std::vector<std::vector<std::int64_t>> pack_rows(const std::vector<std::int64_t>& lens, std::int64_t cap);

// The batch (input_ids, attention_mask, and for packed rows position_ids, segment_ids and
// cls_index, in request order) for these prompts.
models::Batch bert_batch(const std::vector<std::vector<std::int64_t>>& prompts, bool packed);

class BertExecutor final : public Executor {
 public:
  // rows: the most requests at once (there is no cache: rows only bound the batch).
  BertExecutor(models::Model& model, RunForward run, PromptOf prompt, std::int64_t rows, bool packed);
  std::int64_t rows() const override { return rows_; }
  std::int64_t row_capacity() const override { return model_.config().max_pos; }
  std::int64_t kv_bytes_per_token() const override { return 0; }
  std::vector<std::int64_t> prefill(std::int64_t first, const std::vector<std::int64_t>& requests) override;
  std::vector<std::int64_t> decode(const std::vector<std::int64_t>& requests,
                                   const std::vector<std::int64_t>& last,
                                   const std::vector<std::int64_t>& lengths) override;
  void move_row(std::int64_t, std::int64_t, std::int64_t) override {}  // no per-row state
  std::int64_t prefill_cost(const std::vector<std::int64_t>& prompt_lens) const override;
  bool packed() const { return packed_; }
  std::string prefill_batching() const override { return packed_ ? "packed" : "padded"; }

 private:
  models::Model& model_;
  RunForward run_;
  PromptOf prompt_;
  std::int64_t rows_;
  bool packed_;
  torch::Device device_ = torch::kCPU;
};

}  // namespace sb::serve
