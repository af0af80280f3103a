// Labelled text for BERT sequence classification (the Realdata issue). A dataset is JSONL
// (one object a line: "text", "label", optional "text_pair") or CSV with a header naming the
// columns text, label and optionally text_pair (RFC 4180 quoting). Examples are tokenized into
// rows of `seq` tokens: [CLS] text [SEP] (text_pair [SEP]) [PAD]..., token types 0 then 1,
// attention mask 1 on real tokens. Labels (strings or integers) get ids in a recorded order:
// ascending numbers when every training label is an integer, else sorted strings.
// Validation: a separate file, or a seeded split of the training file by example.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "workloads/data/batches.h"
#include "workloads/data/data_config.h"
#include "workloads/data/tokenizer.h"

namespace sb {
class Point;
}

namespace sb::data {

struct LabelledConfig {
  std::string train_path;
  std::string validation_path;       // "" = hold out validation_fraction of train_path
  double validation_fraction = 0.1;  // of the training file's examples, by a seeded shuffle
  std::int64_t seq = 128;
  bool truncate = true;  // longer examples: cut (longest part first, counted) or an error
  std::uint64_t seed = 1;
};

// The `data` key's one description (train and infer both register it).
inline constexpr const char* kDataDoc =
    "the data: markov (synthetic, known loss floor), text (a .txt file or a folder: GPT-2 next "
    "token, BERT MLM), a .bin token file (GPT-2 training), or a labelled .jsonl/.csv (BERT "
    "sequence classification); docs/DATA.md";

// Whether a `data` value names a labelled dataset (.jsonl, .json or .csv).
bool is_labelled_path(const std::string& path);

// The keyword `data` = `value` misspells ("markov" for "markvo"), or "" when it reads as a path:
// it exists, has a '/' or an extension, or is near no keyword. Without this a typo is taken
// for a file an earlier suite may write, and only warned about.
std::string data_keyword_typo(const std::string& value);

struct LabelledSplit {
  torch::Tensor input_ids, token_type_ids, attention_mask;  // (N, seq) int64
  torch::Tensor labels;                                     // (N) int64
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  models::Batch rows(std::int64_t begin, std::int64_t end) const;  // views
  models::Batch select(const torch::Tensor& idx) const;            // copies of rows idx
};

struct LabelledData {
  std::vector<std::string> labels;  // id -> label
  LabelledSplit train, validation;
  std::int64_t truncated = 0;  // examples cut to seq (truncate = true)
};

// Errors name the file and line: a missing file, an empty dataset, a line that is not JSON,
// a missing text or label, a validation label never seen in training, a sequence longer than
// seq with truncate = false, a token id beyond `vocab` (vocabulary and model disagree).
LabelledData load_labelled(const LabelledConfig& c, const Tokenizer& tok, std::int64_t vocab);

// Training batches: every epoch a seeded permutation of the training examples; held-out
// batch i: validation rows [i B, (i+1) B), wrapping around.
class LabelledBatches final : public BatchSource {
 public:
  LabelledBatches(std::shared_ptr<const LabelledData> data, std::int64_t batch, std::uint64_t seed);
  std::int64_t batch_size() const override { return batch_; }
  std::int64_t seq_len() const override { return data_->train.input_ids.size(1); }
  Batch train(std::int64_t step) const override;
  Batch heldout(std::int64_t i) const override;
  const LabelledData& data() const { return *data_; }

 private:
  std::shared_ptr<const LabelledData> data_;
  std::int64_t batch_;
  std::uint64_t seed_;
};

// Accuracy and macro-F1 of predicted against true ids: F1 of a label = 2 TP / (2 TP + FP + FN),
// averaged over the labels that occur in the truth or the predictions (scikit-learn's macro).
// The class each row of `split` gets from `classify` ((rows, num_labels) logits on any device),
// asked `batch` rows at a time, in row order: (N) int64 on the CPU.
torch::Tensor predicted_classes(const LabelledSplit& split, std::int64_t batch,
                                const std::function<torch::Tensor(const models::Batch&)>& classify);

struct ClassificationScore {
  double accuracy = 0, macro_f1 = 0;
  std::int64_t examples = 0;
};
ClassificationScore classification_score(const torch::Tensor& predicted, const torch::Tensor& truth,
                                         std::int64_t num_labels);

// The folder of the tokenizer's files: the tokenizer_dir key, else the model folder (a Hugging
// Face folder keeps vocab.txt / vocab.json + merges.txt beside config.json), else "".
std::string tokenizer_dir_for(const Point& p);

// The labelled dataset a point names (data = .jsonl/.csv; keys validation,
// validation_fraction, tokenizer_dir, truncate, seq, seed), for model configuration m: BERT
// only, its vocab_size and label count checked. Train and infer both call this.
std::shared_ptr<const LabelledData> load_labelled_for(const Point& p, const models::ModelConfig& m);

}  // namespace sb::data
