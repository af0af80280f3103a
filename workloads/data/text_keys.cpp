// The keys of text corpora (TextKeys, data_config.h: train and infer read them alike) and the
// batches both tasks make from the corpus a point names.
#include <mpi.h>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/base_config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/data/data_config.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/token_file.h"
#include "workloads/data/tokenizer.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::data {
namespace {

std::string tokenizer_name(const Point& p, const models::ModelConfig& m) {
  const std::string& t = config<TextKeys>(p).tokenizer;
  if (t != "auto") return t;
  return models::family(m.family).objective == models::Objective::MaskedLm ? "bert-wordpiece"
                                                                            : "gpt2-bpe";
}

void validate(const TextKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const double hf = c.heldout_fraction;
  if (!(hf > 0 && hf < 1))
    out.push_back({"heldout_fraction", fmt::format("heldout_fraction {} must lie in (0, 1)", hf)});
  const std::string& d = config<DataKeys>(p).data;
  if (!is_text_path(d)) return;
  if (c.tokenizer != "byte" && tokenizer_dir_for(p).empty())
    out.push_back({"tokenizer_dir", fmt::format("data = \"{}\" is text: set tokenizer_dir to the "
                                                "tokenizer's files (GPT-2: vocab.json + "
                                                "merges.txt; BERT: vocab.txt), or tokenizer = "
                                                "\"byte\"", d)});
}

const sb::Registrar names([] {
  for (const char* t : {"auto", "gpt2-bpe", "bert-wordpiece", "byte"})
    register_name("tokenizer", t, std::string(t) == "auto" ? "gpt2-bpe for GPT-2, bert-wordpiece for BERT"
                                                           : "the tokenizer of that name");
});

}  // namespace

void TextKeys::declare(Fields<TextKeys>& f) {
  f.tasks({"train", "infer"});
  f.add("token_cache", &TextKeys::token_cache, "results/token-cache",
        "data = text: the folder of its cached token files (train and held-out streams)");
  f.add("heldout_fraction", &TextKeys::heldout_fraction, 0.1,
        "data = text: the fraction of documents held out for evaluation (seeded by seed)");
  f.name("tokenizer", &TextKeys::tokenizer, "tokenizer", "auto",
         "data = text: the tokenizer (auto: the model family's), its files in tokenizer_dir");
  f.validate(validate);
}
SB_CONFIG_SECTION(TextKeys);

TextSource text_source_for(const Point& p, const models::ModelConfig& m, MPI_Comm world,
                           std::int64_t batch) {
  const TextKeys& k = config<TextKeys>(p);
  TextCorpusConfig c;
  c.source = config<DataKeys>(p).data;
  c.cache_dir = k.token_cache;
  c.tokenizer = tokenizer_name(p, m);
  c.tokenizer_dir = tokenizer_dir_for(p);
  c.heldout_fraction = k.heldout_fraction;
  c.seed = static_cast<std::uint64_t>(base_config(p).seed);
  int rank = 0;
  sb::check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank (token cache)");
  TextSource out;
  // Rank 0 tokenizes (or finds the cache) while the others wait, then all read the same files.
  if (rank == 0) out.corpus = prepare_text_corpus(c);
  sb::check_mpi(MPI_Barrier(world), "MPI_Barrier (token cache)");
  if (rank != 0) out.corpus = prepare_text_corpus(c);
  const auto train = read_token_file(out.corpus.train_bin);
  const auto held = read_token_file(out.corpus.heldout_bin);
  for (const auto* t : {&train, &held})
    for (auto id : *t)
      SB_CHECK(id < m.vocab, "data '{}' tokenized with {} gives id {} beyond model '{}''s "
                             "vocab_size {}: tokenizer and model do not belong together",
               c.source, c.tokenizer, id, m.preset, m.vocab);
  const auto T = config<ModelKeys>(p).seq;
  if (models::family(m.family).objective == models::Objective::MaskedLm) {
    const auto tok = make_tokenizer(c.tokenizer, c.tokenizer_dir);
    MlmConfig mlm;
    mlm.pad_id = tok->token_id("[PAD]"), mlm.cls_id = tok->token_id("[CLS]");
    mlm.sep_id = tok->token_id("[SEP]"), mlm.mask_id = tok->token_id("[MASK]");
    SB_CHECK(mlm.pad_id >= 0 && mlm.cls_id >= 0 && mlm.sep_id >= 0 && mlm.mask_id >= 0,
             "MLM on text needs [PAD], [CLS], [SEP] and [MASK] in the vocabulary; tokenizer {} "
             "lacks one (use tokenizer = \"bert-wordpiece\")", c.tokenizer);
    mlm.random_low = 0, mlm.random_high = tok->vocab_size();
    out.source = std::make_unique<TokenMlmBatches>(train, held, mlm, batch, T, c.seed);
  } else {
    out.source = std::make_unique<TokenLmBatches>(train, held, batch, T, c.seed);
  }
  return out;
}

}  // namespace sb::data
