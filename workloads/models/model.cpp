// Presets, the model registry and the defaults of the shared model interface.
#include "workloads/models/model.h"

#include "workloads/models/loss.h"

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::models {

torch::Tensor Batch::positions() const {
  const std::int64_t T = input_ids.size(1);
  const auto opt = input_ids.options().dtype(torch::kLong);
  if (seq_stripe <= 0 || seq_stripe >= T) return torch::arange(seq_begin, seq_begin + T, opt);
  SB_CHECK(T % seq_stripe == 0 && row_tokens() % T == 0, "batch: {} columns are not stripes of {} of rows of {}",
           T, seq_stripe, row_tokens());
  const auto j = torch::arange(T, opt);
  return seq_begin + j.div(seq_stripe, "floor") * (seq_stripe * (row_tokens() / T)) + j.remainder(seq_stripe);
}

namespace {

ModelConfig config(const char* family, double ln_eps, const std::string& preset,
                   std::int64_t vocab, std::int64_t ctx, std::int64_t d, std::int64_t layers,
                   std::int64_t heads) {
  ModelConfig c;
  c.family = family;
  c.preset = preset;
  c.vocab = vocab, c.max_pos = ctx, c.d_model = d, c.n_layer = layers, c.n_head = heads;
  c.d_ff = 4 * d;
  c.ln_eps = ln_eps;
  return c;
}
// The published configurations' layer-norm epsilons: GPT-2 1e-5, BERT 1e-12.
template <class... A>
ModelConfig gpt2(A... a) { return config("gpt2", 1e-5, a...); }
template <class... A>
ModelConfig bert(A... a) { return config("bert", 1e-12, a...); }
// GPT-2 with `experts` experts in every `every`-th block's MLP (moe.h; top-1 by default).
ModelConfig gpt2_moe(const std::string& preset, std::int64_t vocab, std::int64_t ctx, std::int64_t d,
                     std::int64_t layers, std::int64_t heads, std::int64_t experts, std::int64_t every) {
  ModelConfig c = config("gpt2-moe", 1e-5, preset, vocab, ctx, d, layers, heads);
  c.moe.experts = experts, c.moe.every = every;
  return c;
}

struct Preset {
  ModelConfig cfg;
  std::string doc;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {gpt2("gpt2-tiny", 256, 128, 64, 2, 4), "GPT-2 for tests: vocab 256, d 64, 2 layers, 4 heads, ctx 128"},
      {gpt2("gpt2-tiny-8l", 256, 128, 64, 8, 8), "GPT-2 for pipeline and 3D tests: gpt2-tiny with 8 layers, 8 heads"},
      {gpt2("gpt2", 50257, 1024, 768, 12, 12), "GPT-2 124M: d 768, 12 layers, 12 heads"},
      {gpt2("gpt2-medium", 50257, 1024, 1024, 24, 16), "GPT-2 355M: d 1024, 24 layers, 16 heads"},
      {gpt2("gpt2-large", 50257, 1024, 1280, 36, 20), "GPT-2 774M: d 1280, 36 layers, 20 heads"},
      {gpt2("gpt2-xl", 50257, 1024, 1600, 48, 25), "GPT-2 1.5B: d 1600, 48 layers, 25 heads"},
      {bert("bert-tiny", 128, 128, 64, 2, 4), "BERT for tests: vocab 128, d 64, 2 layers, 4 heads, 128 positions"},
      {bert("bert-tiny-8l", 128, 128, 64, 8, 8), "BERT for pipeline and 3D tests: bert-tiny with 8 layers, 8 heads"},
      {bert("bert-base", 30522, 512, 768, 12, 12), "BERT-Base 110M: d 768, 12 layers, 12 heads"},
      {bert("bert-large", 30522, 512, 1024, 24, 16), "BERT-Large 340M: d 1024, 24 layers, 16 heads"},
      // Distillation students (docs/DISTILLATION.md): a teacher's widths, half its layers.
      {gpt2("gpt2-6l", 50257, 1024, 768, 6, 12), "GPT-2 124M's widths, 6 layers (DistilGPT2's depth): a student"},
      {bert("bert-tiny-1l", 128, 128, 64, 1, 4), "bert-tiny with 1 layer: a student for tests"},
      {bert("bert-base-6l", 30522, 512, 768, 6, 12), "BERT-Base's widths, 6 layers (DistilBERT's depth): a student"},
      // Long context (the Longctx issue): GPT-2's own 1024 positions cannot reach 16k tokens.
      {gpt2("gpt2-long", 50257, 32768, 768, 12, 12),
       "GPT-2 124M's shapes with learned positions for 32,768 tokens (long-context training; wpe seeded)"},
      // The Codesign issue's misshaped model: GPT-2 124M's depth with widths that do not tile.
      {gpt2("gpt2-d1000", 50257, 1024, 1000, 12, 10),
       "GPT-2 with d 1000 and 10 heads of 100 (the Codesign issue's misshaped model; shardbench shapes)"},
      // Mixture of experts (the MoE issue; moe.h): Switch's layout, experts in every other block.
      {gpt2_moe("gpt2-moe-tiny", 256, 128, 64, 4, 4, 4, 2),
       "GPT-2 MoE for tests: gpt2-tiny's widths, 4 layers, 4 experts in blocks 1 and 3"},
      {gpt2_moe("gpt2-moe-8x8", 50257, 1024, 256, 8, 8, 8, 2),
       "GPT-2 MoE: d 256, 8 layers, 8 heads, 8 experts in every other block (the MoE issue's model)"},
  };
  return p;
}

// A folder is checked at plan time in folder_check.cpp.
const sb::Registrar kRegisterNames([] {
  for (const auto& p : presets()) sb::register_name("model", p.cfg.preset, p.doc);
});

}  // namespace

std::int64_t ParamSpec::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::int64_t UnitSpec::numel() const {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

torch::Tensor ParamProvider::linear(int unit, int w_index, const torch::Tensor& x,
                                    const torch::Tensor& w, const torch::Tensor& b) {
  return at::linear(x, w, b);
}

torch::Tensor ParamProvider::linear_gelu(int unit, int w_index, const torch::Tensor& x,
                                         const torch::Tensor& w, const torch::Tensor& b,
                                         c10::string_view approximate) {
  return at::gelu(linear(unit, w_index, x, w, b), approximate);
}

torch::Tensor ParamProvider::linear_cross_entropy(int unit, int w_index, const torch::Tensor& x,
                                                  const torch::Tensor& w, const torch::Tensor& targets) {
  return cross_entropy(linear(unit, w_index, x, w, torch::Tensor()), targets);
}

torch::Tensor Model::classify(ParamProvider& p, const Batch& b) {
  SB_FAIL("model '{}' ({}) has no classification head; use a bert-* preset",
          config().preset, config().family);
}

std::string Model::tensor_parallel_problem(int size) const {
  if (size <= 1) return "";
  return fmt::format("model '{}' ({}) has no tensor-parallel layout; set mesh.tp = 1, or train a "
                     "family that has one (gpt2)", config().preset, config().family);
}

void Model::set_tensor_parallel(TensorParallel tp) {
  const std::string why = tensor_parallel_problem(tp.size);
  SB_CHECK(why.empty(), "{}", why);
}

std::string Model::sequence_parallel_problem(int size, std::int64_t, int) const {
  if (size <= 1) return "";
  return fmt::format("model '{}' ({}) has no sequence-parallel attention; set mesh.sp = 1, or "
                     "train a family that has one (gpt2)", config().preset, config().family);
}

void Model::set_sequence_parallel(SequenceParallel sp) {
  const std::string why = sequence_parallel_problem(sp.size, 0);
  SB_CHECK(why.empty(), "{}", why);
}

std::string Model::expert_parallel_problem(int size) const {
  return models::expert_parallel_problem(config().moe, size);
}

void Model::set_expert_parallel(ExpertParallel ep) {
  const std::string why = expert_parallel_problem(ep.size);
  SB_CHECK(why.empty(), "{}", why);
}

ParamSpec ep_split(ParamSpec s, int rank, int size) {
  if (size <= 1) return s;
  SB_CHECK(!s.shape.empty() && s.shape[0] % size == 0, "{}: {} experts do not split over mesh.ep = {}",
           s.name, s.shape.empty() ? 0 : s.shape[0], size);
  s.shape[0] /= size;
  s.ep_rank = rank, s.ep_size = size;
  return s;
}

torch::Tensor ep_slice(const ParamSpec& s, const torch::Tensor& whole) {
  if (s.ep_size <= 1) return whole;
  SB_CHECK(whole.dim() >= 1 && whole.size(0) == s.shape[0] * s.ep_size, "{}: a whole tensor of {} "
           "experts to split over ep = {}, the spec holds {} a rank", s.name, whole.dim() ? whole.size(0) : 0,
           s.ep_size, s.shape[0]);
  return whole.narrow(0, s.ep_rank * s.shape[0], s.shape[0]).contiguous();
}

std::string Model::pipeline_problem(int stages) const {
  if (stages <= 1) return "";
  return fmt::format("model '{}' ({}) cannot be cut into pipeline stages; set mesh.pp = 1",
                     config().preset, config().family);
}

void Model::set_activation_checkpoint(const CheckpointConfig& c) {
  SB_CHECK(c.mode == CheckpointMode::None, "model '{}' cannot recompute its activations "
           "(activation_checkpoint): use activation_checkpoint = \"none\"", config().preset);
}

void Model::set_dropout(const DropoutConfig& d) {
  SB_CHECK(d.hidden <= 0 && d.attention <= 0, "model '{}' ({}) has no dropout; set dropout = 0 "
           "and attention_dropout = 0", config().preset, config().family);
}

void Model::set_pipeline(int pp, int v, int, const std::vector<std::int64_t>&) {
  const std::string why = pipeline_problem(pp * v);
  SB_CHECK(why.empty(), "{}", why);
}

const PipelineCut& Model::pipeline() const {
  static const PipelineCut whole;
  return whole;
}

torch::Tensor Model::stage_forward(ParamProvider&, int, const Batch&, const torch::Tensor&) {
  SB_FAIL("model '{}' ({}) is not cut into pipeline stages", config().preset, config().family);
}

std::vector<std::int64_t> Model::stage_activation_shape(const Batch&) const {
  SB_FAIL("model '{}' ({}) is not cut into pipeline stages", config().preset, config().family);
}

TrainFlops forward_flops(const TrainFlops& step) {
  TrainFlops f = step;
  f.matmul /= 3, f.vector /= 3, f.attention /= 3, f.attention_executed /= 3;  // 2 of the 6 FLOPs per weight and row; 4 of 12 for attention
  return f;
}

TrainFlops unit_flops_per_row(const UnitSpec& u) {
  TrainFlops f;
  for (const auto& p : u.params) (p.shape.size() >= 2 ? f.matmul : f.vector) += 6.0 * static_cast<double>(p.numel());
  return f;
}

std::int64_t target_count(const Batch& b) {
  return b.targets.defined() ? (b.targets != -100).sum().item<std::int64_t>() : 0;
}

std::int64_t count_params(const std::vector<UnitSpec>& units) {
  std::int64_t n = 0;
  for (const auto& u : units) n += u.numel();
  return n;
}

std::int64_t active_params(const ModelConfig& c, const std::vector<UnitSpec>& units) {
  std::int64_t n = count_params(units);
  if (!c.moe.on()) return n;
  for (const auto& u : units)
    for (const auto& p : u.params)
      if (p.name.find(".moe.experts.") != std::string::npos)
        n -= p.numel() / c.moe.experts * (c.moe.experts - c.moe.top_k);
  return n;
}

std::int64_t count_backbone_params(const std::vector<UnitSpec>& units) {
  std::int64_t n = 0;
  for (const auto& u : units)
    for (const auto& p : u.params)
      if (!is_task_head(p.name)) n += p.numel();
  return n;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.cfg.preset);
  return names;
}

ModelConfig preset_config(const std::string& preset) {
  if (is_model_path(preset)) return hf_folder_config(preset);
  for (const auto& p : presets())
    if (p.cfg.preset == preset) return p.cfg;
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  SB_FAIL("unknown model preset '{}'; known: {}", preset, known);
}

std::string seq_problem(const std::string& preset, std::int64_t seq) {
  ModelConfig m;
  try {
    m = preset_config(preset);
  } catch (const sb::Error&) {
    return "";  // an unknown model is reported by the name check
  }
  if (seq <= m.max_pos) return "";
  return fmt::format("seq {} exceeds model {}'s {} positions; use seq <= {} or a model with more "
                     "positions (`shardbench models`)", seq, m.preset, m.max_pos, m.max_pos);
}

bool is_task_head(const std::string& name) {
  // distill.*: a distillation student's projection (distill/projected.h), trained with it.
  return name.rfind("cls.", 0) == 0 || name.rfind("classifier.", 0) == 0 || name.rfind("distill.", 0) == 0;
}

bool is_embedding_table(const std::string& name) {
  return name.find("embeddings.") != std::string::npos || name.rfind("wte.", 0) == 0 ||
         name.rfind("wpe.", 0) == 0;
}

std::unique_ptr<Model> make_model(const ModelConfig& c) { return family(c.family).make(c); }

std::unique_ptr<Model> make_model(const std::string& preset, const std::string& attention) {
  ModelConfig c = preset_config(preset);
  c.attention = attention;
  return family(c.family).make(c);  // an unknown family is an error, never a silent BERT
}

}  // namespace sb::models
