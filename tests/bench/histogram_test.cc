#include "load/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace rlimit::bench {
namespace {

TEST(HistogramTest, BucketsCoverEveryValueWithinOnePart128) {
  for (std::uint64_t v : {0ull, 1ull, 127ull, 128ull, 129ull, 255ull, 256ull, 1000ull, 12345ull,
                          999'999ull, 1ull << 30, (1ull << 40) - 1}) {
    const std::size_t i = Histogram::index_of(v);
    ASSERT_LT(i, Histogram::kBuckets);
    EXPECT_LE(Histogram::lowest_of(i), v) << v;
    EXPECT_LT(v, Histogram::lowest_of(i) + Histogram::width_of(i)) << v;
    EXPECT_LE(static_cast<double>(Histogram::width_of(i)), std::max(1.0, v / 128.0)) << v;
  }
  // Consecutive buckets tile the range with no gap and no overlap.
  for (std::size_t i = 0; i + 1 < Histogram::kBuckets; ++i) {
    ASSERT_EQ(Histogram::lowest_of(i) + Histogram::width_of(i), Histogram::lowest_of(i + 1)) << i;
  }
}

TEST(HistogramTest, QuantilesMatchSortedSamplesWithinABucket) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(std::log(12'000.0), 0.6);  // ~12 us
  std::vector<std::uint64_t> samples;
  Histogram a, b;
  for (int i = 0; i < 200'000; ++i) {
    const auto v = static_cast<std::uint64_t>(latency(rng));
    samples.push_back(v);
    (i % 2 == 0 ? a : b).record(v);
  }
  a.merge(b);
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(a.count(), samples.size());
  EXPECT_EQ(a.min_ns(), samples.front());
  EXPECT_EQ(a.max_ns(), samples.back());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * samples.size())) - 1;
    const double exact = static_cast<double>(samples[rank]);
    EXPECT_NEAR(a.quantile_ns(q), exact, exact / 128.0 + 1) << q;
  }
}

TEST(HistogramTest, EmptyAndSingle) {
  Histogram h;
  EXPECT_EQ(h.quantile_ns(0.5), 0);
  h.record(5000);
  EXPECT_EQ(h.quantile_ns(0.0), 5000);
  EXPECT_EQ(h.quantile_ns(1.0), 5000);
  EXPECT_DOUBLE_EQ(h.mean_ns(), 5000);
}

}  // namespace
}  // namespace rlimit::bench
