#include "core/limiter.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/time.h"

namespace rlimit::core {
namespace {

ValueMatcher exact(std::string value) {
  ValueMatcher m;
  m.kind = ValueMatchKind::kExact;
  m.pattern = std::move(value);
  return m;
}

ValueMatcher each() {
  ValueMatcher m;
  m.each = true;
  return m;
}

ValueMatcher prefix(std::string value) {
  ValueMatcher m;
  m.kind = ValueMatchKind::kPrefix;
  m.pattern = std::move(value);
  return m;
}

Rule make_rule(std::string name, std::vector<DescriptorMatch> match, std::int64_t limit,
               std::int64_t period_us, std::int64_t burst) {
  Rule rule;
  rule.name = std::move(name);
  rule.match = std::move(match);
  rule.params = {limit, period_us, burst};
  return rule;
}

// Holds descriptor strings alive for the string_views a CheckInput needs.
struct Request {
  std::vector<Descriptor> descriptors;
  explicit Request(std::initializer_list<std::pair<const char*, const char*>> pairs) {
    for (auto& [k, v] : pairs) descriptors.push_back({k, v});
  }
  CheckInput input(std::int64_t cost = 1) const { return {descriptors, cost, nullptr}; }
};

class LimiterTest : public ::testing::Test {
 protected:
  CheckOutput check(Limiter& limiter, const Request& request, TimeUs now, std::int64_t cost = 1) {
    CheckOutput out;
    limiter.check(request.input(cost), now, out);
    return out;
  }
};

TEST_F(LimiterTest, EachDistinctValueGetsItsOwnBucket) {
  RuleSet rules;
  rules.rules.push_back(make_rule("per-user", {{"user", each()}}, 2, kUsPerSecond, 2));
  Limiter limiter({}, std::move(rules));
  const Request alice{{"user", "alice"}};
  const Request bob{{"user", "bob"}};
  EXPECT_TRUE(check(limiter, alice, 0).allowed);
  EXPECT_TRUE(check(limiter, alice, 0).allowed);
  const CheckOutput denied = check(limiter, alice, 0);
  EXPECT_FALSE(denied.allowed);
  ASSERT_EQ(denied.rules.size(), 1u);
  EXPECT_EQ(denied.rules[0].name, "per-user");
  EXPECT_EQ(denied.rules[0].retry_after_us, 500'000);
  EXPECT_EQ(denied.rules[0].reset_after_us, kUsPerSecond);
  EXPECT_TRUE(check(limiter, bob, 0).allowed);
  EXPECT_EQ(limiter.key_count(), 2u);
}

TEST_F(LimiterTest, ALimiterSharingAnothersRulesStartsWithNoneOfItsState) {
  RuleSet rules;
  rules.rules.push_back(make_rule("per-user", {{"user", each()}}, 2, kUsPerSecond, 2));
  rules.rules.push_back(make_rule("per-ip", {{"ip", each()}}, 5, kUsPerSecond, 5));
  auto first = std::make_unique<Limiter>(LimiterOptions{}, rules);
  const Request alice{{"user", "alice"}, {"ip", "192.0.2.1"}};
  EXPECT_TRUE(check(*first, alice, 0).allowed);
  EXPECT_TRUE(check(*first, alice, 0).allowed);
  EXPECT_FALSE(check(*first, alice, 0).allowed);

  LimiterOptions small;
  small.max_keys = 1;
  Limiter second(small, *first);
  Limiter compiled_again(small, rules);
  EXPECT_EQ(second.rules().rules.size(), 2u);
  EXPECT_EQ(second.key_count(), 0u);
  EXPECT_EQ(second.stats().checks, 0u);
  ASSERT_EQ(second.rule_counters().size(), 3u);  // and the inline limits' slot
  EXPECT_EQ(second.rule_counters()[0].checks(), 0u);
  EXPECT_EQ(second.options().max_keys, 1u);  // its own options
  // It decides as a limiter compiled from the same rules does, key for key
  // (its own max_keys included: the second key does not fit).
  for (int i = 0; i < 4; ++i) {
    const CheckOutput shared = check(second, alice, 0);
    const CheckOutput fresh = check(compiled_again, alice, 0);
    EXPECT_EQ(shared.allowed, fresh.allowed) << i;
    EXPECT_EQ(shared.status, fresh.status) << i;
    ASSERT_EQ(shared.rules.size(), fresh.rules.size()) << i;
    for (std::size_t r = 0; r < shared.rules.size(); ++r) {
      EXPECT_EQ(shared.rules[r].key, fresh.rules[r].key) << i;
      EXPECT_EQ(shared.rules[r].remaining, fresh.rules[r].remaining) << i;
    }
  }
  EXPECT_EQ(second.key_count(), compiled_again.key_count());
  EXPECT_EQ(second.stats().key_table_full, compiled_again.stats().key_table_full);
  EXPECT_EQ(first->stats().checks, 3u);  // the first saw none of that

  // Either may change its rules, and outlive the other, alone.
  RuleSet other;
  other.rules.push_back(make_rule("per-tenant", {{"tenant", each()}}, 1, kUsPerSecond, 1));
  second.replace_rules(other);
  EXPECT_EQ(first->rules().rules.size(), 2u);
  EXPECT_EQ(first->rules().rules[0].name, "per-user");
  Limiter third({}, *first);
  first.reset();
  EXPECT_EQ(third.rules().rules[1].name, "per-ip");
  EXPECT_TRUE(check(third, alice, 0).allowed);
  EXPECT_EQ(second.rules().rules[0].name, "per-tenant");
}

TEST_F(LimiterTest, SharedBucketWithoutEach) {
  RuleSet rules;
  rules.rules.push_back(make_rule("search", {{"path", prefix("/api/search")}}, 1, kUsPerSecond, 1));
  Limiter limiter({}, std::move(rules));
  EXPECT_TRUE(check(limiter, Request{{"path", "/api/search?q=a"}}, 0).allowed);
  EXPECT_FALSE(check(limiter, Request{{"path", "/api/search?q=b"}}, 0).allowed);
  const CheckOutput other = check(limiter, Request{{"path", "/api/items"}}, 0);
  EXPECT_TRUE(other.allowed);
  EXPECT_TRUE(other.rules.empty());
  EXPECT_EQ(limiter.stats().unmatched, 1u);
}

TEST_F(LimiterTest, MultiRuleIsAllOrNothing) {
  RuleSet rules;
  rules.rules.push_back(make_rule("burst", {{"user", each()}}, 10, kUsPerSecond, 10));
  rules.rules.push_back(make_rule("daily", {{"user", each()}}, 3, 86400 * kUsPerSecond, 3));
  Limiter limiter({}, std::move(rules));
  const Request alice{{"user", "alice"}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(check(limiter, alice, 0).allowed);
  const CheckOutput denied = check(limiter, alice, 0);
  ASSERT_FALSE(denied.allowed);
  ASSERT_EQ(denied.rules.size(), 2u);
  EXPECT_TRUE(denied.rules[0].allowed);   // burst would have allowed
  EXPECT_FALSE(denied.rules[1].allowed);  // daily denied
  EXPECT_EQ(denied.rules[0].remaining, 7);
  // Denials charged nothing: the burst bucket still holds 7 after many.
  for (int i = 0; i < 20; ++i) check(limiter, alice, 0);
  EXPECT_EQ(check(limiter, alice, 0).rules[0].remaining, 7);
}

TEST_F(LimiterTest, CostAndZeroCost) {
  RuleSet rules;
  rules.rules.push_back(make_rule("r", {}, 10, kUsPerSecond, 10));
  Limiter limiter({}, std::move(rules));
  const Request any{{"x", "y"}};
  EXPECT_TRUE(check(limiter, any, 0, 7).allowed);
  EXPECT_FALSE(check(limiter, any, 0, 4).allowed);
  const CheckOutput peek = check(limiter, any, 0, 0);
  EXPECT_TRUE(peek.allowed);
  EXPECT_EQ(peek.rules[0].remaining, 3);
  const CheckOutput too_big = check(limiter, any, 0, 11);
  EXPECT_FALSE(too_big.allowed);
  EXPECT_EQ(too_big.rules[0].retry_after_us, -1);
}

TEST_F(LimiterTest, OverrideGivesTierItsOwnLimit) {
  RuleSet rules;
  Rule rule = make_rule("per-user", {{"user", each()}}, 1, kUsPerSecond, 1);
  rule.overrides.push_back({{{"tier", exact("premium")}}, {10, kUsPerSecond, 10}});
  rules.rules.push_back(std::move(rule));
  Limiter limiter({}, std::move(rules));
  const Request premium{{"user", "carol"}, {"tier", "premium"}};
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += check(limiter, premium, 0).allowed;
  EXPECT_EQ(allowed, 10);
  EXPECT_EQ(check(limiter, premium, 0).rules[0].params.limit, 10);
  // The same user without the tier is a different bucket with the base limit.
  const Request basic{{"user", "carol"}};
  EXPECT_TRUE(check(limiter, basic, 0).allowed);
  EXPECT_FALSE(check(limiter, basic, 0).allowed);
}

// Overrides are matched in order, first match wins, and each rule's
// overrides are its own (the compiled rules keep every rule's overrides in
// one list).
TEST_F(LimiterTest, TheFirstMatchingOverrideOfTheRightRuleWins) {
  RuleSet rules;
  Rule by_user = make_rule("per-user", {{"user", each()}}, 1, kUsPerSecond, 1);
  by_user.overrides.push_back({{{"tier", exact("gold")}}, {5, kUsPerSecond, 5}});
  by_user.overrides.push_back({{{"tier", exact("premium")}}, {10, kUsPerSecond, 10}});
  by_user.overrides.push_back({{{"plan", exact("team")}}, {20, kUsPerSecond, 20}});
  Rule by_route = make_rule("per-route", {{"route", each()}}, 100, kUsPerSecond, 100);
  by_route.overrides.push_back({{{"tier", exact("premium")}}, {1000, kUsPerSecond, 1000}});
  rules.rules.push_back(std::move(by_user));
  rules.rules.push_back(std::move(by_route));
  Limiter limiter({}, std::move(rules));

  const Request premium_team{{"user", "dave"}, {"tier", "premium"}, {"plan", "team"}};
  const CheckOutput out = check(limiter, premium_team, 0);
  ASSERT_EQ(out.rules.size(), 1u);
  EXPECT_EQ(out.rules[0].params.limit, 10);  // premium comes before team
  const Request team{{"user", "erin"}, {"plan", "team"}};
  EXPECT_EQ(check(limiter, team, 0).rules[0].params.limit, 20);
  const Request routed{{"route", "/a"}, {"tier", "premium"}};
  const CheckOutput route_out = check(limiter, routed, 0);
  ASSERT_EQ(route_out.rules.size(), 1u);
  EXPECT_EQ(route_out.rules[0].params.limit, 1000);  // per-route's own override
  const Request gold_route{{"route", "/b"}, {"tier", "gold"}};
  EXPECT_EQ(check(limiter, gold_route, 0).rules[0].params.limit, 100);  // gold is per-user's
}

TEST_F(LimiterTest, Exemptions) {
  RuleSet rules;
  rules.rules.push_back(make_rule("a", {{"user", each()}}, 0, kUsPerSecond, 0));
  rules.rules.push_back(make_rule("b", {{"user", each()}}, 1, kUsPerSecond, 1));
  rules.exemptions.push_back({{{"user", exact("healthcheck")}}, {}, {}});
  rules.exemptions.push_back({{{"user", exact("batch")}}, {"a"}, {}});
  Limiter limiter({}, std::move(rules));
  const CheckOutput health = check(limiter, Request{{"user", "healthcheck"}}, 0);
  EXPECT_TRUE(health.allowed);
  EXPECT_EQ(health.status, CheckStatus::kExempt);
  EXPECT_FALSE(check(limiter, Request{{"user", "x"}}, 0).allowed);  // a blocks everyone
  const CheckOutput batch = check(limiter, Request{{"user", "batch"}}, 0);
  EXPECT_TRUE(batch.allowed);  // a skipped, b allows once
  ASSERT_EQ(batch.rules.size(), 1u);
  EXPECT_EQ(batch.rules[0].name, "b");
  EXPECT_FALSE(check(limiter, Request{{"user", "batch"}}, 0).allowed);
  EXPECT_EQ(limiter.key_count(), 1u);  // denials and exemptions made no buckets
}

TEST_F(LimiterTest, InvalidChecks) {
  Limiter limiter({}, {});
  const CheckOutput dup = check(limiter, Request{{"user", "a"}, {"user", "b"}}, 0);
  EXPECT_EQ(dup.status, CheckStatus::kInvalid);
  EXPECT_FALSE(dup.allowed);
  EXPECT_NE(dup.error.find("appears twice"), std::string::npos);
  EXPECT_EQ(check(limiter, Request{{"x", "y"}}, 0, -1).status, CheckStatus::kInvalid);
  EXPECT_EQ(check(limiter, Request{{"x", "y"}}, 0, kMaxTokens + 1).status, CheckStatus::kInvalid);
  std::vector<Descriptor> many(65, Descriptor{"k", "v"});
  CheckOutput out;
  limiter.check({many, 1, nullptr}, 0, out);
  EXPECT_EQ(out.status, CheckStatus::kInvalid);
  EXPECT_EQ(limiter.stats().invalid, 4u);
}

TEST_F(LimiterTest, InlineLimit) {
  Limiter limiter({}, {});
  const InlineLimit limit{"job:42", {2, kUsPerSecond, 2}};
  const Request request{{"x", "y"}};
  CheckOutput out;
  for (int i = 0; i < 2; ++i) {
    limiter.check({request.descriptors, 1, &limit}, 0, out);
    EXPECT_TRUE(out.allowed);
  }
  limiter.check({request.descriptors, 1, &limit}, 0, out);
  EXPECT_FALSE(out.allowed);
  ASSERT_EQ(out.rules.size(), 1u);
  EXPECT_EQ(out.rules[0].name, "job:42");
  // Same key, other parameters: another bucket.
  const InlineLimit other{"job:42", {5, kUsPerSecond, 5}};
  limiter.check({request.descriptors, 1, &other}, 0, out);
  EXPECT_TRUE(out.allowed);
  const InlineLimit bad{"job:42", {5, 0, 5}};
  limiter.check({request.descriptors, 1, &bad}, 0, out);
  EXPECT_EQ(out.status, CheckStatus::kInvalid);
  // Swept once full, from the parameters carried in the key.
  EXPECT_EQ(limiter.sweep(10 * kUsPerSecond, 100), 2u);
  EXPECT_EQ(limiter.key_count(), 0u);

  Limiter disabled({.allow_inline_limits = false}, {});
  disabled.check({request.descriptors, 1, &limit}, 0, out);
  EXPECT_EQ(out.status, CheckStatus::kInvalid);
}

TEST_F(LimiterTest, SweepForgetsOnlyFullBuckets) {
  RuleSet rules;
  rules.rules.push_back(make_rule("per-user", {{"user", each()}}, 10, kUsPerSecond, 10));
  Limiter limiter({}, std::move(rules));
  check(limiter, Request{{"user", "a"}}, 0, 10);
  check(limiter, Request{{"user", "b"}}, 500'000, 10);
  EXPECT_EQ(limiter.sweep(kUsPerSecond, 100), 1u);  // a is full again, b is not
  EXPECT_EQ(limiter.key_count(), 1u);
  EXPECT_FALSE(check(limiter, Request{{"user", "b"}}, kUsPerSecond, 6).allowed);
  EXPECT_EQ(limiter.sweep(2 * kUsPerSecond, 100), 1u);
  EXPECT_EQ(limiter.stats().keys_evicted, 2u);
}

TEST_F(LimiterTest, KeyTableFullPolicy) {
  RuleSet rules;
  rules.rules.push_back(make_rule("per-user", {{"user", each()}}, 1, kUsPerSecond, 1));
  for (KeyTableFullPolicy policy : {KeyTableFullPolicy::kAllow, KeyTableFullPolicy::kDeny}) {
    Limiter limiter({.max_keys = 2, .key_table_full = policy}, rules);
    EXPECT_TRUE(check(limiter, Request{{"user", "a"}}, 0).allowed);
    EXPECT_TRUE(check(limiter, Request{{"user", "b"}}, 0).allowed);
    const CheckOutput full = check(limiter, Request{{"user", "c"}}, 0);
    EXPECT_EQ(full.status, CheckStatus::kKeyTableFull);
    EXPECT_EQ(full.allowed, policy == KeyTableFullPolicy::kAllow);
    EXPECT_EQ(limiter.stats().key_table_full, 1u);
    // Existing keys are still enforced.
    EXPECT_FALSE(check(limiter, Request{{"user", "a"}}, 0).allowed);
    // Once a and b have refilled, a new key makes room: the sweep forgets
    // both (full buckets are the same as fresh ones).
    EXPECT_TRUE(check(limiter, Request{{"user", "c"}}, 2 * kUsPerSecond).allowed);
    EXPECT_EQ(limiter.key_count(), 1u);
    EXPECT_EQ(limiter.stats().keys_evicted, 2u);
  }
}

TEST_F(LimiterTest, ReloadKeepsStateOfUnchangedRules) {
  RuleSet rules;
  rules.rules.push_back(make_rule("same", {{"user", each()}}, 1, kUsPerSecond, 1));
  rules.rules.push_back(make_rule("changes", {{"ip", each()}}, 1, kUsPerSecond, 1));
  rules.rules.push_back(make_rule("goes", {{"path", each()}}, 1, kUsPerSecond, 1));
  Limiter limiter({}, rules);
  const Request r{{"user", "a"}, {"ip", "1.2.3.4"}, {"path", "/"}};
  EXPECT_TRUE(check(limiter, r, 0).allowed);
  EXPECT_EQ(limiter.key_count(), 3u);

  RuleSet next;
  next.rules.push_back(make_rule("same", {{"user", each()}}, 1, kUsPerSecond, 1));
  next.rules.push_back(make_rule("changes", {{"ip", each()}}, 5, kUsPerSecond, 5));
  next.rules.push_back(make_rule("new", {{"method", each()}}, 1, kUsPerSecond, 1));
  const ReplaceSummary summary = limiter.replace_rules(next);
  EXPECT_EQ(summary.kept, 1u);
  EXPECT_EQ(summary.changed, 1u);
  EXPECT_EQ(summary.added, 1u);
  EXPECT_EQ(summary.removed, 1u);
  // "same" remembers its spent token; the orphans go at the next sweep even
  // though they are not full.
  EXPECT_FALSE(check(limiter, Request{{"user", "a"}}, 1).allowed);
  EXPECT_TRUE(check(limiter, Request{{"ip", "1.2.3.4"}}, 1).allowed);
  EXPECT_EQ(limiter.sweep(2, 100), 2u);
  EXPECT_EQ(limiter.key_count(), 2u);
}

TEST_F(LimiterTest, RuleCountersCountVerdictsAndSurviveAReloadOfUnchangedRules) {
  RuleSet rules;
  rules.rules.push_back(make_rule("same", {{"user", each()}}, 1, kUsPerSecond, 1));
  rules.rules.push_back(make_rule("changes", {{"ip", each()}}, 5, kUsPerSecond, 5));
  Limiter limiter({}, rules);
  ASSERT_EQ(limiter.rule_counters().size(), 3u);  // and the inline limits' slot
  const Request both{{"user", "a"}, {"ip", "1.2.3.4"}};
  EXPECT_TRUE(check(limiter, both, 0).allowed);
  EXPECT_FALSE(check(limiter, both, 0).allowed);  // "same" refuses, "changes" would admit
  const InlineLimit limit{"job", {1, kUsPerSecond, 1}};
  CheckOutput out;
  limiter.check({both.descriptors, 1, &limit}, 0, out);
  const auto counts = [&](std::size_t i) {
    const RuleCounters& c = limiter.rule_counters()[i];
    return std::vector<std::uint64_t>{c.checks(), c.allowed, c.denied, c.over_limit};
  };
  EXPECT_EQ(counts(0), (std::vector<std::uint64_t>{3, 1, 2, 0}));
  EXPECT_EQ(counts(1), (std::vector<std::uint64_t>{3, 3, 0, 0}));
  EXPECT_EQ(counts(2), (std::vector<std::uint64_t>{1, 1, 0, 0}));  // inline

  // Reordered, one changed, one added: the unchanged rule keeps its counts
  // wherever it now sits, the changed one starts again, inline stays.
  RuleSet next;
  next.rules.push_back(make_rule("new", {{"method", each()}}, 1, kUsPerSecond, 1));
  next.rules.push_back(make_rule("changes", {{"ip", each()}}, 6, kUsPerSecond, 6));
  next.rules.push_back(make_rule("same", {{"user", each()}}, 1, kUsPerSecond, 1));
  limiter.replace_rules(next);
  ASSERT_EQ(limiter.rule_counters().size(), 4u);
  EXPECT_EQ(counts(0), (std::vector<std::uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(counts(1), (std::vector<std::uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(counts(2), (std::vector<std::uint64_t>{3, 1, 2, 0}));
  EXPECT_EQ(counts(3), (std::vector<std::uint64_t>{1, 1, 0, 0}));
}

TEST_F(LimiterTest, RuleCountersCountThrottleModeAdmissions) {
  RuleSet rules;
  rules.rules.push_back(make_rule("shadow", {{"user", each()}}, 1, kUsPerSecond, 1));
  rules.rules[0].options.throttle.mode = alg::ThrottleMode::kShadow;
  Limiter limiter({}, rules);
  const Request r{{"user", "a"}};
  EXPECT_TRUE(check(limiter, r, 0).allowed);
  EXPECT_TRUE(check(limiter, r, 0).allowed);  // over the limit, admitted
  const RuleCounters& c = limiter.rule_counters()[0];
  EXPECT_EQ(c.allowed, 2u);
  EXPECT_EQ(c.denied, 0u);
  EXPECT_EQ(c.over_limit, 1u);
  EXPECT_EQ(limiter.stats().over_limit_admitted, 1u);
}

TEST_F(LimiterTest, ClockSteppingBackIsCountedAndMintsNothing) {
  RuleSet rules;
  rules.rules.push_back(make_rule("r", {}, 1, kUsPerSecond, 1));
  Limiter limiter({}, std::move(rules));
  const Request any{{"x", "y"}};
  EXPECT_TRUE(check(limiter, any, 10 * kUsPerSecond).allowed);
  EXPECT_FALSE(check(limiter, any, 0).allowed);
  EXPECT_EQ(limiter.stats().clock_went_back, 1u);
  EXPECT_TRUE(check(limiter, any, 11 * kUsPerSecond).allowed);
}

}  // namespace
}  // namespace rlimit::core
