// A latency histogram for the load generator: log-linear buckets (each power
// of two split into 128 linear sub-buckets), so any recorded value is known
// to within 1/128 (0.8 %) however large, and a microsecond-scale latency
// (1-1000 us) is resolved to better than 10 ns. Fixed size (about 5,000
// counters), O(1) record, mergeable across client threads. Not thread-safe:
// one per thread, merged at the end.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rlimit::bench {

class Histogram {
 public:
  // Records one value in nanoseconds (values above ~2^40 ns are clamped).
  void record(std::uint64_t ns);
  void merge(const Histogram& other);

  std::uint64_t count() const { return count_; }
  std::uint64_t max_ns() const { return max_; }
  std::uint64_t min_ns() const { return count_ == 0 ? 0 : min_; }
  double mean_ns() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / count_; }
  // The value at quantile q in [0, 1], as the midpoint of its bucket (the
  // exact recorded value below 128 ns); 0 when empty.
  double quantile_ns(double q) const;
  double quantile_us(double q) const { return quantile_ns(q) / 1000.0; }

  // Bucket arithmetic, exposed for tests.
  static std::size_t index_of(std::uint64_t ns);
  static std::uint64_t lowest_of(std::size_t index);  // smallest value in the bucket
  static std::uint64_t width_of(std::size_t index);   // values in the bucket

  static constexpr int kSubBits = 7;  // 128 sub-buckets per power of two
  static constexpr int kMaxBits = 40;
  static constexpr std::size_t kBuckets = (kMaxBits - kSubBits + 1) << kSubBits;

 private:
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
};

}  // namespace rlimit::bench
