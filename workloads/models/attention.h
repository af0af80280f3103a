// Scaled dot-product attention variants behind one small interface, chosen by name
// ("naive", "chunked", "online"); GPT-2 and BERT call them, so a variant can be swapped
// (and benchmarked) without touching model code.
#pragma once
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/models/dropout.h"

namespace sb::models {

// How a variant is made: the model's attention_chunk and, for the variants that stream a
// sequence in chunks (Attention::streams_chunks, FPDT), how many chunks and where the keys and
// values of earlier chunks wait for backward.
struct AttentionOptions {
  std::int64_t chunk = 128;       // queries (and keys) per chunk: chunked, online, fpdt
  std::int64_t seq_chunks = 0;    // fpdt: split Tk into this many chunks instead (0: chunk)
  std::string kv_offload = "none";  // fpdt: none (memory), host (CPU memory), disk (a file)
  std::string offload_dir;        // kv_offload = disk: the folder of the file
};

// What the K/V chunk stores of this process moved (kv_offload = host or disk), cumulative.
struct KvOffloadStats {
  std::uint64_t written_bytes = 0, read_bytes = 0;
  double write_s = 0, read_s = 0;  // inside pwrite / pread (I/O threads)
  double wait_s = 0;               // the compute thread waiting for a read or write
  std::int64_t live_stores = 0;    // KvStores that exist now (each frees its chunks when it goes)
};
KvOffloadStats kv_offload_stats();  // kv_store.cpp

struct AttentionMask {
  // Causal: query i (absolute position q_offset + i) sees keys 0 .. q_offset + i.
  bool causal = false;
  std::int64_t q_offset = 0;  // tokens already in a KV cache before these queries
  torch::Tensor key_keep;     // (B, Tk) bool, true = real key; undefined = all real
  // Packed sequences (self-attention, Tq == Tk): (B, T) int64; a query sees only keys of
  // its own segment, so several requests share a row without seeing each other (block-
  // diagonal attention). Undefined = one segment per row.
  torch::Tensor segment_ids;
  // Dropout on the probabilities (training; dropout.h), applied by the variants whose record
  // says drops_probabilities(); off by default.
  AttentionDropout dropout;
};

class Attention {
 public:
  virtual ~Attention() = default;
  virtual std::string name() const = 0;
  // Whether it forms the probabilities and so can drop them (mask.dropout): naive, chunked.
  virtual bool drops_probabilities() const { return false; }
  // What its forward keeps for backward of (B, H, Tq, Tk) size, in units of one such tensor
  // in the compute dtype (the memory model's attention term, docs/METRICS.md): naive and
  // chunked keep the probabilities (1); online each key chunk's exponentials, the causal
  // chunks above the diagonal never formed (1, 0.5 causal); sdpa's flash kernel only a row
  // log-sum-exp (0).
  virtual double kept_scores(bool causal) const { return 1.0; }
  // The share of the (Tq, Tk) score and value products it computes (the executed FLOPs of
  // MFU's "as executed" count, docs/METRICS.md): naive 1 (the full square, masked after);
  // chunked, online and sdpa about 0.5 causal (key chunks or blocks above the diagonal are
  // skipped: LibTorch's CPU flash kernel and ours; the diagonal's are computed whole), 1 not.
  virtual double executed_scores(bool causal) const { return 1.0; }
  // How many (B, H, Tq, Tk)-sized gradients its backward forms at once, in the same units:
  // naive 2 (the probabilities' and the scores'); the others work in tiles (0).
  virtual double backward_scores() const { return 0.0; }
  // Bytes per (row, head) that its backward holds at once for one (query chunk, key chunk)
  // tile of a `seq`-token sequence in a dtype of `elt` bytes (the memory model adds it at a
  // block's backward): fpdt's (its chunks are seq / seq_chunks tokens, its tiles hundreds of
  // MiB at long sequences); 0 for the others (naive's whole scores are backward_scores; the
  // chunked and online variants' 128 x 128 tiles are small).
  virtual double tile_bytes(std::int64_t seq, std::int64_t elt) const { return 0.0; }
  // Whether it streams the sequence in chunks with the keys and values kept for backward in a
  // chunk store (seq_chunks, kv_offload; FPDT): the other variants refuse those options.
  virtual bool streams_chunks() const { return false; }
  // How many (B, H, T, Dh) tensors of q, k, v and its output its forward leaves in memory
  // for backward besides the output projection's input, which the memory model counts
  // anyway (its activation term): q, k and v (3) for the variants built of LibTorch ops, and
  // for sdpa, whose kept output is that input itself (its kernels write the output
  // (B, T, H, Dh)-contiguous, so merging the heads is a view; measured: one (T, A) tensor a
  // block, docs/METRICS.md "Memory model"); fpdt keeps its output beside the merged copy
  // (4), or q and the output (2) when the keys and values wait in a chunk store.
  virtual double kept_inputs() const { return 3.0; }
  // q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh) -> (B, H, Tq, Dh). Scale 1/sqrt(Dh).
  // Every query row must see at least one key (true for causal and for BERT padding,
  // where [CLS] is always real); a row with none would be 0/0.
  virtual torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const AttentionMask& mask) const = 0;
};

// m with layer `layer`'s dropout of the probabilities (d keyed by that layer's site); m itself
// when d is off.
inline AttentionMask with_dropout(AttentionMask m, const AttentionDropout& d, std::int64_t layer) {
  if (d.on()) m.dropout = d, m.dropout.site = probs_site(layer);
  return m;
}

// chunk: queries per chunk (chunked, online) and keys per chunk (online); ignored by naive.
std::unique_ptr<Attention> make_attention(const std::string& name, std::int64_t chunk);
std::unique_ptr<Attention> make_attention(const std::string& name, const AttentionOptions& opts);
std::vector<std::pair<std::string, std::string>> attention_variants();  // name, doc; by order

// Shared by the variants: (Tq, Tk) or (B, 1, Tq, Tk)-broadcastable bool "may attend" mask
// for queries [q_begin, q_begin + nq) and keys [k_begin, k_begin + nk); undefined = all.
torch::Tensor attention_keep_mask(const AttentionMask& mask, std::int64_t q_begin,
                                  std::int64_t nq, std::int64_t k_begin, std::int64_t nk,
                                  const torch::Device& device);

// Each variant registers itself in its own file (attention_<name>.cpp), also into the
// "attention" name set the `attention` key is checked against. `order` places it in lists and
// messages: the reference (naive, 0) first, then by how far it departs from it.
using AttentionFactory = std::unique_ptr<Attention> (*)(const AttentionOptions& opts);
void register_attention(const std::string& name, const std::string& doc, AttentionFactory make,
                        int order);

// The variants that work on query chunks (chunked, online): run(s, n) computes the output
// (B, H, n, Dh) of queries [s, s + n); the chunks' outputs are joined along the query axis.
torch::Tensor by_query_chunks(std::int64_t tq, std::int64_t chunk,
                              const std::function<torch::Tensor(std::int64_t, std::int64_t)>& run);
// attention_chunk, checked (> 0) once where a chunked variant is made.
std::int64_t checked_attention_chunk(std::int64_t chunk);
// Registers variant A, constructed from the model's attention_chunk.
template <class A>
void register_chunked_attention(const std::string& name, const std::string& doc, int order) {
  register_attention(name, doc, [](const AttentionOptions& o) -> std::unique_ptr<Attention> {
    return std::make_unique<A>(checked_attention_chunk(o.chunk));
  }, order);
}

}  // namespace sb::models
