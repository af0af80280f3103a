// Markov source: random sparse transitions, stationary distribution, exact entropy rate.
#include "workloads/data/markov.h"

#include <algorithm>
#include <cmath>

#include "harness/core/check.h"
#include "workloads/data/rng.h"

namespace sb::data {

MarkovSource::MarkovSource(MarkovConfig cfg) : cfg_(cfg) {
  const std::int64_t V = cfg_.vocab, k = cfg_.branching;
  SB_CHECK(V >= 2, "markov vocab must be at least 2, got {}", V);
  SB_CHECK(k >= 1 && k <= V, "markov branching must be in [1, vocab={}], got {}", V, k);
  Rng rng(cfg_.seed, 0x4d61726b6f76ULL);
  next_.resize(V), prob_.resize(V), cdf_.resize(V);
  for (std::int64_t i = 0; i < V; ++i) {
    // Successor (i + 1) mod V is always present: the chain is irreducible, so the
    // stationary distribution is unique. The other k-1 successors are random and distinct.
    std::vector<std::int32_t> s = {static_cast<std::int32_t>((i + 1) % V)};
    while (static_cast<std::int64_t>(s.size()) < k) {
      auto c = static_cast<std::int32_t>(rng.below(V));
      if (std::find(s.begin(), s.end(), c) == s.end()) s.push_back(c);
    }
    // Weights u^2 spread the probabilities (some likely, some rare) for a nontrivial floor.
    std::vector<double> w(k);
    double sum = 0;
    for (auto& x : w) sum += (x = 0.05 + rng.uniform() * rng.uniform());
    double acc = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      w[j] /= sum;
      acc += w[j];
      cdf_[i].push_back(acc);
    }
    cdf_[i].back() = 1.0;
    next_[i] = std::move(s);
    prob_[i] = std::move(w);
  }
  // Stationary distribution by power iteration on the lazy chain (P + I) / 2: same fixed
  // point, and aperiodic, so it converges.
  std::vector<double> pi(V, 1.0 / static_cast<double>(V)), nxt(V);
  for (int it = 0; it < 100000; ++it) {
    for (std::int64_t i = 0; i < V; ++i) nxt[i] = 0.5 * pi[i];
    for (std::int64_t i = 0; i < V; ++i)
      for (std::int64_t j = 0; j < k; ++j) nxt[next_[i][j]] += 0.5 * pi[i] * prob_[i][j];
    double diff = 0;
    for (std::int64_t i = 0; i < V; ++i) diff += std::abs(nxt[i] - pi[i]);
    pi.swap(nxt);
    if (diff < 1e-15) break;
  }
  pi_ = pi;
  double acc = 0;
  for (std::int64_t i = 0; i < V; ++i) {
    double h = 0;
    for (double p : prob_[i]) h -= p * std::log(p);
    entropy_rate_ += pi_[i] * h;
    pi_cdf_.push_back(acc += pi_[i]);
  }
  pi_cdf_.back() = 1.0;
}

std::int64_t MarkovSource::draw(const std::vector<double>& cdf, double u) const {
  return std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
}

void MarkovSource::sample(std::uint64_t key, std::int64_t n, std::int64_t* out) const {
  Rng rng(key);
  std::int64_t s = draw(pi_cdf_, rng.uniform());
  for (std::int64_t t = 0; t < n; ++t) {
    if (t > 0) s = next_[s][draw(cdf_[s], rng.uniform())];
    out[t] = s + cfg_.offset;
  }
}

}  // namespace sb::data
