// Pipeline parallelism as a model sees it (the Parallel3d issue; docs/FSDP.md "Pipeline
// parallelism in the models"). The model is cut into pp x v stages by layer ranges: stage s
// holds layers [first_layer[s], first_layer[s+1]), the first stage also the embeddings, the
// last the head. Rank r of the pp group runs its v virtual stages s = chunk x pp + r (v = 1
// unless the schedule interleaves). A model cut this way holds only its stages' units and runs
// one stage at a time (Model::stage_forward); the runner (workloads/parallel/pp_runner.h) moves
// the activations between ranks, so models/ keeps no communicator.
//
// Tied weights: a head that reuses the embedding unit (GPT-2's LM head is wte, BERT's MLM
// decoder the word embeddings) holds on the last stage a copy of the whole embedding unit, with
// the same layout, so the two copies shard, reduce and update alike; the engine sums their
// gradients between the first and last stages each step (Megatron's embedding all-reduce), so
// they stay bit-equal (UnitSpec::pp_copy).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::models {

struct UnitSpec;
class ParamProvider;

struct PipelineCut {
  int pp = 1, v = 1, rank = 0;
  std::vector<std::int64_t> first_layer;  // stages() + 1 boundaries: 0 .. n_layer
  bool on() const { return pp > 1; }
  int stages() const { return pp * v; }
  int stage(int chunk) const { return chunk * pp + rank; }
  bool first(int chunk) const { return stage(chunk) == 0; }
  bool last(int chunk) const { return stage(chunk) == stages() - 1; }
  std::int64_t layers(int s) const { return first_layer[s + 1] - first_layer[s]; }
};

// Layer boundaries (stages + 1 of them) minimizing the most expensive stage, each stage with at
// least one layer: layer_cost[l] per layer, first_extra on the first stage (embeddings),
// last_extra on the last (the head; GPT-2's LM head costs about five gpt2 blocks). Exact
// (dynamic programming over the split points); ties go to the earlier boundary.
std::vector<std::int64_t> balance_stages(const std::vector<double>& layer_cost, double first_extra,
                                         double last_extra, int stages);

// "" when a model of n_layer layers can be cut into `stages` stages, else why and the fix.
std::string pipeline_problem(std::int64_t n_layer, int stages);
// A cut given by hand (the pp_layers key, "9,3": layers per stage, in stage order): the
// layer counts, or an sb::Error naming the text when it is not comma-separated integers.
std::vector<std::int64_t> parse_stage_layers(const std::string& text);
// "" when `layers` (one count per stage) cuts n_layer layers into `stages` stages, each with
// at least one layer, else why and the fix.
std::string stage_layers_problem(const std::vector<std::int64_t>& layers, std::int64_t n_layer,
                                 int stages);

// A model's units cut to one rank's stages. `whole` is the model's list (embedding unit 0,
// block l at unit l + 1, the head at n_layer + 1, as GPT-2 and BERT have it); units are this
// rank's in stage order, and local[g] the position of the model's unit g among them (-1: not
// on this rank). With head_uses_embed, the last stage also holds a copy of unit 0
// (UnitSpec::pp_copy), which local[0] then names there.
struct StageUnits {
  std::vector<UnitSpec> units;
  std::vector<int> local;
};
StageUnits stage_units(const std::vector<UnitSpec>& whole, const PipelineCut& cut,
                       bool head_uses_embed);

// A model's pipeline state (GPT-2's and BERT's): its cut and the map from the whole model's
// units to this rank's.
struct Pipelined {
  PipelineCut cut;
  std::vector<int> local;  // StageUnits::local
  // Cuts `units` (the whole model's list, or this tp rank's blocks of it; n_layer + 2 units)
  // for rank `rank` of pp x v stages, the boundaries from balance_stages with every block
  // costing layer_cost, or from `stage_layers` when given (layers per stage), and returns this
  // rank's units (all of them when pp = 1). Refuses a second cut, more stages than layers and
  // stage_layers that do not cut the model, naming the model `preset`.
  std::vector<UnitSpec> apply(const std::string& preset, const std::vector<UnitSpec>& units, int pp,
                              int v, int rank, double layer_cost, double first_extra,
                              double last_extra, bool head_uses_embed,
                              const std::vector<std::int64_t>& stage_layers = {});
  // Throws, naming `what` (a whole-model path), when the model is cut.
  void check_uncut(const std::string& preset, const char* what) const;
};

// The layers of each stage and where the embeddings and head run, for plan and the result:
// "stage 0: embed + layers 0-5 | stage 1: layers 6-11 + head".
std::string describe_stages(const PipelineCut& cut);

}  // namespace sb::models
