// The keys of labelled datasets (train and infer read them alike) and the one function both
// tasks call to load the dataset a point names.
#include <algorithm>
#include <filesystem>

#include "harness/core/check.h"
#include "harness/spec/reference.h"
#include "harness/workload.h"
#include "workloads/data/labelled.h"
#include "workloads/data/text_corpus.h"
#include "workloads/models/family.h"
#include "workloads/models/hf_config.h"

namespace sb::data {
namespace {

// Shared by train and infer: registered once with both tasks.
void key(KeySpec ks) {
  ks.tasks = {"train", "infer"};
  register_key(std::move(ks));
}

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (!p.has("task")) return;
  const std::string task = p.get_string("task");
  if (task != "train" && task != "infer") return;
  const std::string d = p.get_string("data");
  if (const std::string typo = data_keyword_typo(d); !typo.empty()) {
    out.push_back({"data", fmt::format("data = \"{}\" is no file here and no keyword; did you "
                                       "mean \"{}\"? (a file of that name that an earlier suite "
                                       "writes: write \"./{}\")", d, typo, d)});
    return;
  }
  if (task == "infer" && d != "markov" && !is_labelled_path(d) && !is_text_path(d))
    out.push_back({"data", fmt::format("infer scores data = \"markov\", text (.txt or a folder) "
                                       "or a labelled .jsonl/.csv; \"{}\" is none of them", d)});
  if (!is_labelled_path(d)) {
    if (!p.get_string("validation").empty())
      out.push_back({"validation", "validation names a labelled file; it needs data = a .jsonl "
                                   "or .csv dataset"});
    return;
  }
  if (tokenizer_dir_for(p).empty())
    out.push_back({"tokenizer_dir", fmt::format("data = \"{}\" is tokenized with BERT's "
                                                "WordPiece: set tokenizer_dir to a folder with "
                                                "vocab.txt (or model to a BERT folder that has one)", d)});
  for (const char* k : {"data", "validation"}) {
    const std::string f = p.get_string(k);
    if (!f.empty() && !std::filesystem::exists(f))
      out.push_back({k, fmt::format("{} '{}' does not exist (yet): the point will fail unless an "
                                    "earlier suite writes it; check the path", k, f), true});
  }
  const double frac = p.get_double("validation_fraction");
  if (p.get_string("validation").empty() && !(frac > 0 && frac < 1))
    out.push_back({"validation_fraction", fmt::format("validation_fraction {} must lie in (0, 1) "
                                                      "(or give a validation file)", frac)});
}

const sb::Registrar reg([] {
  {  // train registers it too (train_task.cpp); infer reads only labelled files and markov
    KeySpec ks{"data", KeyType::String, std::string("markov"), "", kDataDoc};
    ks.tasks = {"infer"};
    register_key(std::move(ks));
  }
  key({"validation", KeyType::String, std::string(""), "",
       "labelled data: the validation file (.jsonl/.csv); empty = hold out validation_fraction "
       "of data's examples"});
  key({"validation_fraction", KeyType::Float, 0.1, "",
       "labelled data: the fraction of data's examples held out for validation (seeded by seed)"});
  key({"tokenizer_dir", KeyType::String, std::string(""), "",
       "the tokenizer's files for text and labelled data: vocab.txt (BERT), vocab.json + "
       "merges.txt (GPT-2); empty = the model folder"});
  key({"truncate", KeyType::Bool, true, "",
       "labelled data: cut examples longer than seq (counted: truncated_examples); false = an "
       "error naming the example's file:line"});
  register_validator(validate);
});

}  // namespace

std::string data_keyword_typo(const std::string& value) {
  static const std::vector<std::string> keywords{"markov"};
  if (std::find(keywords.begin(), keywords.end(), value) != keywords.end()) return "";
  if (value.find_first_of("/.") != std::string::npos || std::filesystem::exists(value)) return "";
  return closest(value, keywords);
}

std::string tokenizer_dir_for(const Point& p) {
  const std::string t = p.get_string("tokenizer_dir");
  if (!t.empty()) return t;
  const std::string m = p.get_string("model");
  return models::is_model_path(m) ? m : "";
}

std::shared_ptr<const LabelledData> load_labelled_for(const Point& p, const models::ModelConfig& m) {
  SB_REQUIRE(models::family(m.family).classifies,
             "{}: data = \"{}\" is labelled text for sequence classification, which model '{}' "
             "({}) has no head for; use a BERT model", p.key_at("data"), p.get_string("data"),
             m.preset, m.family);
  LabelledConfig c;
  c.train_path = p.get_string("data");
  c.validation_path = p.get_string("validation");
  c.validation_fraction = p.get_double("validation_fraction");
  c.seq = p.get_int("seq");
  c.truncate = p.get_bool("truncate");
  c.seed = static_cast<std::uint64_t>(p.get_int("seed"));
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
