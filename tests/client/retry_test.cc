// Backoff (full jitter, retry_after floor, limits) and check_with_retry.
#include "rlimit/retry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "fake_server.h"

namespace rlimit {
namespace {

using std::chrono::microseconds;

CheckRequest alice_request() {
  CheckRequest request;
  request.descriptors = {{"user", "alice"}};
  return request;
}

RetryPolicy policy(std::int64_t base_us, std::int64_t cap_us, std::uint32_t max_retries) {
  return RetryPolicy{microseconds(base_us), microseconds(cap_us), max_retries};
}

TEST(BackoffTest, DelaysStayWithinTheExponentialCeiling) {
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Backoff backoff(policy(1000, 20'000, 8), seed);
    for (std::uint32_t attempt = 0; attempt < 8; ++attempt) {
      const auto delay = backoff.next_delay(0);
      ASSERT_TRUE(delay.has_value());
      const std::int64_t ceiling = std::min<std::int64_t>(20'000, 1000LL << attempt);
      EXPECT_GE(delay->count(), 0);
      EXPECT_LE(delay->count(), ceiling) << "attempt " << attempt;
    }
  }
}

TEST(BackoffTest, JitterCoversTheWholeRange) {
  // Full jitter: the first delay is uniform in [0, base]; 2000 draws land in
  // both the bottom and top tenth with overwhelming probability.
  std::int64_t lowest = 1'000'000, highest = -1;
  Backoff backoff(policy(1000, 1'000'000, 1), 42);
  for (int i = 0; i < 2000; ++i) {
    backoff.reset();
    const auto delay = backoff.next_delay(0);
    ASSERT_TRUE(delay.has_value());
    lowest = std::min(lowest, delay->count());
    highest = std::max(highest, delay->count());
  }
  EXPECT_LT(lowest, 100);
  EXPECT_GT(highest, 900);
  EXPECT_LE(highest, 1000);
}

TEST(BackoffTest, LaterAttemptsReachTheCap) {
  std::int64_t highest = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Backoff backoff(policy(1000, 5000, 10), seed);
    for (int i = 0; i < 9; ++i) backoff.next_delay(0);
    highest = std::max(highest, backoff.next_delay(0)->count());
  }
  EXPECT_GT(highest, 4500);
  EXPECT_LE(highest, 5000);
}

TEST(BackoffTest, NeverShorterThanRetryAfter) {
  Backoff backoff(policy(1000, 1'000'000, 50), 7);
  for (int i = 0; i < 50; ++i) {
    const auto delay = backoff.next_delay(30'000);
    ASSERT_TRUE(delay.has_value());
    EXPECT_GE(delay->count(), 30'000);
  }
}

TEST(BackoffTest, StopsAfterMaxRetriesUntilReset) {
  Backoff backoff(policy(1000, 1'000'000, 3), 1);
  EXPECT_TRUE(backoff.next_delay(0).has_value());
  EXPECT_TRUE(backoff.next_delay(0).has_value());
  EXPECT_TRUE(backoff.next_delay(0).has_value());
  EXPECT_EQ(backoff.retries(), 3u);
  EXPECT_FALSE(backoff.next_delay(0).has_value());
  backoff.reset();
  EXPECT_EQ(backoff.retries(), 0u);
  EXPECT_TRUE(backoff.next_delay(0).has_value());
}

TEST(BackoffTest, GivesUpWhenTheDaemonSaysNeverOrTooLong) {
  Backoff backoff(policy(1000, 10'000, 5), 1);
  EXPECT_FALSE(backoff.next_delay(-1).has_value());
  EXPECT_FALSE(backoff.next_delay(10'001).has_value());
  EXPECT_TRUE(backoff.next_delay(10'000).has_value());
}

TEST(BackoffTest, ZeroRetriesMeansNone) {
  Backoff backoff(policy(1000, 10'000, 0), 1);
  EXPECT_FALSE(backoff.next_delay(0).has_value());
}

TEST(CheckWithRetryTest, RetriesDenialsHonouringRetryAfter) {
  std::atomic<int> calls{0};
  testing::FakeServer server([&](const v1::Request&, v1::Response& response) {
    const bool allow = ++calls >= 3;
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(allow);
    v1::RuleResult* rule = result->add_rules();
    rule->set_name("r");
    rule->set_allowed(allow);
    rule->set_retry_after_us(allow ? 0 : 4000);
    return testing::FakeServer::Action::kReply;
  });
  ClientOptions options;
  options.socket_path = server.socket_path();
  options.timeout_ms = 1000;
  Client client(options);
  Backoff backoff(policy(100, 1'000'000, 5), 3);
  std::vector<microseconds> slept;
  const Decision d = check_with_retry(client, alice_request(), backoff,
                                      [&](microseconds delay) { slept.push_back(delay); });
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(slept.size(), 2u);
  for (microseconds delay : slept) EXPECT_GE(delay.count(), 4000);
  EXPECT_EQ(backoff.retries(), 2u);
}

TEST(CheckWithRetryTest, StopsOnNever) {
  testing::FakeServer server([&](const v1::Request&, v1::Response& response) {
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(false);
    v1::RuleResult* rule = result->add_rules();
    rule->set_allowed(false);
    rule->set_retry_after_us(-1);
    return testing::FakeServer::Action::kReply;
  });
  ClientOptions options;
  options.socket_path = server.socket_path();
  options.timeout_ms = 1000;
  Client client(options);
  Backoff backoff(policy(100, 1'000'000, 5), 3);
  int sleeps = 0;
  const Decision d =
      check_with_retry(client, alice_request(), backoff, [&](microseconds) { ++sleeps; });
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(sleeps, 0);
  EXPECT_EQ(server.frames(), 1u);
}

}  // namespace
}  // namespace rlimit
