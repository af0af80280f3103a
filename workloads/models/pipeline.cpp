// Cutting a model into pipeline stages (pipeline.h).
#include "workloads/models/pipeline.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "workloads/models/model.h"

namespace sb::models {

std::vector<std::int64_t> balance_stages(const std::vector<double>& cost, double first_extra,
                                         double last_extra, int stages) {
  const int L = static_cast<int>(cost.size());
  SB_CHECK(stages >= 1 && stages <= L, "{} pipeline stages for {} layers", stages, L);
  std::vector<double> prefix(L + 1, 0.0);
  for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + cost[l];
  // best[s][l]: the smallest possible most expensive stage when stages 0..s-1 hold layers
  // [0, l); cut[s][l] the boundary before stage s - 1 that gives it.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int l = s; l <= L; ++l)
      for (int k = s - 1; k < l; ++k) {  // stage s - 1 holds layers [k, l)
        double c = prefix[l] - prefix[k] + (s == 1 ? first_extra : 0.0) +
                   (s == stages ? last_extra : 0.0);
        c = std::max(c, best[s - 1][k]);
        if (c < best[s][l]) best[s][l] = c, cut[s][l] = k;
      }
  std::vector<std::int64_t> b(stages + 1);
  b[stages] = L;
  for (int s = stages; s >= 1; --s) b[s - 1] = cut[s][b[s]];
  return b;
}

std::string pipeline_problem(std::int64_t n_layer, int stages) {
  if (stages <= n_layer) return "";
  return fmt::format("{} pipeline stages (mesh.pp x pp_virtual_stages) for a model of {} layers: "
                     "every stage needs at least one layer; lower mesh.pp or pp_virtual_stages "
                     "to at most {} stages", stages, n_layer, n_layer);
}

StageUnits stage_units(const std::vector<UnitSpec>& whole, const PipelineCut& cut,
                       bool head_uses_embed) {
  const int L = static_cast<int>(whole.size()) - 2;
  SB_CHECK(cut.first_layer.size() == static_cast<std::size_t>(cut.stages() + 1) &&
               cut.first_layer.back() == L,
           "pipeline cut of {} boundaries for {} stages of {} layers", cut.first_layer.size(),
           cut.stages(), L);
  StageUnits out;
  out.local.assign(whole.size(), -1);
  auto take = [&](int g, bool copy) {
    out.local[g] = static_cast<int>(out.units.size());
    UnitSpec u = whole[g];
    u.whole_index = g;
    u.pp_copy = copy;
    u.pp_tied = g == 0 && !copy && head_uses_embed;
    out.units.push_back(std::move(u));
  };
  for (int c = 0; c < cut.v; ++c) {
    if (cut.first(c)) take(0, false);
    for (auto l = cut.first_layer[cut.stage(c)]; l < cut.first_layer[cut.stage(c) + 1]; ++l)
      take(static_cast<int>(l + 1), false);
    if (cut.last(c)) {
      take(L + 1, false);
      if (head_uses_embed) take(0, true);
    }
  }
  return out;
}

std::vector<std::int64_t> parse_stage_layers(const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SB_CHECK(used > 0 && used == item.size(), "pp_layers = \"{}\": \"{}\" is not a whole number; "
             "give the layers of each stage separated by commas, e.g. \"9,3\"", text, item);
    out.push_back(n);
    pos = end + 1;
  }
  return out;
}

std::string stage_layers_problem(const std::vector<std::int64_t>& layers, std::int64_t n_layer,
                                 int stages) {
  std::int64_t sum = 0;
  bool positive = true;
  for (auto n : layers) sum += n, positive = positive && n >= 1;
  if (static_cast<int>(layers.size()) != stages || sum != n_layer || !positive)
    return fmt::format("pp_layers gives {} stages holding {} layers, and the model's {} layers are "
                       "cut into {} stages (mesh.pp x pp_virtual_stages): give {} counts of at "
                       "least 1 that add up to {}", layers.size(), sum, n_layer, stages, stages,
                       n_layer);
  return "";
}

std::vector<UnitSpec> Pipelined::apply(const std::string& preset, const std::vector<UnitSpec>& units,
                                       int pp, int v, int rank, double layer_cost, double first_extra,
                                       double last_extra, bool head_uses_embed,
                                       const std::vector<std::int64_t>& stage_layers) {
  SB_CHECK(!cut.on(), "model '{}' is already cut into pipeline stages", preset);
  const auto n_layer = static_cast<std::int64_t>(units.size()) - 2;
  const std::string why = stage_layers.empty() ? pipeline_problem(n_layer, pp * v)
                                               : stage_layers_problem(stage_layers, n_layer, pp * v);
  SB_CHECK(why.empty(), "model '{}': {}", preset, why);
  cut.pp = pp, cut.v = v, cut.rank = rank;
  if (stage_layers.empty()) {
    cut.first_layer = balance_stages(std::vector<double>(static_cast<std::size_t>(n_layer), layer_cost),
                                     first_extra, last_extra, pp * v);
  } else {
    cut.first_layer = {0};
    for (auto n : stage_layers) cut.first_layer.push_back(cut.first_layer.back() + n);
  }
  if (pp <= 1) return units;
  auto mine = stage_units(units, cut, head_uses_embed);
  local = std::move(mine.local);
  return std::move(mine.units);
}

void Pipelined::check_uncut(const std::string& preset, const char* what) const {
  SB_CHECK(!cut.on(), "model '{}': {} runs on the whole model, which is cut into {} pipeline "
           "stages here (mesh.pp = {}); the pipeline runs training's step and loss only today",
           preset, what, cut.stages(), cut.pp);
}

std::string describe_stages(const PipelineCut& cut) {
  std::string out;
  for (int s = 0; s < cut.stages(); ++s) {
    const auto a = cut.first_layer[s], b = cut.first_layer[s + 1];
    out += fmt::format("{}stage {} (pp rank {}): {}layers {}-{}{}", s ? " | " : "", s, s % cut.pp,
                       s == 0 ? "embed + " : "", a, b - 1, s + 1 == cut.stages() ? " + head" : "");
  }
  return out;
}

}  // namespace sb::models
