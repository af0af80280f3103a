// The keys of text corpora (train and infer read them alike) and the batches both tasks make
// from the corpus a point names.
#include <mpi.h>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/token_file.h"
#include "workloads/data/tokenizer.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::data {
namespace {

void key(KeySpec ks) {
  ks.tasks = {"train", "infer"};
  register_key(std::move(ks));
}

std::string tokenizer_name(const Point& p, const models::ModelConfig& m) {
  const std::string t = p.get_string("tokenizer");
  if (t != "auto") return t;
  return models::family(m.family).objective == models::Objective::MaskedLm ? "bert-wordpiece"
                                                                            : "gpt2-bpe";
}

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (!p.has("task")) return;
  const std::string task = p.get_string("task");
  if (task != "train" && task != "infer") return;
  const double hf = p.get_double("heldout_fraction");
  if (!(hf > 0 && hf < 1))
    out.push_back({"heldout_fraction", fmt::format("heldout_fraction {} must lie in (0, 1)", hf)});
  const std::string d = p.get_string("data");
  if (!is_text_path(d)) return;
  if (p.get_string("tokenizer") != "byte" && tokenizer_dir_for(p).empty())
    out.push_back({"tokenizer_dir", fmt::format("data = \"{}\" is text: set tokenizer_dir to the "
                                                "tokenizer's files (GPT-2: vocab.json + "
                                                "merges.txt; BERT: vocab.txt), or tokenizer = "
                                                "\"byte\"", d)});
}

const sb::Registrar reg([] {
  key({"token_cache", KeyType::String, std::string("results/token-cache"), "",
       "data = text: the folder of its cached token files (train and held-out streams)"});
  key({"heldout_fraction", KeyType::Float, 0.1, "",
       "data = text: the fraction of documents held out for evaluation (seeded by seed)"});
  for (const char* t : {"auto", "gpt2-bpe", "bert-wordpiece", "byte"})
    register_name("tokenizer", t, std::string(t) == "auto" ? "gpt2-bpe for GPT-2, bert-wordpiece for BERT"
                                                           : "the tokenizer of that name");
  key({"tokenizer", KeyType::Name, std::string("auto"), "tokenizer",
       "data = text: the tokenizer (auto: the model family's), its files in tokenizer_dir"});
  register_validator(validate);
});

}  // namespace

TextSource text_source_for(const Point& p, const models::ModelConfig& m, MPI_Comm world,
                           std::int64_t batch) {
  TextCorpusConfig c;
  c.source = p.get_string("data");
  c.cache_dir = p.get_string("token_cache");
  c.tokenizer = tokenizer_name(p, m);
  c.tokenizer_dir = tokenizer_dir_for(p);
  c.heldout_fraction = p.get_double("heldout_fraction");
  c.seed = static_cast<std::uint64_t>(p.get_int("seed"));
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
  const auto T = p.get_int("seq");
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
