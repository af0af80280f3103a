// The training stream a point's `data` key names, for every task that trains on it or draws
// from its training split (train's steps; infer's Taylor importance for pruning): labelled
// examples (.jsonl/.csv), text (.txt or a folder), a token file (.bin, causal LM families) or
// the Markov chain of the point's seed.
#pragma once
#include <memory>

#include <mpi.h>

#include "harness/workload.h"
#include "workloads/data/batches.h"
#include "workloads/data/text_corpus.h"

namespace sb::data {

// Global batches of p's `batch` x `seq`. A text corpus's cache facts go to *corpus when given.
std::unique_ptr<BatchSource> training_source(const Point& p, const models::ModelConfig& m, MPI_Comm world,
                                             TextCorpus* corpus = nullptr);

}  // namespace sb::data
