// The training stream of a point's `data` (training_source.h).
#include "workloads/data/training_source.h"

#include "harness/spec/base_config.h"
#include "harness/spec/model_keys.h"
#include "workloads/data/data_config.h"
#include "workloads/data/labelled.h"
#include "workloads/data/token_file.h"
#include "workloads/models/family.h"

namespace sb::data {

std::unique_ptr<BatchSource> training_source(const Point& p, const models::ModelConfig& m, MPI_Comm world,
                                             TextCorpus* corpus) {
  const ModelKeys& k = config<ModelKeys>(p);
  const std::int64_t B = k.batch, T = k.seq;
  const auto seed = static_cast<std::uint64_t>(base_config(p).seed);
  const std::string& d = config<DataKeys>(p).data;
  if (is_labelled_path(d)) return std::make_unique<LabelledBatches>(load_labelled_for(p, m), B, seed);
  if (is_text_path(d)) {
    auto text = text_source_for(p, m, world, B);
    if (corpus) *corpus = text.corpus;
    return std::move(text.source);
  }
  if (!models::family(m.family).trains_on_token_files || d == "markov") return markov_source(m, B, T, seed, seed);
  auto tokens = std::make_shared<const std::vector<std::int32_t>>(read_token_file(d));
  return std::make_unique<TokenLmBatches>(tokens, B, T, seed);
}

}  // namespace sb::data
