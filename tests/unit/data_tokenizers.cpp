// Tokenizers: byte-level, GPT-2 pre-tokenization, byte-level BPE on a tiny vocabulary with
// known merges in both the Hugging Face and the OpenAI file layouts.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/tokenizer.h"

using namespace sb::data;

TEST(ByteTokenizer, Lossless) {
  auto t = make_tokenizer("byte");
  const std::string s = "a\xc3\xa9\n\x01\xff";
  auto ids = t->encode(s);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{97, 0xc3, 0xa9, 10, 1, 255}));
  EXPECT_EQ(t->decode(ids), s);
}

TEST(Gpt2Pretokenize, MatchesTheRegexOnTrickyText) {
  auto p = gpt2_pretokenize("I'm  going\n\nto 2024 na\xc3\xafve's caf\xc3\xa9!!  ");
  EXPECT_EQ(p, (std::vector<std::string>{"I", "'m", " ", " going", "\n", "\n", "to", " 2024", " na\xc3\xafve", "'s",
                                         " caf\xc3\xa9", "!!", "  "}));
  EXPECT_EQ(gpt2_pretokenize("x 'Quote' a1"), (std::vector<std::string>{"x", " '", "Quote", "'", " a", "1"}));
  EXPECT_EQ(gpt2_pretokenize("\xce\xb1\xce\xb2 \xe4\xb8\xad"),  // Greek and CJK letters
            (std::vector<std::string>{"\xce\xb1\xce\xb2", " \xe4\xb8\xad"}));
}

namespace {

// Tiny vocabulary: byte symbols (Ġ = U+0120 is the space byte) plus merged tokens.
const char* kVocab = R"({"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7, "!": 8,
  "he": 9, "ll": 10, "hell": 11, "hello": 12, "\u0120hello": 13, "wo": 14, "rl": 15, "worl": 16,
  "\u010a": 17, "\u00c3": 18, "\u00a9": 19})";
const char* kMerges = "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 hello\nw o\nr l\nwo rl\n";

std::string write_dir(const std::string& name, const char* vocab_file, const char* merges_file) {
  const std::string dir = sb::test::tmp() + name;
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + vocab_file) << kVocab;
  std::ofstream(dir + "/" + merges_file) << kMerges;
  return dir;
}

}  // namespace

TEST(Gpt2Bpe, KnownMergesBothLayouts) {
  for (auto dir : {write_dir("hf", "vocab.json", "merges.txt"), write_dir("openai", "encoder.json", "vocab.bpe")}) {
    auto t = make_tokenizer("gpt2-bpe", dir);
    EXPECT_EQ(t->vocab_size(), 20);
    // "hello" -> he, ll -> hell -> hello; " hello" -> Ġ + hello -> Ġhello;
    // " world" -> Ġ wo rl d -> Ġ worl d (no "Ġ worl" merge); "\n" -> Ċ.
    auto ids = t->encode("hello hello world!\n");
    EXPECT_EQ(ids, (std::vector<std::int32_t>{12, 13, 4, 16, 7, 8, 17}));
    EXPECT_EQ(t->decode(ids), "hello hello world!\n");
    EXPECT_EQ(t->encode("\xc3\xa9"), (std::vector<std::int32_t>{18, 19}));  // é: bytes C3 A9 -> Ã ©
    EXPECT_EQ(t->decode({18, 19}), "\xc3\xa9");
  }
}

TEST(Gpt2Bpe, Errors) {
  try {
    make_tokenizer("gpt2-bpe", sb::test::tmp() + "nowhere");
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds neither vocab.json + merges.txt"), std::string::npos) << e.what();
  }
  auto t = make_tokenizer("gpt2-bpe", write_dir("hf2", "vocab.json", "merges.txt"));
  try {
    t->encode("hex");  // 'x' is not in the tiny vocabulary
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbol 'x' (from 'hex') is not in the vocabulary"), std::string::npos)
        << e.what();
  }
  try {
    make_tokenizer("sentencepiece");
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown tokenizer 'sentencepiece'; known: byte, gpt2-bpe"),
              std::string::npos);
  }
}

namespace {
// A vocab.txt in a fresh folder: one token per line, ids by line.
std::string wordpiece_dir(const std::vector<std::string>& tokens) {
  static int n = 0;
  const std::string dir = sb::test::tmp() + "wordpiece" + std::to_string(n++);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream f(dir + "/vocab.txt");
  for (const auto& t : tokens) f << t << "\n";
  return dir;
}
std::vector<std::string> pieces(const std::vector<std::int32_t>& ids,
                                const std::vector<std::string>& vocab) {
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(vocab.at(static_cast<std::size_t>(id)));
  return out;
}
}  // namespace

// The cases of google-research/bert's tokenization_test.py (basic tokenizer lower-casing,
// accents, Chinese characters, punctuation; WordPiece longest match and [UNK]).
TEST(BertWordPiece, TheReferenceCases) {
  const std::vector<std::string> vocab = {
      "[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ",",
      "hello", "!", "how", "are", "you", "?", "ah", "\u535A", "\u63A8", "zz", "low", "##er",
      "allo", "##ws"};
  const auto tok = make_tokenizer("bert-wordpiece", wordpiece_dir(vocab));
  EXPECT_EQ(tok->vocab_size(), static_cast<std::int64_t>(vocab.size()));
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(tok->encode("unwanted running"), vocab),
            (V{"un", "##want", "##ed", "runn", "##ing"}));
  EXPECT_EQ(pieces(tok->encode("unwantedX running"), vocab), (V{"[UNK]", "runn", "##ing"}));
  EXPECT_EQ(pieces(tok->encode(" \tHeLLo!how  \n Are yoU?  "), vocab),
            (V{"hello", "!", "how", "are", "you", "?"}));
  EXPECT_EQ(pieces(tok->encode("H\u00E9llo"), vocab), (V{"hello"}));            // accent
  EXPECT_EQ(pieces(tok->encode("He\u0301llo"), vocab), (V{"hello"}));           // decomposed
  EXPECT_EQ(pieces(tok->encode("ah\u535A\u63A8zz"), vocab), (V{"ah", "\u535A", "\u63A8", "zz"}));
  EXPECT_EQ(pieces(tok->encode("LOWER, allows"), vocab), (V{"low", "##er", ",", "allo", "##ws"}));
  EXPECT_EQ(pieces(tok->encode("hello\x01\xef\xbf\xbd you"), vocab), (V{"hello", "you"}));  // control, U+FFFD
  EXPECT_TRUE(tok->encode("").empty());
  // A word over 100 characters is [UNK] even when it could be covered.
  std::string long_word = "want";
  while (long_word.size() <= 100) long_word += "ed";
  EXPECT_EQ(pieces(tok->encode(long_word + " you"), vocab), (V{"[UNK]", "you"}));
  EXPECT_EQ(tok->decode(tok->encode("unwanted running")), "unwanted running");
}

// Cleaning as the reference's BasicTokenizer._clean_text does, then its whitespace split and
// punctuation: NUL, U+FFFD and every category C* character (controls, format characters
// such as the soft hyphen and zero-width joiner, private use, unassigned) are dropped without
// splitting the word; Zs spaces (no-break, ideographic, ...) and U+2028/2029 split; variation
// selectors (Mn) are dropped; symbols (S*) stay in their word, punctuation (P*) does not.
// Expected pieces from transformers' Python BERT tokenizer: tests/data/wordpiece_reference.py
// prints these lines (and says where transformers' fast tokenizer differs).
TEST(BertWordPiece, CleaningAsTheReference) {
  const std::vector<std::string> vocab = {
      "[UNK]", "[CLS]", "[SEP]", "hello", "world", "you", "soft", "##ware", "\u20AC", "##5",
      "\u00A9", "##2024", "\u2014", "\u201C", "\u201D", "\u00BF", "ok", "?", "!", "\u2764",
      "hi", "bob", ",", "the", "costs", ".", "thanks", "a"};
  const auto tok = make_tokenizer("bert-wordpiece", wordpiece_dir(vocab));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {std::string("hello\u00A0world", 12), {"hello", "world"}},
      {std::string("soft\u00ADware", 10), {"soft", "##ware"}},
      {std::string("soft\u200Dware", 11), {"soft", "##ware"}},
      {std::string("soft\u2060ware", 11), {"soft", "##ware"}},
      {std::string("\uFEFFhello", 8), {"hello"}},
      {std::string("soft\013ware", 9), {"soft", "##ware"}},
      {std::string("soft\014ware", 9), {"soft", "##ware"}},
      {std::string("soft\u0085ware", 10), {"soft", "##ware"}},
      {std::string("soft\037ware", 9), {"soft", "##ware"}},
      {std::string("soft\177ware", 9), {"soft", "##ware"}},
      {std::string("hello\u2028world\u2029you", 19), {"hello", "world", "you"}},
      {std::string("hello\u3000world\u202Fyou\u2007ok\u1680a", 28), {"hello", "world", "you", "ok", "a"}},
      {std::string("soft\uE000ware", 11), {"soft", "##ware"}},
      {std::string("soft\u0378ware", 10), {"soft", "##ware"}},  // the fast tokenizer: ['[UNK]']
      {std::string("soft\U000E0001ware", 12), {"soft", "##ware"}},
      {std::string("\u2764\uFE0F you", 10), {"\u2764", "you"}},
      {std::string("\u20AC5 \u00A92024", 11), {"\u20AC", "##5", "\u00A9", "##2024"}},
      {std::string("hello\u2014world \u201Cyou\u201D", 23), {"hello", "\u2014", "world", "\u201C", "you", "\u201D"}},
      {std::string("\u00BFok?", 5), {"\u00BF", "ok", "?"}},
      {std::string("soft\000ware", 9), {"soft", "##ware"}},
      {std::string("soft\uFFFDware", 11), {"soft", "##ware"}},
      {std::string("Hi\u00A0Bob,\015\012\015\012The soft\u00ADware costs \u20AC5.\u200B Thanks!\u00A0\u2764\uFE0F", 57), {"hi", "bob", ",", "the", "soft", "##ware", "costs", "\u20AC", "##5", ".", "thanks", "!", "\u2764"}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(pieces(tok->encode(text), vocab), want) << text;
}

TEST(BertWordPiece, Errors) {
  auto msg = [](const std::string& dir) {
    try {
      make_tokenizer("bert-wordpiece", dir);
    } catch (const sb::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg("/nonexistent").find("cannot open '/nonexistent/vocab.txt'"), std::string::npos);
  EXPECT_NE(msg(wordpiece_dir({"a", "b"})).find("lacks the token [UNK]"), std::string::npos);
}
