// Counter-based random numbers for data: a value depends only on (seed, stream, indices),
// so any rank can produce any row of any step without replaying the ones before it.
#pragma once
#include <cstdint>

namespace sb::data {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A small sequential generator (splitmix64 stream) seeded from a key.
class Rng {
 public:
  explicit Rng(std::uint64_t key) : state_(splitmix64(key)) {}
  Rng(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0)
      : Rng(splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d)) {}
  std::uint64_t next() { return splitmix64(state_ += 0x9e3779b97f4a7c15ULL); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }  // bias < n / 2^64

 private:
  std::uint64_t state_;
};

}  // namespace sb::data
