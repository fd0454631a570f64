// The IETF RateLimit fields (rlimit/ratelimit_headers.h), checked against the
// examples of draft-ietf-httpapi-ratelimit-headers and through the C ABI.
#include "rlimit/ratelimit_headers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rlimit/client.h"
#include "rlimit/rlimit.h"

namespace {

using rlimit::ratelimit_headers;
using rlimit::RateLimitHeaderItem;

constexpr std::int64_t kUsPerSecond = 1'000'000;

TEST(RateLimitHeadersTest, OnePolicyAsTheDraftWritesIt) {
  // The draft: RateLimit-Policy: "default";q=100;w=10 and RateLimit: "default";r=50;t=30
  // (its remaining/reset example is for the same policy name).
  const std::vector<RateLimitHeaderItem> items = {{.name = "default",
                                                   .limit = 100,
                                                   .period_ms = 10'000,
                                                   .remaining = 50,
                                                   .reset_after_us = 30 * kUsPerSecond}};
  const auto headers = ratelimit_headers(items, /*allowed=*/true, 0);
  EXPECT_EQ(headers.policy, R"("default";q=100;w=10)");
  EXPECT_EQ(headers.ratelimit, R"("default";r=50;t=30)");
  EXPECT_EQ(headers.retry_after, "");
}

TEST(RateLimitHeadersTest, SeveralRulesAreSeveralListMembers) {
  // The draft's two policies: "burst";q=100;w=60,"daily";q=1000;w=86400.
  const std::vector<RateLimitHeaderItem> items = {{.name = "burst",
                                                   .limit = 100,
                                                   .period_ms = 60'000,
                                                   .remaining = 0,
                                                   .reset_after_us = 12 * kUsPerSecond},
                                                  {.name = "daily",
                                                   .limit = 1000,
                                                   .period_ms = 86'400'000,
                                                   .remaining = 871,
                                                   .reset_after_us = 3600 * kUsPerSecond}};
  const auto headers = ratelimit_headers(items, /*allowed=*/false, 12 * kUsPerSecond);
  EXPECT_EQ(headers.policy, R"("burst";q=100;w=60, "daily";q=1000;w=86400)");
  EXPECT_EQ(headers.ratelimit, R"("burst";r=0;t=12, "daily";r=871;t=3600)");
  EXPECT_EQ(headers.retry_after, "12");
}

TEST(RateLimitHeadersTest, WaitsRoundUpToWholeSeconds) {
  const std::vector<RateLimitHeaderItem> items = {
      {.name = "r", .limit = 10, .period_ms = 1000, .remaining = 0, .reset_after_us = 1}};
  auto headers = ratelimit_headers(items, /*allowed=*/false, 100'000);
  EXPECT_EQ(headers.ratelimit, R"("r";r=0;t=1)");
  EXPECT_EQ(headers.retry_after, "1");
  headers = ratelimit_headers(items, /*allowed=*/false, 2 * kUsPerSecond + 1);
  EXPECT_EQ(headers.retry_after, "3");
  // A limit that never admits the request gives no Retry-After to wait for.
  headers = ratelimit_headers(items, /*allowed=*/false, -1);
  EXPECT_EQ(headers.retry_after, "");
  // An allowed request has none whatever the wait says.
  headers = ratelimit_headers(items, /*allowed=*/true, 5 * kUsPerSecond);
  EXPECT_EQ(headers.retry_after, "");
}

TEST(RateLimitHeadersTest, PeriodsBelowASecondKeepTheRateInWholeSeconds) {
  std::vector<RateLimitHeaderItem> items = {
      {.name = "quarter", .limit = 10, .period_ms = 250, .remaining = 3, .reset_after_us = 0}};
  EXPECT_EQ(ratelimit_headers(items, true, 0).policy, R"("quarter";q=40;w=1)");
  items[0] = {.name = "odd", .limit = 1, .period_ms = 1500};
  EXPECT_EQ(ratelimit_headers(items, true, 0).policy, R"("odd";q=2;w=3)");
  // No whole window up to 1000 s: the per-second rate, rounded down.
  items[0] = {.name = "prime", .limit = 1000, .period_ms = 1009};
  EXPECT_EQ(ratelimit_headers(items, true, 0).policy, R"("prime";q=991;w=1)");
  // A concurrency limit has no window and no reset.
  items[0] = {.name = "slots", .limit = 4, .period_ms = 0, .remaining = 1, .reset_after_us = 5};
  EXPECT_EQ(ratelimit_headers(items, true, 0).policy, R"("slots";q=4;qu="concurrent-requests")");
  EXPECT_EQ(ratelimit_headers(items, true, 0).ratelimit, R"("slots";r=1)");
  // A limit that never refills has no reset.
  items[0] = {.name = "once", .limit = 0, .period_ms = 1000, .remaining = 3, .reset_after_us = -1};
  EXPECT_EQ(ratelimit_headers(items, true, 0).ratelimit, R"("once";r=3)");
}

TEST(RateLimitHeadersTest, NamesAreEscapedAndIntegersClamped) {
  const std::vector<RateLimitHeaderItem> items = {{.name = "a\"b\\c\x01\xff",
                                                   .limit = std::uint64_t{1} << 60,
                                                   .period_ms = 1000,
                                                   .remaining = std::uint64_t{1} << 60,
                                                   .reset_after_us = 0}};
  const auto headers = ratelimit_headers(items, true, 0);
  EXPECT_EQ(headers.policy, R"("a\"b\\c??";q=999999999999999;w=1)");
  EXPECT_EQ(headers.ratelimit, R"("a\"b\\c??";r=999999999999999;t=0)");
}

TEST(RateLimitHeadersTest, NoRulesNoFields) {
  const auto headers = ratelimit_headers(std::span<const RateLimitHeaderItem>{}, true, 0);
  EXPECT_EQ(headers.policy, "");
  EXPECT_EQ(headers.ratelimit, "");
}

TEST(RateLimitHeadersTest, ADecisionGivesTheSameFields) {
  rlimit::Decision decision;
  decision.allowed = false;
  rlimit::RuleStatus rule;
  rule.name = "per-user";
  rule.limit = 10;
  rule.period_ms = 1000;
  rule.remaining = 0;
  rule.retry_after_us = 250'000;
  rule.reset_after_us = 900'000;
  decision.rules.push_back(rule);
  rlimit::RuleStatus slots;
  slots.name = "exports";
  slots.algorithm = "concurrency";
  slots.limit = 4;
  slots.period_ms = 300'000;  // the lease TTL, not a window
  slots.remaining = 2;
  slots.allowed = true;
  decision.rules.push_back(slots);
  const auto headers = ratelimit_headers(decision);
  EXPECT_EQ(headers.policy, R"("per-user";q=10;w=1, "exports";q=4;qu="concurrent-requests")");
  EXPECT_EQ(headers.ratelimit, R"("per-user";r=0;t=1, "exports";r=2)");
  EXPECT_EQ(headers.retry_after, "1");
}

TEST(RateLimitHeadersTest, TheCAbiWritesTheSameTextAndRefusesToCut) {
  rlimit_rule_status_t rules[2] = {};
  std::strcpy(rules[0].name, "burst");
  rules[0].limit = 100;
  rules[0].period_ms = 60'000;
  rules[0].remaining = 0;
  rules[0].reset_after_us = 12 * kUsPerSecond;
  std::strcpy(rules[1].name, "daily");
  rules[1].limit = 1000;
  rules[1].period_ms = 86'400'000;
  rules[1].remaining = 871;
  rules[1].reset_after_us = 3600 * kUsPerSecond;
  char policy[128];
  char ratelimit[128];
  char retry_after[16];
  ASSERT_EQ(rlimit_ratelimit_headers(rules, 2, 0, 12 * kUsPerSecond, policy, sizeof policy,
                                     ratelimit, sizeof ratelimit, retry_after, sizeof retry_after),
            RLIMIT_OK);
  EXPECT_STREQ(policy, R"("burst";q=100;w=60, "daily";q=1000;w=86400)");
  EXPECT_STREQ(ratelimit, R"("burst";r=0;t=12, "daily";r=871;t=3600)");
  EXPECT_STREQ(retry_after, "12");

  char small[8];
  EXPECT_EQ(rlimit_ratelimit_headers(rules, 2, 0, 0, small, sizeof small, nullptr, 0, nullptr, 0),
            RLIMIT_ERR_TRUNCATED);
  EXPECT_STREQ(small, "");
  EXPECT_EQ(rlimit_ratelimit_headers(nullptr, 1, 1, 0, nullptr, 0, nullptr, 0, nullptr, 0),
            RLIMIT_ERR_INVALID_ARGUMENT);
}

}  // namespace
