// Text corpora (the Realdata issue): tokenized once into train / held-out token files split by
// document, reused from the cache while sources and tokenizer are unchanged, re-made when a
// source changes; errors name the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/batches.h"
#include "workloads/data/token_file.h"

using namespace sb::data;
namespace fs = std::filesystem;

namespace {
std::string fresh(const std::string& name) {
  const std::string d = sb::test::tmp() + "corpus_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
std::string message(const TextCorpusConfig& c) {
  try {
    prepare_text_corpus(c);
  } catch (const sb::Error& e) {
    return e.message();
  }
  return "";
}
}  // namespace

TEST(TextCorpus, AFolderIsSplitByFileAndCached) {
  const std::string src = fresh("src"), cache = fresh("cache");
  std::int64_t bytes = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string text = "document " + std::to_string(i) + " says hello\n";
    std::ofstream(src + "/doc" + std::to_string(i) + ".txt") << text;
    bytes += static_cast<std::int64_t>(text.size());
  }
  std::ofstream(src + "/notes.md") << "not a .txt: ignored";
  TextCorpusConfig c{src, cache, "byte", "", 0.2, 1};
  const auto a = prepare_text_corpus(c);
  EXPECT_FALSE(a.reused);
  EXPECT_EQ(a.documents, 5);
  EXPECT_EQ(a.heldout_documents, 1);
  EXPECT_EQ(a.train_tokens + a.heldout_tokens, bytes);  // byte tokenizer: one id per byte
  EXPECT_EQ(static_cast<std::int64_t>(read_token_file(a.train_bin).size()), a.train_tokens);
  EXPECT_EQ(static_cast<std::int64_t>(read_token_file(a.heldout_bin).size()), a.heldout_tokens);
  EXPECT_EQ(a.heldout_tokens, 22);  // one whole document: "document N says hello\n"
  const auto b = prepare_text_corpus(c);
  EXPECT_TRUE(b.reused);
  EXPECT_EQ(b.key, a.key);
  EXPECT_EQ(b.train_tokens, a.train_tokens);
  std::ofstream(src + "/doc3.txt") << "changed\n";  // another source: another key
  const auto d = prepare_text_corpus(c);
  EXPECT_FALSE(d.reused);
  EXPECT_NE(d.key, a.key);
  c.seed = 2;  // another split: another key
  EXPECT_NE(prepare_text_corpus(c).key, d.key);
}

TEST(TextCorpus, AFilesDocumentsAreItsParagraphs) {
  const std::string src = fresh("para"), cache = fresh("para_cache");
  std::ofstream(src + "/book.txt") << "one\nstill one\n\n  \ntwo\n\n\nthree\n";
  TextCorpusConfig c{src + "/book.txt", cache, "byte", "", 0.34, 1};
  const auto a = prepare_text_corpus(c);
  EXPECT_EQ(a.documents, 3);
  EXPECT_EQ(a.heldout_documents, 1);
}

TEST(TextCorpus, BadSourcesAreNamed) {
  const std::string cache = fresh("bad_cache");
  TextCorpusConfig c{cache + "/absent.txt", cache, "byte", "", 0.1, 1};
  EXPECT_NE(message(c).find("does not exist"), std::string::npos) << message(c);
  const std::string one = fresh("one");
  std::ofstream(one + "/a.txt") << "a single paragraph\nof two lines\n";
  c.source = one + "/a.txt";
  EXPECT_NE(message(c).find("has 1 document(s); a held-out split by document needs at least 2"),
            std::string::npos) << message(c);
  std::ofstream(one + "/a.txt") << "ok\n\nbad \xff byte\n";
  EXPECT_NE(message(c).find("a.txt' is not valid UTF-8 at byte 8"), std::string::npos) << message(c);
  c.source = fresh("empty_folder");
  EXPECT_NE(message(c).find("holds no .txt files"), std::string::npos) << message(c);
}

// BERT MLM rows from token streams: [CLS] + T-2 consecutive stream tokens + [SEP], masked
// positions' targets are the original tokens, training rows only from the training stream.
TEST(TextCorpus, MlmRowsComeFromTheirStream) {
  std::vector<std::int32_t> train, held;
  for (int i = 0; i < 400; ++i) train.push_back(10 + i % 50), held.push_back(70 + i % 50);
  MlmConfig mlm;
  mlm.pad_id = 0, mlm.cls_id = 2, mlm.sep_id = 3, mlm.mask_id = 4, mlm.random_low = 5,
  mlm.random_high = 120;
  TokenMlmBatches src(train, held, mlm, 4, 16, 1);
  for (int which = 0; which < 2; ++which) {
    auto b = which ? src.heldout(0) : src.train(0);
    const std::int64_t lo = which ? 70 : 10;
    EXPECT_TRUE((b.input_ids.select(1, 0) == 2).all().item<bool>());
    EXPECT_TRUE((b.input_ids.select(1, 15) == 3).all().item<bool>());
    auto t = b.targets.narrow(1, 1, 14), masked = t != -100;
    EXPECT_GT(masked.sum().item<std::int64_t>(), 0);
    // Every target is a token of its own stream, never of the other.
    EXPECT_TRUE(((t >= lo) & (t < lo + 50) | ~masked).all().item<bool>());
    EXPECT_TRUE((b.targets.select(1, 0) == -100).all().item<bool>());
  }
}
