// Labelled datasets (the Realdata issue): JSONL and CSV give the same rows; rows are
// [CLS] a [SEP] (b [SEP]) [PAD]... with token types and mask; label ids in the recorded
// order; the seeded split; errors at file:line; accuracy and macro-F1 by hand.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/labelled.h"
#include "workloads/data/tokenizer.h"

using namespace sb;
using namespace sb::data;

namespace {

const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good",
                                         "bad",   "film",  "plot",  ",",     "\"",     "very"};
// ids: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, good 5, bad 6, film 7, plot 8, ',' 9, '"' 10, very 11

std::string dir() {
  const std::string d = sb::test::tmp() + "labelled";
  ::mkdir(d.c_str(), 0755);
  std::ofstream f(d + "/vocab.txt");
  for (const auto& t : kVocab) f << t << "\n";
  return d;
}

std::string write(const std::string& name, const std::string& text) {
  const std::string p = dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const LabelledConfig& c) {
  auto tok = make_tokenizer("bert-wordpiece", dir());
  try {
    load_labelled(c, *tok, 128);
  } catch (const sb::Error& e) {
    return e.message();
  }
  return "";
}

LabelledConfig config(const std::string& train, const std::string& val, std::int64_t seq = 8) {
  LabelledConfig c;
  c.train_path = train, c.validation_path = val, c.seq = seq;
  return c;
}

}  // namespace

TEST(Labelled, JsonlAndCsvGiveTheSameRows) {
  auto tok = make_tokenizer("bert-wordpiece", dir());
  const auto jl = write("t.jsonl",
                        "{\"text\": \"good film\", \"label\": \"pos\"}\n"
                        "\n"
                        "{\"text\": \"bad, very bad\", \"label\": \"neg\", \"text_pair\": \"plot\"}\n"
                        "{\"text\": \"\\\"good\\\"\", \"label\": \"pos\"}\n");
  const auto csv = write("t.csv",
                         "label,text,text_pair\n"
                         "pos,good film,\n"
                         "neg,\"bad, very\nbad\",plot\n"
                         "pos,\"\"\"good\"\"\",\n");
  const auto val = write("v.jsonl", "{\"text\": \"plot\", \"label\": \"neg\"}\n");
  auto a = load_labelled(config(jl, val), *tok, 128);
  auto b = load_labelled(config(csv, val), *tok, 128);
  EXPECT_EQ(a.labels, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(b.labels, a.labels);
  using Field = torch::Tensor LabelledSplit::*;
  for (Field t : std::vector<Field>{&LabelledSplit::input_ids, &LabelledSplit::token_type_ids,
                                    &LabelledSplit::attention_mask, &LabelledSplit::labels})
    EXPECT_TRUE(torch::equal(a.train.*t, b.train.*t));
  // Row 1: [CLS] bad , very bad [SEP] plot [SEP], types 0 x6 then 1 x2, all real.
  auto row = [](const torch::Tensor& t, int r) {
    auto v = t[r].contiguous();
    return std::vector<std::int64_t>(v.data_ptr<std::int64_t>(), v.data_ptr<std::int64_t>() + v.numel());
  };
  EXPECT_EQ(row(a.train.input_ids, 1), (std::vector<std::int64_t>{2, 6, 9, 11, 6, 3, 8, 3}));
  EXPECT_EQ(row(a.train.token_type_ids, 1), (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(row(a.train.input_ids, 0), (std::vector<std::int64_t>{2, 5, 7, 3, 0, 0, 0, 0}));
  EXPECT_EQ(row(a.train.attention_mask, 0), (std::vector<std::int64_t>{1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row(a.train.input_ids, 2), (std::vector<std::int64_t>{2, 10, 5, 10, 3, 0, 0, 0}));
  EXPECT_EQ(row(a.train.labels.view({3, 1}), 0), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(a.validation.size(), 1);
  EXPECT_EQ(a.truncated, 0);
}

TEST(Labelled, IntegerLabelsAreOrderedAsNumbers) {
  auto tok = make_tokenizer("bert-wordpiece", dir());
  const auto t = write("n.jsonl", "{\"text\": \"good\", \"label\": 10}\n{\"text\": \"bad\", \"label\": 9}\n"
                                  "{\"text\": \"plot\", \"label\": \"2\"}\n");
  const auto v = write("nv.jsonl", "{\"text\": \"film\", \"label\": 9}\n");
  auto d = load_labelled(config(t, v), *tok, 128);
  EXPECT_EQ(d.labels, (std::vector<std::string>{"2", "9", "10"}));
  EXPECT_EQ(d.train.labels[0].item<std::int64_t>(), 2);
  EXPECT_EQ(d.validation.labels[0].item<std::int64_t>(), 1);
}

TEST(Labelled, TheSeededSplitIsByExampleAndRepeatable) {
  auto tok = make_tokenizer("bert-wordpiece", dir());
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += std::string("{\"text\": \"") + (i % 2 ? "good" : "bad") + " film\", \"label\": " +
            std::to_string(i % 2) + "}\n";
  auto c = config(write("s.jsonl", text), "");
  c.validation_fraction = 0.25;
  auto a = load_labelled(c, *tok, 128), b = load_labelled(c, *tok, 128);
  EXPECT_EQ(a.validation.size(), 10);
  EXPECT_EQ(a.train.size(), 30);
  EXPECT_TRUE(torch::equal(a.validation.labels, b.validation.labels));
  c.seed = 2;
  auto other = load_labelled(c, *tok, 128);
  EXPECT_EQ(other.validation.size(), 10);
  // Batches cover every training example once per epoch.
  auto data = std::make_shared<LabelledData>(std::move(a));
  LabelledBatches src(data, 10, 1);
  std::int64_t ones = 0;
  for (int s = 0; s < 3; ++s) ones += src.train(s).labels.sum().item<std::int64_t>();
  EXPECT_EQ(ones, data->train.labels.sum().item<std::int64_t>());
}

TEST(Labelled, BadInputIsNamedAtItsLine) {
  const auto good_val = write("ok.jsonl", "{\"text\": \"good\", \"label\": \"pos\"}\n");
  struct Case {
    std::string name, text, expect;
  };
  const std::vector<Case> cases = {
      {"notjson.jsonl", "{\"text\": \"good\", \"label\": \"pos\"}\n{text: good}\n", "notjson.jsonl:2: not a JSON object"},
      {"nolabel.jsonl", "{\"text\": \"good\"}\n", "nolabel.jsonl:1: missing field \"label\""},
      {"notext.jsonl", "{\"label\": 1}\n", "notext.jsonl:1: missing string field \"text\""},
      {"floatlabel.jsonl", "{\"text\": \"a\", \"label\": 0.5}\n", "floatlabel.jsonl:1: \"label\" is 0.5; it must be a string or an integer"},
      {"empty.jsonl", "\n\n", "has no examples"},
      {"header.csv", "sentence,label\ngood,pos\n", "header.csv:1: the header must name the columns text and label"},
      {"fields.csv", "text,label\ngood,pos,extra\n", "fields.csv:2: 3 fields, the header has 2"},
      {"open.csv", "text,label\n\"good,pos\n", "open.csv:2: a quoted field is not closed"},
  };
  for (const auto& c : cases)
    EXPECT_NE(error_of(config(write(c.name, c.text), good_val)).find(c.expect), std::string::npos)
        << c.name << ": " << error_of(config(write(c.name, c.text), good_val));
  const auto train = write("tr.jsonl", "{\"text\": \"good\", \"label\": \"pos\"}\n");
  EXPECT_NE(error_of(config(train, write("unseen.jsonl", "\n{\"text\": \"bad\", \"label\": \"neg\"}\n")))
                .find("unseen.jsonl:2: validation label \"neg\" never occurs in the training examples"),
            std::string::npos);
  EXPECT_NE(error_of(config(dir() + "/absent.jsonl", good_val)).find("does not exist"), std::string::npos);
  // Longer than seq: refused with truncate = false, cut and counted with truncate = true.
  const auto longer = write("long.jsonl", "{\"text\": \"good good good good good good good\", \"label\": \"pos\"}\n");
  auto c = config(longer, good_val);
  c.truncate = false;
  EXPECT_NE(error_of(c).find("long.jsonl:1: 9 tokens exceed seq 8"), std::string::npos) << error_of(c);
  c.truncate = true;
  auto tok = make_tokenizer("bert-wordpiece", dir());
  EXPECT_EQ(load_labelled(c, *tok, 128).truncated, 1);
  // A vocabulary larger than the model's: its ids would index past the embedding.
  EXPECT_NE([&] {
    try {
      load_labelled(config(train, good_val), *tok, 5);
    } catch (const sb::Error& e) {
      return std::string(e.message());
    }
    return std::string();
  }().find("tr.jsonl:1: token id 5 is outside the model's vocabulary of 5"),
            std::string::npos);
}

TEST(Labelled, AccuracyAndMacroF1ByHand) {
  // truth 0 0 1 1 2, predicted 0 1 1 1 0: label 0: TP 1 FP 1 FN 1 -> 0.5; label 1: TP 2 FP 1
  // FN 0 -> 0.8; label 2: TP 0 FP 0 FN 1 -> 0; label 3 absent from both: left out.
  auto t = torch::tensor({0, 0, 1, 1, 2}, torch::kLong), p = torch::tensor({0, 1, 1, 1, 0}, torch::kLong);
  auto s = classification_score(p, t, 4);
  EXPECT_DOUBLE_EQ(s.accuracy, 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(s.macro_f1, (0.5 + 0.8 + 0.0) / 3.0);
  EXPECT_EQ(s.examples, 5);
}
