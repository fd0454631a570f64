// The simulator's random generator: SplitMix64, small (8 bytes of state) so
// every arrival stream can own one, and fast enough for millions of draws.
// Satisfies UniformRandomBitGenerator, so the std distributions work with it.
#pragma once

#include <cstdint>
#include <limits>

namespace rlimit::sim {

class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed = 0) : state_(seed) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  result_type operator()() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// Derives independent seeds for the parts of a run from the run's seed.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
  Rng rng(seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full));
  rng();
  return rng();
}

}  // namespace rlimit::sim
