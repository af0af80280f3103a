// The keys of labelled datasets (DataKeys, data_config.h: train and infer read them alike) and
// the one function both tasks call to load the dataset a point names.
#include <algorithm>
#include <filesystem>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/model_keys.h"
#include "harness/spec/reference.h"
#include "harness/workload.h"
#include "workloads/data/data_config.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::data {
namespace {

void validate(const DataKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const std::string& d = c.data;
  if (const std::string typo = data_keyword_typo(d); !typo.empty()) {
    out.push_back({"data", fmt::format("data = \"{}\" is no file here and no keyword; did you "
                                       "mean \"{}\"? (a file of that name that an earlier suite "
                                       "writes: write \"./{}\")", d, typo, d)});
    return;
  }
  if (base_config(p).task == "infer" && d != "markov" && !is_labelled_path(d) && !is_text_path(d)) {
    if (!std::filesystem::exists(d))  // a corpus folder an earlier suite (or a command) makes
      out.push_back({"data", fmt::format("data '{}' does not exist (yet): the point will fail unless "
                                         "an earlier suite writes it; check the path", d), true});
    else
      out.push_back({"data", fmt::format("infer scores data = \"markov\", text (.txt or a folder) "
                                         "or a labelled .jsonl/.csv; \"{}\" is none of them", d)});
  }
  if (!is_labelled_path(d)) {
    if (!c.validation.empty())
      out.push_back({"validation", "validation names a labelled file; it needs data = a .jsonl "
                                   "or .csv dataset"});
    return;
  }
  if (tokenizer_dir_for(p).empty())
    out.push_back({"tokenizer_dir", fmt::format("data = \"{}\" is tokenized with BERT's "
                                                "WordPiece: set tokenizer_dir to a folder with "
                                                "vocab.txt (or model to a BERT folder that has one)", d)});
  for (const auto& [k, f] : {std::pair<const char*, const std::string&>{"data", c.data},
                             {"validation", c.validation}}) {
    if (!f.empty() && !std::filesystem::exists(f))
      out.push_back({k, fmt::format("{} '{}' does not exist (yet): the point will fail unless an "
                                    "earlier suite writes it; check the path", k, f), true});
  }
  const double frac = c.validation_fraction;
  if (c.validation.empty() && !(frac > 0 && frac < 1))
    out.push_back({"validation_fraction", fmt::format("validation_fraction {} must lie in (0, 1) "
                                                      "(or give a validation file)", frac)});
}

}  // namespace

void DataKeys::declare(Fields<DataKeys>& f) {
  f.tasks({"train", "infer"});
  // train_task.cpp registers `data` for train too (the same spec; harness/workload.cpp merges).
  f.add("data", &DataKeys::data, "markov", kDataDoc);
  f.add("validation", &DataKeys::validation, "",
        "labelled data: the validation file (.jsonl/.csv); empty = hold out validation_fraction "
        "of data's examples");
  f.add("validation_fraction", &DataKeys::validation_fraction, 0.1,
        "labelled data: the fraction of data's examples held out for validation (seeded by seed)");
  f.add("tokenizer_dir", &DataKeys::tokenizer_dir, "",
        "the tokenizer's files for text and labelled data: vocab.txt (BERT), vocab.json + "
        "merges.txt (GPT-2); empty = the model folder");
  f.add("truncate", &DataKeys::truncate, true,
        "labelled data: cut examples longer than seq (counted: truncated_examples); false = an "
        "error naming the example's file:line");
  f.validate(validate);
}
SB_CONFIG_SECTION(DataKeys);

std::string data_keyword_typo(const std::string& value) {
  static const std::vector<std::string> keywords{"markov"};
  if (std::find(keywords.begin(), keywords.end(), value) != keywords.end()) return "";
  if (value.find_first_of("/.") != std::string::npos || std::filesystem::exists(value)) return "";
  return closest(value, keywords);
}

std::string tokenizer_dir_for(const Point& p) {
  const std::string& t = config<DataKeys>(p).tokenizer_dir;
  if (!t.empty()) return t;
  const std::string& m = config<ModelKeys>(p).model;
  return models::is_model_path(m) ? m : "";
}

std::shared_ptr<const LabelledData> load_labelled_for(const Point& p, const models::ModelConfig& m) {
  const DataKeys& k = config<DataKeys>(p);
  SB_REQUIRE(models::family(m.family).classifies,
             "{}: data = \"{}\" is labelled text for sequence classification, which model '{}' "
             "({}) has no head for; use a BERT model", p.key_at("data"), k.data, m.preset, m.family);
  LabelledConfig c;
  c.train_path = k.data;
  c.validation_path = k.validation;
  c.validation_fraction = k.validation_fraction;
  c.seq = config<ModelKeys>(p).seq;
  c.truncate = k.truncate;
  c.seed = static_cast<std::uint64_t>(base_config(p).seed);
  auto tok = make_tokenizer("bert-wordpiece", tokenizer_dir_for(p));
  SB_REQUIRE(tok->vocab_size() <= m.vocab, "{}: tokenizer_dir's vocab.txt has {} tokens, model "
             "'{}' {} (vocab_size): they do not belong together; use the model's own vocab.txt",
             p.key_at("tokenizer_dir"), tok->vocab_size(), m.preset, m.vocab);
  auto d = std::make_shared<LabelledData>(load_labelled(c, *tok, m.vocab));
  SB_REQUIRE(static_cast<std::int64_t>(d->labels.size()) <= m.num_labels,
             "{}: data '{}' has {} labels, model '{}' classifies into {} (its config.json "
             "id2label / num_labels, or the preset's 2): use a model with as many labels",
             p.key_at("data"), c.train_path, d->labels.size(), m.preset, m.num_labels);
  return d;
}

}  // namespace sb::data
