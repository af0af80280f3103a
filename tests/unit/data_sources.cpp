// Data: Markov entropy rate, deterministic global batches and their slicing, MLM masking,
// .bin token files and UTF-8 text datasets.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"
#include "workloads/data/batches.h"
#include "workloads/data/markov.h"
#include "workloads/data/token_file.h"
#include "workloads/data/tokenizer.h"

using namespace sb::data;

TEST(Markov, EntropyRateOfAKnownChain) {
  // branching = vocab = 2: row i = {i+1 mod 2, i}; entropy rate from the stored matrix by hand.
  MarkovSource s({2, 2, 7, 0});
  const auto& pi = s.stationary();
  EXPECT_NEAR(pi[0] + pi[1], 1.0, 1e-12);
  // Stationarity: pi P = pi.
  double to0 = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      if (s.successors(i)[j] == 0) to0 += pi[i] * s.probabilities(i)[j];
  EXPECT_NEAR(to0, pi[0], 1e-12);
  double h = 0;
  for (int i = 0; i < 2; ++i)
    for (double p : s.probabilities(i)) h -= pi[i] * p * std::log(p);
  EXPECT_NEAR(s.entropy_rate(), h, 1e-12);
}

TEST(Markov, EmpiricalCrossEntropyMatchesEntropyRate) {
  // The true model's average -log p over sampled transitions estimates the entropy rate.
  MarkovSource s({50, 5, 3, 0});
  std::vector<std::int64_t> seq(200001);
  s.sample(99, static_cast<std::int64_t>(seq.size()), seq.data());
  double nll = 0;
  for (std::size_t t = 1; t < seq.size(); ++t) {
    const auto& nx = s.successors(seq[t - 1]);
    const auto k = std::find(nx.begin(), nx.end(), seq[t]) - nx.begin();
    ASSERT_LT(k, static_cast<long>(nx.size())) << "impossible transition sampled";
    nll -= std::log(s.probabilities(seq[t - 1])[k]);
  }
  EXPECT_NEAR(nll / (seq.size() - 1), s.entropy_rate(), 0.01);
}

TEST(Batches, DeterministicShiftedAndSliced) {
  MarkovLmBatches a({64, 4, 1, 0}, 8, 16, 3), b({64, 4, 1, 0}, 8, 16, 3);
  auto x = a.train(5), y = b.train(5);
  EXPECT_TRUE(torch::equal(x.input_ids, y.input_ids));
  EXPECT_FALSE(torch::equal(x.input_ids, a.train(6).input_ids));
  EXPECT_FALSE(torch::equal(x.input_ids, a.heldout(5).input_ids));
  EXPECT_TRUE(torch::equal(x.input_ids.narrow(1, 1, 15), x.targets.narrow(1, 0, 15)));  // next token
  auto r1 = rank_rows(x, 1, 4);
  EXPECT_TRUE(torch::equal(r1.input_ids, x.input_ids.narrow(0, 2, 2)));
  auto mb = split_rows(r1, 2);
  EXPECT_TRUE(torch::equal(mb[1].targets, x.targets.narrow(0, 3, 1)));
  try {
    rank_rows(x, 0, 3);
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("global batch of 8 rows does not split evenly over 3 ranks"),
              std::string::npos) << e.what();
  }
}

TEST(Mlm, MaskingRatesAndSpecialTokens) {
  MlmConfig c;
  c.pad_id = 0, c.cls_id = 1, c.sep_id = 2, c.mask_id = 3, c.random_low = 4, c.random_high = 1000;
  auto ids = torch::randint(4, 1000, {64, 512}, torch::kLong);
  ids.select(1, 0).fill_(1), ids.select(1, 511).fill_(2);
  auto orig = ids.clone();
  auto am = torch::ones_like(ids);
  am.narrow(1, 400, 111).zero_();  // padding region never chosen
  auto t = mlm_mask(ids, am, c, 17);
  auto chosen = t != -100;
  const double eligible = 64.0 * 398;
  const double n = chosen.sum().item<double>();
  EXPECT_NEAR(n / eligible, 0.15, 0.005);
  EXPECT_EQ(chosen.narrow(1, 400, 112).sum().item<std::int64_t>(), 0);
  EXPECT_EQ(chosen.select(1, 0).sum().item<std::int64_t>(), 0);
  EXPECT_TRUE(torch::equal(t.masked_select(chosen), orig.masked_select(chosen)));
  const double masked = (ids.masked_select(chosen) == 3).sum().item<double>();
  const double same = (ids.masked_select(chosen) == orig.masked_select(chosen)).sum().item<double>();
  EXPECT_NEAR(masked / n, 0.8, 0.01);
  EXPECT_NEAR(same / n, 0.1 + 0.8 * 0 + 0.1 / 996, 0.01);  // 10% kept (+ random hits of itself)
  EXPECT_TRUE(torch::equal(ids.masked_select(~chosen), orig.masked_select(~chosen)));
  auto again = orig.clone();
  EXPECT_TRUE(torch::equal(mlm_mask(again, am, c, 17), t));  // seeded
}

TEST(TokenFile, RoundTripAndValidation) {
  const std::string path = sb::test::tmp() + "tokens.bin";
  std::vector<std::int32_t> toks = {0, 1, 50256, 65535, 7};
  write_token_file(path, toks);
  EXPECT_EQ(read_token_file(path), toks);
  {  // header bytes as llm.c writes them
    std::ifstream f(path, std::ios::binary);
    std::int32_t h[3];
    f.read(reinterpret_cast<char*>(h), 12);
    EXPECT_EQ(h[0], 20240520);
    EXPECT_EQ(h[1], 1);
    EXPECT_EQ(h[2], 5);
  }
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    std::int32_t bad = 12345;
    f.write(reinterpret_cast<char*>(&bad), 4);
  }
  try {
    read_token_file(path);
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic 12345 is not 20240520"), std::string::npos) << e.what();
  }
}

TEST(TextDataset, Utf8CheckedAndTokenized) {
  const std::string path = sb::test::tmp() + "text.txt";
  { std::ofstream(path) << "h\xc3\xa9llo w\xc3\xb6rld, hello world. " << std::string(300, 'a'); }
  auto tok = make_tokenizer("byte");
  auto ids = read_text_tokens(path, *tok);
  EXPECT_EQ(ids.size(), 2 + 11 + 15 + 300u);
  EXPECT_EQ(tok->decode(ids).substr(0, 5), "h\xc3\xa9ll");
  TokenLmBatches b(std::make_shared<std::vector<std::int32_t>>(ids), 4, 8, 1);
  auto x = b.train(0);
  EXPECT_TRUE(torch::equal(x.input_ids.narrow(1, 1, 7), x.targets.narrow(1, 0, 7)));
  EXPECT_EQ(first_invalid_utf8("ab\xc3"), 2);
  EXPECT_EQ(first_invalid_utf8("a\xc0\xafz"), 1);  // overlong
  { std::ofstream(path) << "ok\xff"; }
  try {
    read_text_tokens(path, *tok);
    FAIL();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not valid UTF-8 at byte 2"), std::string::npos) << e.what();
  }
}
