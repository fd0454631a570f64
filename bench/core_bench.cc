// Google Benchmark for the pure core: decisions per second on one hot key and
// spread over many keys. Run: build/bin/rlimit-core-bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/limiter.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

RuleSet per_user_rules() {
  Rule rule;
  rule.name = "per-user";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"user", each});
  // Large enough that every check is allowed and charged: the full path.
  rule.params = {1'000'000'000, kUsPerSecond, 1'000'000'000};
  RuleSet rules;
  rules.rules.push_back(std::move(rule));
  return rules;
}

void BM_TokenBucketHotKey(benchmark::State& state) {
  Limiter limiter({}, per_user_rules());
  const Descriptor descriptors[] = {{"user", "alice"}};
  CheckOutput out;
  TimeUs now = 0;
  for (auto _ : state) {
    limiter.check({descriptors, 1, nullptr}, ++now, out);
    benchmark::DoNotOptimize(out.allowed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TokenBucketHotKey);

void BM_TokenBucketManyKeys(benchmark::State& state) {
  const auto key_count = static_cast<std::size_t>(state.range(0));
  Limiter limiter({.max_keys = key_count}, per_user_rules());
  std::vector<std::string> users;
  users.reserve(key_count);
  for (std::size_t i = 0; i < key_count; ++i) users.push_back("user-" + std::to_string(i));
  CheckOutput out;
  TimeUs now = 0;
  // Warm: every key exists, so the loop measures lookups, not inserts.
  for (const std::string& u : users) {
    const Descriptor d[] = {{"user", u}};
    limiter.check({d, 1, nullptr}, now, out);
  }
  std::size_t i = 0;
  std::uint64_t x = 88172645463325252ull;
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    i = x % key_count;
    const Descriptor d[] = {{"user", users[i]}};
    limiter.check({d, 1, nullptr}, ++now, out);
    benchmark::DoNotOptimize(out.allowed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TokenBucketManyKeys)->Arg(1'000'000);

}  // namespace
}  // namespace rlimit::core

BENCHMARK_MAIN();
