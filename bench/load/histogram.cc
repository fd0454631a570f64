#include "load/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace rlimit::bench {

std::size_t Histogram::index_of(std::uint64_t ns) {
  constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  ns = std::min(ns, (std::uint64_t{1} << kMaxBits) - 1);
  if (ns < kSub) return static_cast<std::size_t>(ns);  // exact below 128
  // The top bit picks the range; the next kSubBits bits the sub-bucket.
  const int top = std::bit_width(ns) - 1;  // >= kSubBits
  const int shift = top - kSubBits;
  const std::uint64_t sub = (ns >> shift) - kSub;  // in [0, 128)
  return static_cast<std::size_t>(((shift + 1) << kSubBits) + sub);
}

std::uint64_t Histogram::lowest_of(std::size_t index) {
  constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  if (index < kSub) return index;
  const auto range = static_cast<int>(index >> kSubBits);  // shift + 1
  const std::uint64_t sub = index & (kSub - 1);
  return (kSub + sub) << (range - 1);
}

std::uint64_t Histogram::width_of(std::size_t index) {
  constexpr std::size_t kSub = std::size_t{1} << kSubBits;
  if (index < kSub) return 1;
  return std::uint64_t{1} << ((index >> kSubBits) - 1);
}

void Histogram::record(std::uint64_t ns) {
  ++counts_[index_of(ns)];
  ++count_;
  sum_ += ns;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
}

void Histogram::merge(const Histogram& other) {
  for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double Histogram::quantile_ns(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the sample at q (1-based), as in a sorted array of samples.
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const std::uint64_t width = width_of(i);
      const double mid = static_cast<double>(lowest_of(i)) +
                         (width == 1 ? 0.0 : static_cast<double>(width - 1) / 2.0);
      // Never report beyond what was seen.
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

}  // namespace rlimit::bench
