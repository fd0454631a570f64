// The Limiter running every algorithm a rule can select: each through the
// same check path as the token bucket, all-or-nothing across algorithms,
// the check modes (peek, reserve), throttle modes, leases, reset, the shared
// key budget, the sweep and remote charges.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/limiter.h"
#include "core/rule_state.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

ValueMatcher each() {
  ValueMatcher m;
  m.each = true;
  return m;
}

Rule rule_of(std::string name, Algorithm algorithm, std::int64_t limit, std::int64_t period_us,
             std::int64_t burst, AlgorithmOptions options = {}) {
  Rule rule;
  rule.name = std::move(name);
  rule.match = {{"user", each()}};
  rule.params = {limit, period_us, burst};
  rule.algorithm = algorithm;
  rule.options = options;
  return rule;
}

Limiter limiter_of(std::vector<Rule> rules, LimiterOptions options = {}) {
  RuleSet set;
  set.rules = std::move(rules);
  return Limiter(options, std::move(set));
}

struct Caller {
  std::vector<Descriptor> descriptors{{"user", "alice"}};
  CheckOutput check(Limiter& limiter, TimeUs now, std::int64_t cost = 1,
                    CheckMode mode = CheckMode::kCheck, std::int64_t max_wait_us = -1,
                    std::int64_t load_permille = 0) {
    CheckOutput out;
    CheckInput input{descriptors, cost, nullptr};
    input.mode = mode;
    input.max_wait_us = max_wait_us;
    input.load_permille = load_permille;
    limiter.check(input, now, out);
    return out;
  }
  // How many of `n` checks at `now` are allowed.
  int allowed_of(Limiter& limiter, TimeUs now, int n) {
    int allowed = 0;
    for (int i = 0; i < n; ++i) allowed += check(limiter, now).allowed ? 1 : 0;
    return allowed;
  }
};

constexpr TimeUs kSecond = kUsPerSecond;
// Window rules align to the epoch: start well inside a window.
constexpr TimeUs kStart = 1000 * kSecond + 1;

TEST(LimiterAlgorithmsTest, EveryAlgorithmLimitsThroughTheLimiter) {
  struct Case {
    Algorithm algorithm;
    std::int64_t burst;
    AlgorithmOptions options;
    int expected_at_once;  // of 20 at one instant, limit 5 per second
  };
  AlgorithmOptions shaper;
  shaper.shaper = true;
  shaper.max_delay_us = 0;
  AlgorithmOptions try_now;
  try_now.max_delay_us = 0;
  AlgorithmOptions warm = try_now;
  warm.warmup_us = 0;
  AlgorithmOptions lease;
  lease.lease_ttl_us = 10 * kSecond;
  const std::vector<Case> cases = {
      {Algorithm::kTokenBucket, 5, {}, 5},
      {Algorithm::kLeakyBucket, 5, {}, 5},
      {Algorithm::kLeakyBucket, 5, shaper, 1},  // no waiting allowed: one at a time
      {Algorithm::kFixedWindow, 5, {}, 5},
      {Algorithm::kSlidingWindow, 5, {}, 5},
      {Algorithm::kSlidingLog, 5, {}, 5},
      {Algorithm::kGcra, 5, {}, 5},
      {Algorithm::kSmoothBursty, 5, try_now, 6},  // 5 stored, the 6th paid by the next
      {Algorithm::kSmoothWarmingUp, 5, warm, 1},
      {Algorithm::kConcurrency, 5, lease, 5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(algorithm_name(c.algorithm));
    Limiter limiter = limiter_of({rule_of("r", c.algorithm, 5, kSecond, c.burst, c.options)});
    Caller alice;
    EXPECT_EQ(alice.allowed_of(limiter, kStart, 20), c.expected_at_once);
    const CheckOutput denied = alice.check(limiter, kStart);
    ASSERT_FALSE(denied.allowed);
    ASSERT_EQ(denied.rules.size(), 1u);
    EXPECT_EQ(denied.rules[0].algorithm, c.algorithm);
    EXPECT_NE(denied.rules[0].retry_after_us, 0);
    EXPECT_EQ(limiter.key_count(), 1u);
    EXPECT_EQ(limiter.stats().denied, 20u - static_cast<unsigned>(c.expected_at_once) + 1);
  }
}

TEST(LimiterAlgorithmsTest, AllOrNothingAcrossAlgorithms) {
  // A GCRA rule with room and a fixed window without: the GCRA rule must not
  // be charged for the refused check.
  Limiter limiter = limiter_of({rule_of("gcra", Algorithm::kGcra, 10, kSecond, 10),
                                rule_of("window", Algorithm::kFixedWindow, 2, kSecond, 2)});
  Caller alice;
  EXPECT_EQ(alice.allowed_of(limiter, kStart, 5), 2);
  const CheckOutput out = alice.check(limiter, kStart);
  ASSERT_EQ(out.rules.size(), 2u);
  EXPECT_TRUE(out.rules[0].allowed);
  EXPECT_FALSE(out.rules[1].allowed);
  // GCRA was charged only twice: 8 of 10 left.
  EXPECT_EQ(out.rules[0].remaining, 7);  // as if this one were admitted too
  Limiter gcra_only = limiter_of({rule_of("gcra", Algorithm::kGcra, 10, kSecond, 10)});
  EXPECT_EQ(alice.allowed_of(gcra_only, kStart, 2), 2);
  EXPECT_EQ(alice.check(gcra_only, kStart, 1, CheckMode::kPeek).rules[0].remaining, 7);
}

TEST(LimiterAlgorithmsTest, PeekConsumesNothing) {
  for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kSlidingWindow}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    Limiter limiter = limiter_of({rule_of("r", algorithm, 3, kSecond, 3)});
    Caller alice;
    for (int i = 0; i < 10; ++i) {
      const CheckOutput out = alice.check(limiter, kStart, 1, CheckMode::kPeek);
      EXPECT_TRUE(out.allowed);
      EXPECT_EQ(out.rules[0].remaining, 2);
    }
    EXPECT_EQ(limiter.key_count(), 0u);  // a peek makes no key
    EXPECT_EQ(alice.allowed_of(limiter, kStart, 10), 3);
    EXPECT_FALSE(alice.check(limiter, kStart, 1, CheckMode::kPeek).allowed);
    EXPECT_EQ(limiter.stats().peeks, 11u);
  }
}

TEST(LimiterAlgorithmsTest, ReserveTakesNowAndSaysHowLongToWait) {
  // Token bucket 10/s, burst 1: the first passes, each later one waits a
  // further 100 ms; a reservation beyond max_wait is refused and costs nothing.
  Limiter limiter = limiter_of({rule_of("r", Algorithm::kTokenBucket, 10, kSecond, 1)});
  Caller alice;
  const std::int64_t max_wait = 250'000;
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 5; ++i) {
    const CheckOutput out = alice.check(limiter, kStart, 1, CheckMode::kReserve, max_wait);
    if (!out.allowed) break;
    delays.push_back(out.delay_us);
  }
  EXPECT_EQ(delays, (std::vector<std::int64_t>{0, 100'000, 200'000}));
  const CheckOutput refused = alice.check(limiter, kStart, 1, CheckMode::kReserve, max_wait);
  EXPECT_FALSE(refused.allowed);
  // When it would pass without waiting.
  EXPECT_EQ(refused.rules[0].retry_after_us, 300'000);
  // Waiting out the first reservation makes room for exactly one more.
  EXPECT_TRUE(alice.check(limiter, kStart + 100'000, 1, CheckMode::kReserve, max_wait).allowed);
  EXPECT_GT(limiter.stats().delayed, 0u);
}

TEST(LimiterAlgorithmsTest, ReserveOnAWindowWaitsForTheNextWindow) {
  Limiter limiter = limiter_of({rule_of("r", Algorithm::kFixedWindow, 2, kSecond, 2)});
  Caller alice;
  const TimeUs now = 1000 * kSecond + 250'000;  // 750 ms before the edge
  EXPECT_EQ(alice.allowed_of(limiter, now, 2), 2);
  const CheckOutput out = alice.check(limiter, now, 1, CheckMode::kReserve, kSecond);
  ASSERT_TRUE(out.allowed);
  EXPECT_EQ(out.delay_us, 750'000);
  // The reservation took one unit of the next window.
  EXPECT_EQ(alice.allowed_of(limiter, now + 750'000, 5), 1);
}

// A reserve's bound is on the whole wait: admitted at the bound and above it,
// refused (charging nothing) just under it, for every rule that can schedule,
// including those that hand out waits themselves (their refusal's
// retry_after is only until the wait fits the bound, not the wait).
TEST(LimiterAlgorithmsTest, ReserveRefusesAWaitJustOverItsBound) {
  AlgorithmOptions shaper;
  shaper.shaper = true;
  AlgorithmOptions warming;
  warming.warmup_us = kSecond;
  const std::vector<Rule> rules = {
      rule_of("bucket", Algorithm::kTokenBucket, 5, kSecond, 1),
      rule_of("gcra", Algorithm::kGcra, 5, kSecond, 1),
      rule_of("window", Algorithm::kFixedWindow, 1, kSecond, 1),
      rule_of("shaper", Algorithm::kLeakyBucket, 5, kSecond, 5, shaper),
      rule_of("bursty", Algorithm::kSmoothBursty, 5, kSecond, 0),
      rule_of("warming", Algorithm::kSmoothWarmingUp, 5, kSecond, 5, warming),
  };
  for (const Rule& rule : rules) {
    SCOPED_TRACE(rule.name);
    // Limiters driven alike are alike: one tells the wait, the others are
    // reserved against bounds around it.
    Caller alice;
    const auto prime = [&](Limiter& limiter) { EXPECT_TRUE(alice.check(limiter, kStart).allowed); };
    Limiter probe = limiter_of({rule});
    prime(probe);
    const CheckOutput unbounded = alice.check(probe, kStart, 1, CheckMode::kReserve, -1);
    ASSERT_TRUE(unbounded.allowed);
    const std::int64_t wait_us = unbounded.delay_us;
    ASSERT_GT(wait_us, 1);

    Limiter under = limiter_of({rule});
    prime(under);
    const CheckOutput refused = alice.check(under, kStart, 1, CheckMode::kReserve, wait_us - 1);
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(refused.delay_us, 0);
    EXPECT_GT(refused.rules[0].retry_after_us, 0);
    // Nothing was charged: the same wait is still there.
    EXPECT_EQ(alice.check(under, kStart, 1, CheckMode::kReserve, -1).delay_us, wait_us);

    for (const std::int64_t bound : {wait_us, wait_us + 1}) {
      Limiter limiter = limiter_of({rule});
      prime(limiter);
      const CheckOutput out = alice.check(limiter, kStart, 1, CheckMode::kReserve, bound);
      EXPECT_TRUE(out.allowed) << "bound " << bound;
      EXPECT_EQ(out.delay_us, wait_us) << "bound " << bound;
      EXPECT_LE(out.delay_us, bound);
    }
  }
}

// smooth_bursty's starting state, per rule: a new key holds its burst (5 at
// once, the 6th paid by the next caller) or, with start = "empty", nothing
// (Guava's create(): the second waits an interval).
TEST(LimiterAlgorithmsTest, SmoothBurstyStartsFullOrEmptyAsTheRuleSays) {
  AlgorithmOptions try_now;
  try_now.max_delay_us = 0;
  AlgorithmOptions empty = try_now;
  empty.start_empty = true;
  Caller alice;
  Limiter full = limiter_of({rule_of("r", Algorithm::kSmoothBursty, 5, kSecond, 5, try_now)});
  EXPECT_EQ(alice.allowed_of(full, kStart, 20), 6);
  Limiter guava = limiter_of({rule_of("r", Algorithm::kSmoothBursty, 5, kSecond, 5, empty)});
  EXPECT_EQ(alice.allowed_of(guava, kStart, 20), 1);
  EXPECT_EQ(alice.check(guava, kStart, 1, CheckMode::kPeek, kSecond).delay_us, 200'000);
}

// A sliding log and a concurrency rule cannot schedule a request for later:
// a reserve on them is decided now (an acquire on a concurrency rule takes a
// lease when a slot is free), never with a delay.
TEST(LimiterAlgorithmsTest, ReserveOnRulesThatCannotScheduleDecidesNow) {
  AlgorithmOptions lease;
  lease.lease_ttl_us = kSecond;
  for (Rule rule : {rule_of("log", Algorithm::kSlidingLog, 2, kSecond, 2),
                    rule_of("slots", Algorithm::kConcurrency, 2, kSecond, 2, lease)}) {
    SCOPED_TRACE(rule.name);
    Limiter limiter = limiter_of({rule});
    Caller alice;
    for (int i = 0; i < 2; ++i) {
      const CheckOutput out = alice.check(limiter, kStart, 1, CheckMode::kReserve, kSecond);
      ASSERT_EQ(out.status, CheckStatus::kOk) << out.error;
      EXPECT_TRUE(out.allowed);
      EXPECT_EQ(out.delay_us, 0);
      EXPECT_EQ(out.rules[0].lease != alg::kNoTicket, rule.name == "slots");
    }
    const CheckOutput refused = alice.check(limiter, kStart, 1, CheckMode::kReserve, 10 * kSecond);
    EXPECT_FALSE(refused.allowed);
    EXPECT_GT(refused.rules[0].retry_after_us, 0);
  }
}

TEST(LimiterAlgorithmsTest, RequestMaxWaitReplacesTheShapersOwn) {
  AlgorithmOptions shaper;
  shaper.shaper = true;  // no max delay of its own: waits as long as the capacity allows
  Limiter limiter = limiter_of({rule_of("r", Algorithm::kLeakyBucket, 10, kSecond, 5, shaper)});
  Caller alice;
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 3; ++i) delays.push_back(alice.check(limiter, kStart).delay_us);
  EXPECT_EQ(delays, (std::vector<std::int64_t>{0, 100'000, 200'000}));
  // The next would wait 300 ms: refused under a 250 ms bound, fine without.
  EXPECT_FALSE(alice.check(limiter, kStart, 1, CheckMode::kCheck, 250'000).allowed);
  EXPECT_EQ(alice.check(limiter, kStart).delay_us, 300'000);
}

TEST(LimiterAlgorithmsTest, ConcurrencyLeasesAreReleasedByKey) {
  AlgorithmOptions lease;
  lease.lease_ttl_us = 10 * kSecond;
  Limiter limiter = limiter_of({rule_of("slots", Algorithm::kConcurrency, 2, 0, 2, lease)});
  Caller alice;
  const CheckOutput first = alice.check(limiter, kStart);
  const std::string first_key(first.rules[0].key);
  const alg::Ticket first_lease = first.rules[0].lease;
  ASSERT_TRUE(first.allowed);
  EXPECT_NE(first_lease, alg::kNoTicket);
  EXPECT_TRUE(alice.check(limiter, kStart).allowed);
  EXPECT_FALSE(alice.check(limiter, kStart).allowed);
  EXPECT_EQ(limiter.release_lease(first_key, first_lease, false, kStart + 1), LeaseStatus::kDone);
  EXPECT_EQ(limiter.release_lease(first_key, first_lease, false, kStart + 1),
            LeaseStatus::kUnknown);
  EXPECT_TRUE(alice.check(limiter, kStart + 2).allowed);
  EXPECT_FALSE(alice.check(limiter, kStart + 2).allowed);
  // Leases expire after their TTL: a crashed holder frees its slots.
  EXPECT_TRUE(alice.check(limiter, kStart + 11 * kSecond).allowed);
  // A token bucket's key holds no lease.
  Limiter buckets = limiter_of({rule_of("r", Algorithm::kTokenBucket, 2, kSecond, 2)});
  const CheckOutput bucket = alice.check(buckets, kStart);
  EXPECT_EQ(bucket.rules[0].lease, alg::kNoTicket);
  EXPECT_EQ(buckets.release_lease(bucket.rules[0].key, 1, false, kStart), LeaseStatus::kNotALease);
  EXPECT_EQ(limiter.stats().leases_released, 1u);
  EXPECT_EQ(limiter.stats().leases_unknown, 1u);
}

TEST(LimiterAlgorithmsTest, ResetForgetsTheMatchedKeys) {
  Limiter limiter = limiter_of({rule_of("gcra", Algorithm::kGcra, 1, kSecond, 1),
                                rule_of("bucket", Algorithm::kTokenBucket, 1, kSecond, 1)});
  Caller alice;
  Caller bob;
  bob.descriptors = {{"user", "bob"}};
  EXPECT_TRUE(alice.check(limiter, kStart).allowed);
  EXPECT_TRUE(bob.check(limiter, kStart).allowed);
  EXPECT_FALSE(alice.check(limiter, kStart).allowed);
  CheckOutput out;
  EXPECT_EQ(limiter.reset({alice.descriptors, 1, nullptr}, kStart, out), 2u);
  ASSERT_EQ(out.rules.size(), 2u);
  EXPECT_TRUE(alice.check(limiter, kStart).allowed);
  EXPECT_FALSE(bob.check(limiter, kStart).allowed);  // bob's keys untouched
  EXPECT_EQ(limiter.stats().keys_reset, 2u);
}

TEST(LimiterAlgorithmsTest, ShadowAdmitsAndCountsWhatEnforcingWouldRefuse) {
  AlgorithmOptions shadow;
  shadow.throttle.mode = alg::ThrottleMode::kShadow;
  for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kFixedWindow}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    Limiter limiter = limiter_of({rule_of("r", algorithm, 3, kSecond, 3, shadow)});
    Caller alice;
    EXPECT_EQ(alice.allowed_of(limiter, kStart, 10), 10);
    EXPECT_EQ(limiter.stats().over_limit_admitted, 7u);
    const CheckOutput out = alice.check(limiter, kStart);
    EXPECT_TRUE(out.rules[0].over_limit);
    EXPECT_EQ(out.rules[0].remaining, 0);
  }
}

TEST(LimiterAlgorithmsTest, SoftAdmitsItsAllowanceAndRepaysIt) {
  AlgorithmOptions soft;
  soft.throttle.mode = alg::ThrottleMode::kSoft;
  soft.throttle.soft_percent = 20;
  Limiter limiter = limiter_of({rule_of("r", Algorithm::kTokenBucket, 10, kSecond, 10, soft)});
  Caller alice;
  EXPECT_EQ(alice.allowed_of(limiter, kStart, 20), 12);
  // The 2 over are debt: one second later 10 tokens came back, 8 usable
  // before the allowance (2 more) is reached.
  EXPECT_EQ(alice.allowed_of(limiter, kStart + kSecond, 20), 10);
}

TEST(LimiterAlgorithmsTest, ElasticAdmitsBeyondTheLimitOnlyWhileTheLoadIsLow) {
  AlgorithmOptions elastic;
  elastic.throttle.mode = alg::ThrottleMode::kElastic;
  elastic.throttle.elastic_threshold_permille = 500;
  Limiter limiter = limiter_of({rule_of("r", Algorithm::kGcra, 2, kSecond, 2, elastic)});
  Caller alice;
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(alice.check(limiter, kStart, 1, CheckMode::kCheck, -1, 100).allowed);
  }
  // Beyond the limit nothing was charged: at high load the rule is at its
  // limit, which the first two used.
  EXPECT_FALSE(alice.check(limiter, kStart, 1, CheckMode::kCheck, -1, 900).allowed);
  EXPECT_EQ(limiter.stats().over_limit_admitted, 3u);
}

TEST(LimiterAlgorithmsTest, KeysOfEveryAlgorithmShareOneBudget) {
  LimiterOptions options;
  options.max_keys = 2;
  options.key_table_full = KeyTableFullPolicy::kDeny;
  Rule bucket = rule_of("bucket", Algorithm::kTokenBucket, 1, kSecond, 1);
  Rule window = rule_of("window", Algorithm::kSlidingWindow, 1, kSecond, 1);
  window.match = {{"ip", each()}};
  Limiter limiter = limiter_of({bucket, window}, options);
  Caller one;
  one.descriptors = {{"user", "a"}, {"ip", "1"}};
  Caller two;
  two.descriptors = {{"user", "b"}, {"ip", "2"}};
  EXPECT_TRUE(one.check(limiter, kStart).allowed);
  EXPECT_EQ(limiter.key_count(), 2u);
  const CheckOutput full = two.check(limiter, kStart);
  EXPECT_EQ(full.status, CheckStatus::kKeyTableFull);
  // Once both of one's keys are idle the sweep makes room.
  EXPECT_TRUE(two.check(limiter, kStart + 3 * kSecond).allowed);
  EXPECT_EQ(limiter.key_count(), 2u);
}

TEST(LimiterAlgorithmsTest, SweepForgetsIdleStates) {
  Limiter limiter = limiter_of({rule_of("log", Algorithm::kSlidingLog, 5, kSecond, 5)});
  Caller alice;
  EXPECT_TRUE(alice.check(limiter, kStart).allowed);
  EXPECT_EQ(limiter.sweep(kStart + kSecond / 2, 100), 0u);  // still in the window
  EXPECT_EQ(limiter.sweep(kStart + 2 * kSecond, 100), 1u);
  EXPECT_EQ(limiter.key_count(), 0u);
}

TEST(LimiterAlgorithmsTest, RemoteConsumptionChargesEveryReplicatedAlgorithm) {
  for (Algorithm algorithm : {Algorithm::kGcra, Algorithm::kFixedWindow, Algorithm::kSlidingLog,
                              Algorithm::kLeakyBucket, Algorithm::kTokenBucket}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    LimiterOptions options;
    Limiter a = limiter_of({rule_of("r", algorithm, 10, kSecond, 10)}, options);
    Limiter b = limiter_of({rule_of("r", algorithm, 10, kSecond, 10)}, options);
    a.enable_replication("a", 1, 0);
    b.enable_replication("b", 1, 0);
    Caller alice;
    EXPECT_EQ(alice.allowed_of(a, kStart, 7), 7);
    // b learns a's counter for the key and is charged with it.
    const CheckOutput first = alice.check(a, kStart, 0, CheckMode::kPeek);
    const std::string key(first.rules[0].key);
    EXPECT_EQ(b.merge_remote(key, "a", 1, 7, kStart), 7u);
    EXPECT_EQ(b.merge_remote(key, "a", 1, 7, kStart), 0u);  // old news
    EXPECT_EQ(alice.allowed_of(b, kStart, 10), 3);
  }
}

// A sliding log's news carries its age, and a receiver logs it when it
// happened: a period after the peer's consumption its slots are free, not a
// period after the news arrived. Other algorithms send no age.
TEST(LimiterAlgorithmsTest, ASlidingLogLogsAPeersConsumptionWhenItHappened) {
  for (const TimeUs age_us : {TimeUs{0}, TimeUs{30'000}}) {
    SCOPED_TRACE(age_us);
    Limiter a = limiter_of({rule_of("r", Algorithm::kSlidingLog, 10, kSecond, 10)});
    Limiter b = limiter_of({rule_of("r", Algorithm::kSlidingLog, 10, kSecond, 10)});
    a.enable_replication("a", 1, 0);
    b.enable_replication("b", 1, 0);
    Caller alice;
    EXPECT_EQ(alice.allowed_of(a, kStart, 7), 7);
    const std::string key(alice.check(a, kStart, 0, CheckMode::kPeek).rules[0].key);
    const TimeUs learned = kStart + 30'000;
    // 30.9 ms is 30 ms, rounded down: the news looks newer than it is.
    EXPECT_EQ(a.key_news(key, *a.ledger().find(key), learned + 900, false).age_ms, 30u);
    const std::uint32_t origin = b.ledger().intern_origin("a");
    EXPECT_EQ(b.merge_remote(key, origin, 1, 7, learned, age_us), 7u);
    EXPECT_EQ(b.ledger().find(key)->consumed_at_us, learned - age_us);
    // b passes the news on with its age grown by the time since.
    EXPECT_EQ(b.key_news(key, *b.ledger().find(key), learned + 10'000, false).age_ms,
              static_cast<std::uint32_t>((age_us + 10'000) / 1000));
    // Just over a period after the consumption: with the age, all 10 slots
    // are free; without it the 7 are logged 30 ms late and still held.
    EXPECT_EQ(alice.allowed_of(b, kStart + kSecond + 1, 10), age_us > 0 ? 10 : 3);
  }
  // A sliding window sends the age too (its overshoot is measured then);
  // the bucket-like algorithms do not.
  for (const Algorithm algorithm : {Algorithm::kSlidingWindow, Algorithm::kTokenBucket,
                                    Algorithm::kGcra, Algorithm::kFixedWindow}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    Limiter one = limiter_of({rule_of("r", algorithm, 10, kSecond, 10)});
    one.enable_replication("a", 1, 0);
    Caller alice;
    EXPECT_EQ(alice.allowed_of(one, kStart, 7), 7);
    const std::string key(alice.check(one, kStart, 0, CheckMode::kPeek).rules[0].key);
    const Ledger::KeyState& state = *one.ledger().find(key);
    EXPECT_EQ(one.key_news(key, state, kStart + 30'000, false).age_ms,
              algorithm == Algorithm::kSlidingWindow ? 30u : 0u);
    // A token bucket's balance rides along only when asked for.
    EXPECT_FALSE(one.key_news(key, state, kStart + 30'000, false).balance.has_value());
    const std::optional<std::int64_t> balance =
        one.key_news(key, state, kStart + 30'000, true).balance;
    EXPECT_EQ(balance.has_value(), algorithm == Algorithm::kTokenBucket);
    if (balance) {
      EXPECT_EQ(*balance, 3);
    }
  }
}

// A sliding window owes an overshoot as of the last request it refused
// (sliding_window.h, "Overshoot"): the Limiter tells it of its refusals.
// With a refusal after the room opened, the next window does not carry it.
TEST(LimiterAlgorithmsTest, ASlidingWindowOwesItsOvershootAsOfItsLastRefusal) {
  const TimeUs window = 1000 * kSecond;
  for (const bool refused_since : {false, true}) {
    SCOPED_TRACE(refused_since);
    Limiter b = limiter_of({rule_of("r", Algorithm::kSlidingWindow, 100, kSecond, 100)});
    b.enable_replication("b", 1, 0);
    Caller alice;
    ASSERT_EQ(alice.allowed_of(b, window, 100), 100);
    const std::string key(alice.check(b, window, 0, CheckMode::kPeek).rules[0].key);
    ASSERT_EQ(alice.allowed_of(b, window + 1'600'000, 40), 40);  // 100 * 0.4 + 40
    // News of 30 at 1.6 s into the run: 100 * 0.4 + 70, 10 over.
    ASSERT_EQ(b.merge_remote(key, "a", 1, 30, window + 1'600'000), 30u);
    if (refused_since) {
      // At 1.8 s: 100 * 0.2 + 70 = 90; 15 more do not fit, the excess is gone.
      EXPECT_FALSE(alice.check(b, window + 1'800'000, 15).allowed);
    }
    // Halfway through the next window: 70 * 0.5 + 0 without the carry, 60 * 0.5
    // + 10 with it.
    EXPECT_EQ(alice.check(b, window + 2'500'000, 0, CheckMode::kPeek).rules[0].remaining,
              refused_since ? 65 : 60);
  }
}

// What an algorithm holds back of a carried overshoot, read through the
// rule state (the fair share's burst error leaves it out: share_admits): a
// sliding log's held units (SlidingLogTest: 11 of 8 in a run's first
// period, 3 carried, held 2 a period), none for an algorithm that carries
// no overshoot itself.
TEST(LimiterAlgorithmsTest, HeldStateReadsWhatALogHoldsOfItsCarry) {
  const alg::SlidingLog::Params log{8, kUsPerSecond, 16};
  RuleState state = alg::SlidingLog::fresh(log, 0);
  auto& s = std::get<alg::SlidingLog::State>(state);
  alg::SlidingLog::commit(s, log, 6, 100'000);
  EXPECT_EQ(held_state(state, AlgorithmParams{log}, 150'000), 0);
  alg::SlidingLog::charge_remote(s, log, 5, 150'000, 200'000);  // 3 over
  EXPECT_EQ(held_state(state, AlgorithmParams{log}, 200'000), 2);
  const alg::SlidingWindow::Params window{8, kUsPerSecond};
  RuleState window_state = alg::SlidingWindow::fresh(window, 0);
  alg::SlidingWindow::charge_remote(std::get<alg::SlidingWindow::State>(window_state), window, 11,
                                    150'000);
  EXPECT_EQ(held_state(window_state, AlgorithmParams{window}, 200'000), 0);
}

// Each origin's entry carries its own age: a node that relays an older
// peer's consumption beside newer news (its own, or another peer's) sends
// the older one's age, not the newest's, so a receiving log frees its slots
// when they were taken (docs/cluster.md, "The age of news"). With one age
// per key they were logged late by the gap, and at 200 nodes the cluster's
// admissions drifted to the end of aligned bursts (-1.74% over 60 s).
TEST(LimiterAlgorithmsTest, EachOriginsNewsCarriesItsOwnAge) {
  Limiter b = limiter_of({rule_of("r", Algorithm::kSlidingLog, 10, kSecond, 10)});
  b.enable_replication("b", 1, 0);
  Caller alice;
  const std::string key(alice.check(b, kStart, 0, CheckMode::kPeek).rules[0].key);
  const std::uint32_t a = b.ledger().intern_origin("a");
  const std::uint32_t c = b.ledger().intern_origin("c");
  // a consumed at kStart (heard 20 ms later), c at kStart + 50 ms, b itself
  // at kStart + 80 ms.
  ASSERT_EQ(b.merge_remote(key, a, 1, 3, kStart + 20'000, 20'000), 3u);
  ASSERT_EQ(b.merge_remote(key, c, 1, 2, kStart + 60'000, 10'000), 2u);
  EXPECT_EQ(alice.allowed_of(b, kStart + 80'000, 1), 1);
  const Ledger::KeyState& state = *b.ledger().find(key);
  const TimeUs now = kStart + 100'000;
  const Limiter::KeyNews news = b.key_news(key, state, now, false);
  EXPECT_TRUE(news.timed);
  EXPECT_EQ(news.age_ms, 20u);  // the newest: b's own, 20 ms ago
  std::map<std::string, std::uint32_t> ages;
  for (const Ledger::Entry& e : state.entries) {
    ages[b.ledger().origin_name(e.origin)] = Limiter::entry_age_ms(news, state, e);
  }
  // Never older than true (each gap is read one millisecond short).
  EXPECT_EQ(ages["b"], 20u);
  EXPECT_EQ(ages["c"], 49u);  // 50 ms ago
  EXPECT_EQ(ages["a"], 99u);  // 100 ms ago
  // A bucket's news carries no age at all.
  Limiter bucket = limiter_of({rule_of("r", Algorithm::kTokenBucket, 10, kSecond, 10)});
  bucket.enable_replication("b", 1, 0);
  EXPECT_EQ(alice.allowed_of(bucket, kStart, 1), 1);
  const std::string bucket_key(alice.check(bucket, kStart, 0, CheckMode::kPeek).rules[0].key);
  const Ledger::KeyState& bucket_state = *bucket.ledger().find(bucket_key);
  const Limiter::KeyNews none = bucket.key_news(bucket_key, bucket_state, now, false);
  EXPECT_FALSE(none.timed);
  EXPECT_EQ(Limiter::entry_age_ms(none, bucket_state, bucket_state.entries.front()), 0u);
}

TEST(LimiterAlgorithmsTest, LocalRulesNeitherSendNorTakeConsumption) {
  AlgorithmOptions local;
  local.local = true;
  local.lease_ttl_us = kSecond;
  Limiter a = limiter_of({rule_of("slots", Algorithm::kConcurrency, 2, 0, 2, local)});
  a.enable_replication("a", 1, 0);
  Caller alice;
  const CheckOutput out = alice.check(a, kStart);
  ASSERT_TRUE(out.allowed);
  EXPECT_EQ(a.ledger().size(), 0u);
  const std::string key(out.rules[0].key);
  a.merge_remote(key, "b", 1, 5, kStart);
  EXPECT_TRUE(alice.check(a, kStart).allowed);  // b's 5 were not charged
}

// Prefetching the next checks (as a batch does) decides nothing: the same
// sequence with and without it gives the same answers.
TEST(LimiterAlgorithmsTest, PrefetchChangesNoDecision) {
  Limiter plain = limiter_of({rule_of("r", Algorithm::kTokenBucket, 3, kSecond, 3)});
  Limiter fetched = limiter_of({rule_of("r", Algorithm::kTokenBucket, 3, kSecond, 3)});
  std::vector<Caller> callers(7);
  for (std::size_t i = 0; i < callers.size(); ++i) {
    callers[i].descriptors = {{"user", i % 2 == 0 ? "even" : "odd"}};
  }
  for (int step = 0; step < 200; ++step) {
    Caller& caller = callers[static_cast<std::size_t>(step) % callers.size()];
    Caller& next = callers[static_cast<std::size_t>(step + 3) % callers.size()];
    fetched.prefetch({next.descriptors, 1, nullptr});
    const TimeUs now = kStart + step * 50'000;
    EXPECT_EQ(caller.check(plain, now).allowed, caller.check(fetched, now).allowed) << step;
  }
  EXPECT_EQ(plain.stats().allowed, fetched.stats().allowed);
  EXPECT_GT(plain.stats().denied, 0u);
}

}  // namespace
}  // namespace rlimit::core
