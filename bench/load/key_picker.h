// Which key each check of the load generator names: uniform over `keys`,
// Zipf-skewed (rank 1 hottest, P(k) proportional to 1/k^s), or sequential
// (every key in turn, for filling a table or a steady churn of distinct
// keys). Seeded, so a run's key sequence is reproducible. One per client
// thread; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rlimit::bench {

enum class Skew { kUniform, kZipf, kSequential };

// "uniform", "zipf", "sequential"; false for anything else.
bool parse_skew(std::string_view text, Skew& out);
const char* skew_name(Skew skew);

// splitmix64: small, fast, good enough to pick keys.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  std::uint64_t state_;
};

// Zipf over ranks 1..n with exponent s > 0, by rejection-inversion
// (Hormann and Derflinger, 1996): O(1) per sample, no table, any n.
class ZipfSampler {
 public:
  ZipfSampler(std::uint64_t n, double s);
  std::uint64_t sample(Rng& rng) const;  // in [1, n]

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;

  std::uint64_t n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double threshold_;
};

class KeyPicker {
 public:
  // `start` offsets sequential walks (e.g. by client) so clients do not all
  // name the same key at once.
  KeyPicker(std::uint64_t keys, Skew skew, double zipf_s, std::uint64_t seed,
            std::uint64_t start = 0);
  std::uint64_t next();  // in [0, keys)
  std::uint64_t keys() const { return keys_; }

 private:
  std::uint64_t keys_;
  Skew skew_;
  Rng rng_;
  ZipfSampler zipf_;
  std::uint64_t cursor_;
};

// The descriptor value of key `index` ("bench-<index>"), written into `out`.
void key_name(std::uint64_t index, std::string& out);

}  // namespace rlimit::bench
