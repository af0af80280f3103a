// A seeded order-1 Markov source over a vocabulary, with its entropy rate computed exactly:
// the best loss (nats/token) any model can reach on it, so training can be judged against
// a known floor.
#pragma once
#include <cstdint>
#include <vector>

namespace sb::data {

struct MarkovConfig {
  std::int64_t vocab = 64;     // tokens 0 .. vocab-1 (plus `offset`)
  std::int64_t branching = 4;  // nonzero successors per token (sparse transition matrix)
  std::uint64_t seed = 1;
  std::int64_t offset = 0;     // added to every emitted token (e.g. past BERT's special ids)
};

class MarkovSource {
 public:
  explicit MarkovSource(MarkovConfig cfg);
  const MarkovConfig& config() const { return cfg_; }
  // sum_i pi_i * H(P_i) in nats: the cross-entropy floor of next-token prediction.
  double entropy_rate() const { return entropy_rate_; }
  const std::vector<double>& stationary() const { return pi_; }
  // Row i: successors and probabilities (sum 1).
  const std::vector<std::int32_t>& successors(std::int64_t i) const { return next_[i]; }
  const std::vector<double>& probabilities(std::int64_t i) const { return prob_[i]; }
  // n tokens starting from the stationary distribution, driven by the counter-based key.
  void sample(std::uint64_t key, std::int64_t n, std::int64_t* out) const;

 private:
  std::int64_t draw(const std::vector<double>& cdf, double u) const;
  MarkovConfig cfg_;
  std::vector<std::vector<std::int32_t>> next_;
  std::vector<std::vector<double>> prob_, cdf_;
  std::vector<double> pi_, pi_cdf_;
  double entropy_rate_ = 0;
};

}  // namespace sb::data
