// Text corpora for language modelling (the Realdata issue): a UTF-8 .txt file, or a folder of
// .txt files, tokenized once into two token files in llm.c's layout (token_file.h) in a cache
// folder, the training stream and the held-out one, split by document: each file of a folder
// is a document, and in a single file each paragraph (text between blank lines) is. The cache
// is keyed by a hash of the sources' names and bytes, the tokenizer's name and vocabulary
// files, the held-out fraction and the seed; a manifest written last (by rename) marks it
// complete, so a run reuses it while nothing changed and an interrupted one leaves no
// half-written stream under a final name.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <mpi.h>

#include "workloads/data/batches.h"

namespace sb {
class Point;
}

namespace sb::data {

struct TextCorpusConfig {
  std::string source;         // a .txt file or a folder of .txt files
  std::string cache_dir;      // where the token files go
  std::string tokenizer;      // a make_tokenizer name
  std::string tokenizer_dir;  // its vocabulary folder
  double heldout_fraction = 0.1;
  std::uint64_t seed = 1;
};

struct TextCorpus {
  std::string train_bin, heldout_bin, manifest;  // paths
  std::string key;                               // the cache key (16 hex digits)
  bool reused = false;                           // found complete in the cache
  std::int64_t documents = 0, heldout_documents = 0, train_tokens = 0, heldout_tokens = 0;
};

// Whether a `data` value names text (a .txt file or a directory; never "markov").
bool is_text_path(const std::string& path);

// Tokenizes (or finds in the cache) the corpus. Errors name the file: missing, empty, not
// UTF-8 (byte offset), fewer than 2 documents, a vocabulary past uint16 token files.
TextCorpus prepare_text_corpus(const TextCorpusConfig& c);

struct TextSource {
  TextCorpus corpus;
  std::unique_ptr<BatchSource> source;
};

// The text corpus a point names (data = a .txt file or folder; keys tokenizer, tokenizer_dir
// (default: the model folder), token_cache, heldout_fraction, seed, seq), tokenized by rank 0
// of `world` while the others wait, as batches of `batch` rows for model m: next-token rows
// for causal LMs (GPT-2), masked rows for MLM (BERT). Train and infer both call this.
TextSource text_source_for(const Point& p, const models::ModelConfig& m, MPI_Comm world,
                           std::int64_t batch);

}  // namespace sb::data
