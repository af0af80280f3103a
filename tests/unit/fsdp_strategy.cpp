// Strategy records (workloads/fsdp/strategy.h): what each shipped strategy says it does, the
// mesh and groups derived from a record, records the engine cannot run refused at
// registration with the reason, the compression policy checked against the record (not the
// strategy's name), and the memory model's activation terms against their documented formula.
#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/fsdp/strategy.h"

namespace {

using sb::comm::CollectiveKind;
using sb::fsdp::CollectiveUse;
using sb::fsdp::Extent;
using sb::fsdp::MeshDim;
using sb::fsdp::Payload;
using sb::fsdp::StepPhase;
using sb::fsdp::StrategyInfo;

// "kind phase over elements payload[, skipped on one rank]", one per collective, in order.
std::vector<std::string> listed(const StrategyInfo& s) {
  std::vector<std::string> out;
  for (const CollectiveUse& c : s.collectives)
    out.push_back(fmt::format("{} {} {} {} {}{}", sb::comm::kind_name(c.kind),
                              sb::fsdp::phase_name(c.phase), sb::fsdp::dim_name(c.over),
                              c.elements == Extent::unit ? "unit" : "shard",
                              c.payload == Payload::params   ? "params"
                              : c.payload == Payload::master ? "master"
                                                             : "grads",
                              c.skipped_on_one_rank ? ", skipped on one rank" : ""));
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(StrategyRecord, ShippedStrategiesSayWhatTheyIssue) {
  using V = std::vector<std::string>;
  EXPECT_EQ(listed(sb::fsdp::strategy_info("no_shard")),
            (V{"grad_all_reduce backward dp unit grads"}));
  EXPECT_EQ(listed(sb::fsdp::strategy_info("zero1")),
            (V{"grad_all_reduce backward dp unit grads",
               "param_all_gather after_optimizer dp_shard unit master"}));
  EXPECT_EQ(listed(sb::fsdp::strategy_info("shard_grad_op")),
            (V{"param_all_gather forward dp_shard unit params",
               "grad_reduce_scatter backward dp_shard unit grads"}));
  EXPECT_EQ(listed(sb::fsdp::strategy_info("full_shard")),
            (V{"param_all_gather forward dp_shard unit params",
               "param_all_gather backward dp_shard unit params",
               "grad_reduce_scatter backward dp_shard unit grads"}));
  EXPECT_EQ(listed(sb::fsdp::strategy_info("hybrid_shard")),
            (V{"param_all_gather forward dp_shard unit params",
               "param_all_gather backward dp_shard unit params",
               "grad_reduce_scatter backward dp_shard unit grads",
               "grad_all_reduce backward dp_replicate shard grads, skipped on one rank"}));
  EXPECT_EQ(sb::fsdp::strategy_names(),
            (V{"full_shard", "hybrid_shard", "no_shard", "shard_grad_op", "zero1"}));
}

TEST(StrategyRecord, MeshAndGroupsComeFromTheRecord) {
  const auto& hybrid = sb::fsdp::strategy_info("hybrid_shard");
  const auto& full = sb::fsdp::strategy_info("full_shard");
  const auto hm = hybrid.mesh(8, 2), fm = full.mesh(8, 2);
  EXPECT_EQ(hm.dp_shard, 2);
  EXPECT_EQ(hm.dp_replicate, 4);
  EXPECT_EQ(hm.size(MeshDim::dp), 8);
  EXPECT_EQ(fm.dp_shard, 8);  // no collective over dp_replicate: the shard group is ignored
  EXPECT_EQ(fm.dp_replicate, 1);
  EXPECT_EQ(hybrid.group(MeshDim::dp_shard), sb::comm::Group::Shard);
  EXPECT_EQ(hybrid.group(MeshDim::dp_replicate), sb::comm::Group::Replica);
  EXPECT_EQ(full.group(MeshDim::dp_shard), sb::comm::Group::World);
  EXPECT_EQ(sb::fsdp::strategy_info("no_shard").group(MeshDim::dp), sb::comm::Group::World);
  EXPECT_EQ(full.shard_factor(fm), 8);
  EXPECT_EQ(sb::fsdp::strategy_info("no_shard").shard_factor(fm), 1);  // nothing sharded
  EXPECT_EQ(sb::fsdp::strategy_info("zero1").shard_factor(fm), 8);     // the optimizer is
  EXPECT_NE(error_of([&] { hybrid.mesh(6, 4); }).find("shard group 4 must be >= 1 and divide "
                                                      "the world size 6"),
            std::string::npos);
}

TEST(StrategyRecord, UnknownAndDuplicateNamesAreRefused) {
  EXPECT_NE(error_of([] { sb::fsdp::strategy_info("zero9"); })
                .find("unknown sharding strategy 'zero9'; known: full_shard, hybrid_shard, "
                      "no_shard, shard_grad_op, zero1"),
            std::string::npos);
  StrategyInfo copy = sb::fsdp::strategy_info("no_shard");
  copy.collectives = {{CollectiveKind::GradAllReduce, StepPhase::backward, MeshDim::dp,
                       Extent::unit, Payload::grads}};
  EXPECT_NE(error_of([&] { sb::fsdp::register_strategy("no_shard", "again", copy); })
                .find("sharding strategy 'no_shard' is registered twice (two files claim the "
                      "name): rename one"),
            std::string::npos);
}

// Records the engine could not run are refused at registration (static init: at start-up),
// each with its reason; nothing is registered.
TEST(StrategyRecord, RecordsTheEngineCannotRunAreRefused) {
  const auto refused = [](const std::string& name, StrategyInfo info) {
    if (!info.make) info.make = sb::fsdp::strategy_info("no_shard").make;
    return error_of([&] { sb::fsdp::register_strategy(name, "test", std::move(info)); });
  };
  const CollectiveUse all_reduce{CollectiveKind::GradAllReduce, StepPhase::backward, MeshDim::dp,
                                 Extent::unit, Payload::grads};
  StrategyInfo s;
  s.collectives = {{CollectiveKind::ParamAllGather, StepPhase::forward, MeshDim::dp_shard,
                    Extent::unit, Payload::params},
                   all_reduce};
  EXPECT_NE(refused("t_forward", s).find("sharding strategy 't_forward' registers a record the "
                                         "engine cannot run: param_all_gather in forward: "
                                         "forward collectives are the engine's"),
            std::string::npos);
  s.collectives = {};
  EXPECT_NE(refused("t_none", s).find("no gradient collective in backward: gradients would "
                                      "never be summed"),
            std::string::npos);
  s.collectives = {all_reduce};
  s.layout.grads_sharded = s.layout.optim_sharded = true;
  EXPECT_NE(refused("t_shard", s).find("grads_sharded, but no grad_reduce_scatter produces the "
                                       "shard"),
            std::string::npos);
  s = StrategyInfo{};
  s.layout.reshard_after_forward = true;
  s.collectives = {all_reduce};
  EXPECT_NE(refused("t_reshard", s).find("reshard_after_forward needs params_sharded"),
            std::string::npos);
  s = StrategyInfo{};
  s.collectives = {all_reduce, {CollectiveKind::ParamAllGather, StepPhase::after_optimizer,
                                MeshDim::dp_shard, Extent::unit, Payload::master}};
  EXPECT_NE(refused("t_after", s).find("param_all_gather in after_optimizer: after the "
                                       "optimizer the engine supports one thing"),
            std::string::npos);  // replicated optimizer: nothing to gather
  s.layout.optim_sharded = true;
  s.make = nullptr;  // a record alone runs its backward collectives (Strategy's default) only
  EXPECT_NE(error_of([&] { sb::fsdp::register_strategy("t_nomake", "test", s); })
                .find("param_all_gather in after_optimizer: no class (StrategyInfo::make) runs "
                      "it"),
            std::string::npos);
  for (const char* n : {"t_forward", "t_none", "t_shard", "t_reshard", "t_after", "t_nomake"})
    EXPECT_EQ(sb::fsdp::find_strategy(n), nullptr) << n;
}

// A custom policy that compresses a collective the strategy's record does not list is
// refused (it would never be used); zero1 runs no reduce-scatter, hybrid_shard runs all three.
TEST(StrategyRecord, CompressionPolicyIsCheckedAgainstTheRecord) {
  const auto diagnostics = [](const std::string& strategy, const char* key) {
    sb::Point p;
    for (const auto& k : sb::registered_keys()) p.set(k.key, k.default_value);
    p.set("task", std::string("train"));
    p.set("world", std::int64_t{4});
    p.set("strategy", strategy);
    p.set("compression", std::string("custom"), sb::SourcePos{"s.toml", 2, 1});
    p.set(key, std::string("int8"), sb::SourcePos{"s.toml", 3, 1});
    std::vector<sb::Diagnostic> d;
    for (const auto& v : sb::registered_validators()) v(p, d);
    std::vector<std::string> out;
    for (const auto& x : d)
      if (x.key.rfind("compress.", 0) == 0) out.push_back(x.key + ": " + x.message);
    return out;
  };
  EXPECT_EQ(diagnostics("zero1", "compress.grad.name"),
            (std::vector<std::string>{
                "compress.grad.name: strategy zero1 runs no grad_reduce_scatter collective, so "
                "compress.grad.name = \"int8\" would never be used; set it to \"none\""}));
  EXPECT_TRUE(diagnostics("zero1", "compress.param.name").empty());  // its after-step gather
  for (const char* k : {"compress.param.name", "compress.grad.name", "compress.allreduce.name"})
    EXPECT_TRUE(diagnostics("hybrid_shard", k).empty()) << k;
  EXPECT_EQ(diagnostics("full_shard", "compress.allreduce.name").size(), 1u);
}

// The activation terms, against docs/METRICS.md "Memory model": gpt2-tiny (d 64, 2 layers, 4
// heads, d_ff 256, vocab 256), 2 rows of 16 tokens, the loss over every position; the terms are
// those of the larger of two moments, forward's end (what the blocks keep, the loss's log-
// softmax) and the last block's backward (what the blocks keep, naive's two score gradients,
// the head weight's gradient); then under activation checkpointing and with attention variants
// that keep less.
TEST(MemoryModel, ActivationTermsFollowTheFormula) {
  sb::fsdp::MemoryInputs in;
  in.model.family = "gpt2";  // causal: the online variant never forms the chunks above the diagonal
  in.model.n_layer = 2, in.model.d_model = 64, in.model.n_head = 4, in.model.d_ff = 256;
  in.model.vocab = 256;
  in.rows = 2, in.seq = 16, in.loss_rows = 32, in.loss_classes = 256;
  const std::uint64_t per_block = 32u * (4 * 64 + 4 * 64 + 2 * 256) * 4, input = 32u * 64 * 4,
                      scores = 2u * 4 * 16 * 16 * 4, head_grad = 256u * 64 * 4;
  // fp32: forward's end 2 blocks + 2 scores + head (32 KiB) < the backward's 2 blocks + 2
  // scores + 2 score gradients + the head's gradient (64 KiB): the backward's terms.
  const auto p = sb::fsdp::predict_memory(in);
  EXPECT_EQ(p.activation_layers, 2 * per_block);
  EXPECT_EQ(p.activation_attention, 4 * scores);
  EXPECT_EQ(p.activation_head, head_grad);
  EXPECT_EQ(p.offload, 0u);
  EXPECT_EQ(p.model_state, 0u);  // no units
  in.param_dtype = torch::kBFloat16;  // everything but the fp32 log-softmax in the compute dtype
  const auto b = sb::fsdp::predict_memory(in);
  EXPECT_EQ(b.activation_layers * 2, p.activation_layers);
  EXPECT_EQ(b.activation_attention * 2, p.activation_attention);
  EXPECT_EQ(b.activation_head * 2, p.activation_head);
  // A wide vocabulary over many rows: forward's end (the log-softmax) is the peak.
  in.param_dtype = torch::kFloat32;
  in.loss_rows = 4096;
  const auto w = sb::fsdp::predict_memory(in);
  EXPECT_EQ(w.activation_attention, 2 * scores);
  EXPECT_EQ(w.activation_head, 4096u * 256 * 4);
  in.loss_rows = 32;

  using sb::models::CheckpointMode;
  // Full, every block: the last block's backward is the peak: both inputs, that block's
  // activations and scores again, its two score gradients and the head weight's gradient.
  in.checkpoint = {CheckpointMode::Full, 1};
  auto c = sb::fsdp::predict_memory(in);
  EXPECT_EQ(c.activation_layers, 2 * input + per_block);
  EXPECT_EQ(c.activation_attention, 3 * scores);
  EXPECT_EQ(c.activation_head, head_grad);
  in.checkpoint = {CheckpointMode::Full, 2};  // block 0 recomputed, block 1 kept
  c = sb::fsdp::predict_memory(in);
  EXPECT_EQ(c.activation_layers, per_block + input + per_block);
  EXPECT_EQ(c.activation_attention, scores + scores + 2 * scores);
  EXPECT_EQ(c.activation_head, head_grad);
  // Selective: no block keeps its scores; at the last block's backward its scores, their two
  // gradients and the head's gradient (3 scores + 64 KiB) exceed the loss's 32 KiB at
  // forward's end.
  in.checkpoint = {CheckpointMode::Selective, 1};
  c = sb::fsdp::predict_memory(in);
  EXPECT_EQ(c.activation_layers, 2 * per_block);
  EXPECT_EQ(c.activation_attention, 3 * scores);
  EXPECT_EQ(c.activation_head, head_grad);
  in.checkpoint = {};
  in.model.attention = "sdpa";  // the flash kernel keeps a row log-sum-exp only
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_attention, 0u);
  in.model.attention = "online";  // causal: half the key chunks
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_attention, scores);
  // What the variants keep of q, k, v and the output (Attention::kept_inputs) plus the output
  // projection's input: sdpa's output is that input (4 a, as naive), fpdt with its chunks on
  // disk q and the output (3 a), and then its chunk files on disk: both blocks' k and v, 16
  // tokens in 2 chunks of 8 (seq_chunks 2), each padded to 4096 bytes at most.
  const std::uint64_t a = 32u * 64 * 4;  // one attention-width tensor of the 32 tokens
  in.model.attention = "sdpa";
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_layers, 2 * per_block);
  in.model.attention = "fpdt", in.model.seq_chunks = 2, in.model.kv_offload = "disk";
  const auto f = sb::fsdp::predict_memory(in);
  EXPECT_EQ(f.activation_layers, 2 * (per_block - a));
  // No kept scores; at a block's backward one (8, 8) tile a row and head (fpdt's tile_bytes:
  // 16 bytes a score in fp32), which makes the backward the larger moment.
  EXPECT_EQ(f.activation_attention, 2u * 4 * 8 * 8 * 16);
  EXPECT_EQ(f.disk_kv, 2 * (2 * a + 2 * 4096));
  in.checkpoint = {CheckpointMode::Full, 1};  // the first forward stores nothing: one block's
  EXPECT_EQ(sb::fsdp::predict_memory(in).disk_kv, 2 * a + 2 * 4096);
  in.checkpoint = {};
  in.model.kv_offload = "none";
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_layers, 2 * (per_block + a));
  EXPECT_EQ(sb::fsdp::predict_memory(in).disk_kv, 0u);
  in.model.attention = "online", in.model.seq_chunks = 0;
  // The chunked loss (models/loss.cpp), 10-row chunks of the 32: x's gradient, the fp32 sum
  // of w's, and at a chunk's weight-gradient GEMM its logits and one block of the product
  // (all 256 vocabulary rows here), in fp32 each once.
  in.loss_chunk_rows = 10;
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_head,
            32u * 64 * 4 + 256u * 64 * 4 + 10u * 256 * 4 + 256u * 64 * 4);
  // In bf16: the chunk's logits in fp32 and their bf16 gradient (6 bytes each), the product
  // block in bf16 and its fp32 copy (6 bytes); x's gradient in bf16, the sum in fp32.
  in.param_dtype = torch::kBFloat16;
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_head,
            32u * 64 * 2 + 256u * 64 * 4 + 10u * 256 * 6 + 256u * 64 * 6);
  // One chunk (the rows fit it): no fp32 sum; the GEMM's whole product in bf16.
  in.loss_chunk_rows = 64;
  EXPECT_EQ(sb::fsdp::predict_memory(in).activation_head, 32u * 64 * 2 + 32u * 256 * 6 + 256u * 64 * 2);
}

// FPDT's chunked blocks (activation_checkpoint = "chunked", docs/METRICS.md "Memory model"):
// gpt2-tiny's shapes, sdpa, 2 rows of 16 tokens in 2 chunks of 8, fp32. In memory every block
// keeps its input and its keys and values; on disk none, so the top block's backward (its
// pipeline and one chunk's recomputed block) is the same whatever the depth, and the files
// hold every block's k, v and input, each chunk's padded to 4096 bytes.
TEST(MemoryModel, ChunkedBlocksFollowTheFormula) {
  sb::fsdp::MemoryInputs in;
  in.model.family = "gpt2";
  in.model.n_layer = 2, in.model.d_model = 64, in.model.n_head = 4, in.model.d_ff = 256;
  in.model.vocab = 256, in.model.attention = "sdpa", in.model.seq_chunks = 2;
  in.rows = 2, in.seq = 16, in.loss_rows = 32, in.loss_classes = 256;
  in.checkpoint = {sb::models::CheckpointMode::Chunked, 1};
  const std::uint64_t tokens = 32, input = tokens * 64 * 4, kv = tokens * 128 * 4;
  const std::uint64_t chunk_block = 16u * (4 * 64 + 4 * 64 + 2 * 256) * 4;  // one chunk's recomputed block
  // In memory: 2 blocks' inputs and k, v kept; at the top block's backward its k and v joined
  // again, the leaves' gradients and their fp32 sums (three k/v-sized tensors in fp32) and the
  // input's gradient.
  in.model.kv_offload = "none";
  auto m = sb::fsdp::predict_memory(in);
  EXPECT_EQ(m.activation_layers, 2 * (input + kv) + kv * 3 + input + chunk_block);
  EXPECT_EQ(m.activation_attention, 0u);  // sdpa keeps no scores
  EXPECT_EQ(m.disk_kv, 0u);
  in.model.kv_offload = "disk";
  m = sb::fsdp::predict_memory(in);
  EXPECT_EQ(m.activation_layers, kv * 4 + input + chunk_block);  // the keys and values brought back too
  EXPECT_EQ(m.disk_kv, 2 * (kv + input + 2 * 2 * 4096));
  in.model.n_layer = 4;
  const auto deeper = sb::fsdp::predict_memory(in);
  EXPECT_EQ(deeper.activation_layers, m.activation_layers);
  EXPECT_EQ(deeper.disk_kv, 2 * m.disk_kv);
}

// Inside Ulysses (sp 2) a rank holds 8 of the 16 tokens, in 2 stripes of 4: per local token
// the same kept bytes (its keys and values are 2x the tokens at half the heads), one stripe's
// recomputed block, and a chunk's scores over the 8 queries the all-to-all gathers for half
// of the heads: half of sp 1's at the same chunk of 8.
TEST(MemoryModel, ChunkedBlocksInsideUlyssesCountAStripe) {
  sb::fsdp::MemoryInputs in;
  in.model.family = "gpt2";
  in.model.n_layer = 2, in.model.d_model = 64, in.model.n_head = 4, in.model.d_ff = 256;
  in.model.vocab = 256, in.model.attention = "sdpa", in.model.seq_chunks = 2, in.model.kv_offload = "none";
  in.rows = 2, in.seq = 16, in.loss_rows = 16, in.loss_classes = 256, in.sp = 2;
  in.checkpoint = {sb::models::CheckpointMode::Chunked, 1};
  const std::uint64_t tokens = 16, input = tokens * 64 * 4, kv = tokens * 128 * 4;
  const std::uint64_t stripe_block = 8u * (4 * 64 + 4 * 64 + 2 * 256) * 4;  // 2 rows x a stripe of 4
  auto m = sb::fsdp::predict_memory(in);
  EXPECT_EQ(m.activation_layers, 2 * (input + kv) + kv * 3 + input + stripe_block);
  in.model.kv_offload = "disk";
  m = sb::fsdp::predict_memory(in);
  EXPECT_EQ(m.disk_kv, 2 * (kv + input + 2 * 2 * 4096));
  in.model.attention = "naive", in.model.kv_offload = "none";
  const auto sp2 = sb::fsdp::predict_memory(in);
  in.sp = 1, in.model.seq_chunks = 2, in.loss_rows = 32;
  const auto sp1 = sb::fsdp::predict_memory(in);
  ASSERT_GT(sp2.activation_attention, 0u);
  EXPECT_EQ(2 * sp2.activation_attention, sp1.activation_attention);
}

// At the top block's backward the last step's gradients are dropped and this step's not yet
// formed (Engine::drop_grads): when that moment is the peak, grad_unformed is the whole
// reduce-dtype gradient and the peak is the terms' sum less it; at forward's end it is 0.
// The prediction names its moment.
TEST(MemoryModel, GradientsAreNotAliveAtTheTopBlocksBackward) {
  sb::fsdp::MemoryInputs in;
  in.model.family = "gpt2";
  in.model.n_layer = 2, in.model.d_model = 64, in.model.n_head = 4, in.model.d_ff = 256;
  in.model.vocab = 256;
  in.rows = 2, in.seq = 16, in.loss_rows = 32, in.loss_classes = 256;
  sb::models::UnitSpec u;
  u.name = "w";
  u.params.push_back({"w", {1000}});
  in.units = {u};  // no_shard on one rank, fp32: 4000 bytes of gradient
  const auto p = sb::fsdp::predict_memory(in);  // naive's score gradients: the backward wins
  EXPECT_EQ(p.grad, 4000u);
  EXPECT_EQ(p.grad_unformed, 4000u);
  EXPECT_EQ(p.peak(), p.param + p.grad + p.optim + p.compression + p.gathered + p.activation_layers +
                          p.activation_attention + p.activation_head + p.offload - 4000u);
  EXPECT_STREQ(p.moment, "top block's backward");
  in.loss_rows = 4096;  // the loss's log-softmax: forward's end wins, every gradient alive
  EXPECT_EQ(sb::fsdp::predict_memory(in).grad_unformed, 0u);
  EXPECT_STREQ(sb::fsdp::predict_memory(in).moment, "forward's end");
  in.rows = 0;  // no activations: no moment
  EXPECT_STREQ(sb::fsdp::predict_memory(in).moment, "");
}

// The third moment: the first unit's backward (the embeddings', the last to run) holds its
// gradient parts and their join (2 x its compute-dtype bytes) and the tied head weight's
// gradient; no activation; of this step's gradients only its own is not formed. It wins when a
// large first unit meets short sequences, and is not taken for a pipeline.
TEST(MemoryModel, TheFirstUnitsBackwardIsAMoment) {
  sb::fsdp::MemoryInputs in;
  in.model.family = "gpt2";
  in.model.n_layer = 2, in.model.d_model = 64, in.model.n_head = 4, in.model.d_ff = 256;
  in.model.vocab = 256;
  in.rows = 1, in.seq = 8, in.loss_rows = 8, in.loss_classes = 256;
  sb::models::UnitSpec emb, blk;
  emb.name = "embeddings";
  emb.params.push_back({"wte", {256, 64}});
  emb.params.push_back({"wpe", {4096, 64}});  // long learned positions: a large first unit
  blk.name = "block.0";
  blk.params.push_back({"w", {1000}});
  in.units = {emb, blk};  // no_shard on one rank, fp32
  const auto p = sb::fsdp::predict_memory(in);
  const std::uint64_t unit0 = (256 + 4096) * 64 * 4, head = 256u * 64 * 4;
  EXPECT_STREQ(p.moment, "first unit's backward");
  EXPECT_EQ(p.first_unit_grad, 2 * unit0 + head);
  EXPECT_EQ(p.activation_layers + p.activation_attention + p.activation_head, 0u);
  EXPECT_EQ(p.grad_unformed, unit0);  // fp32 reduce dtype, not sharded: the unit's own gradient
  EXPECT_EQ(p.peak(), p.param + p.grad + p.optim + p.compression + p.gathered + 2 * unit0 + head - unit0);
  in.seq = 2048, in.loss_rows = 2048;  // long sequences: the activations win again
  const auto q = sb::fsdp::predict_memory(in);
  EXPECT_STRNE(q.moment, "first unit's backward");
  EXPECT_EQ(q.first_unit_grad, 0u);
  in.seq = 8, in.loss_rows = 8;
  in.pp = 2;  // a pipeline: not modelled
  EXPECT_EQ(sb::fsdp::predict_memory(in).first_unit_grad, 0u);
}

}  // namespace
