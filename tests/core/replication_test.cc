// The replicated counters: merging absolute per-origin values by max is
// commutative, associative and idempotent, so loss (repaired later),
// duplication and reordering change nothing; debts show as negative balances;
// restarts and garbage collection neither lose nor resurrect consumption.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/limiter.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

RuleSet one_rule(std::int64_t limit, std::int64_t period_us, std::int64_t burst) {
  Rule rule;
  rule.name = "per-user";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"user", each});
  rule.params = {limit, period_us, burst};
  RuleSet rules;
  rules.rules.push_back(rule);
  return rules;
}

// One counter value as it travels: a snapshot taken when sent.
struct Message {
  std::string key;
  std::string origin;
  std::uint64_t incarnation;
  std::uint64_t consumed;
};

struct Node {
  std::string id;
  std::unique_ptr<Limiter> limiter;

  Node(std::string node_id, const RuleSet& rules, std::uint64_t incarnation, TimeUs now)
      : id(std::move(node_id)),
        limiter(std::make_unique<Limiter>(LimiterOptions{.replicated = true}, rules)) {
    limiter->enable_replication(id, incarnation, now);
  }

  bool consume(const std::string& user, std::int64_t cost, TimeUs now) {
    const Descriptor d[] = {{"user", user}};
    CheckOutput out;
    limiter->check({d, cost, nullptr}, now, out);
    return out.allowed;
  }
  std::int64_t tokens(const std::string& user, TimeUs now) {
    const Descriptor d[] = {{"user", user}};
    CheckOutput out;
    limiter->check({d, 0, nullptr}, now, out);
    return out.rules.empty() ? 0 : out.rules[0].remaining;
  }
  // The balance itself, negative when in debt: probe with retry_after.
  std::int64_t retry_after_us(const std::string& user, std::int64_t cost, TimeUs now) {
    const Descriptor d[] = {{"user", user}};
    CheckOutput out;
    limiter->check({d, cost, nullptr}, now, out);
    return out.rules.empty() ? 0 : out.rules[0].retry_after_us;
  }
  std::vector<Message> snapshot() const {
    std::vector<Message> out;
    Ledger& ledger = const_cast<Limiter&>(*limiter).ledger();
    ledger.visit_slice(1 << 20, [&](const std::string& key, const Ledger::KeyState& state) {
      for (const Ledger::Entry& e : state.entries) {
        out.push_back({key, ledger.origin_name(e.origin), e.incarnation, e.consumed});
      }
    });
    return out;
  }
  void deliver(const Message& m, TimeUs now) {
    limiter->merge_remote(m.key, m.origin, m.incarnation, m.consumed, now);
  }
  // (key, origin, incarnation) -> consumed, for comparing whole ledgers.
  std::map<std::tuple<std::string, std::string, std::uint64_t>, std::uint64_t> ledger_view() const {
    std::map<std::tuple<std::string, std::string, std::uint64_t>, std::uint64_t> view;
    for (const Message& m : snapshot()) view[{m.key, m.origin, m.incarnation}] = m.consumed;
    return view;
  }
};

TEST(ReplicationTest, RandomLossDuplicationAndReorderingConverge) {
  const RuleSet rules = one_rule(1'000'000, kUsPerSecond, 1'000'000);
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Node> nodes;
    for (int i = 0; i < 4; ++i) nodes.emplace_back("n" + std::to_string(i), rules, 1000 + i, 0);
    std::vector<std::pair<std::size_t, Message>> in_flight;  // (destination, message)
    std::map<std::string, std::uint64_t> truth;               // user -> total consumed
    for (int step = 0; step < 300; ++step) {
      const std::size_t n = rng() % nodes.size();
      const std::string user = "u" + std::to_string(rng() % 5);
      const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 3);
      ASSERT_TRUE(nodes[n].consume(user, cost, 0));
      truth[user] += static_cast<std::uint64_t>(cost);
      // Gossip a snapshot of one node to another: lost 30%, duplicated 20%.
      const std::size_t from = rng() % nodes.size();
      const std::size_t to = rng() % nodes.size();
      for (const Message& m : nodes[from].snapshot()) {
        if (rng() % 10 < 3) continue;
        in_flight.push_back({to, m});
        if (rng() % 10 < 2) in_flight.push_back({to, m});
      }
      // Deliver a random subset in random order.
      std::shuffle(in_flight.begin(), in_flight.end(), rng);
      const std::size_t deliver = in_flight.size() / 2;
      for (std::size_t i = 0; i < deliver; ++i) nodes[in_flight[i].first].deliver(in_flight[i].second, 0);
      in_flight.erase(in_flight.begin(), in_flight.begin() + static_cast<std::ptrdiff_t>(deliver));
    }
    // Stale leftovers arrive late, then anti-entropy: everyone's state to everyone.
    for (auto& [to, m] : in_flight) nodes[to].deliver(m, 0);
    for (Node& from : nodes) {
      for (const Message& m : from.snapshot()) {
        for (Node& to : nodes) to.deliver(m, 0);
      }
    }
    const auto reference = nodes[0].ledger_view();
    for (const Node& node : nodes) EXPECT_EQ(node.ledger_view(), reference) << "seed " << seed;
    // Each bucket was charged exactly the cluster's total: no loss, no double count.
    for (const auto& [user, consumed] : truth) {
      for (Node& node : nodes) {
        EXPECT_EQ(node.tokens(user, 0), 1'000'000 - static_cast<std::int64_t>(consumed))
            << "seed " << seed << " node " << node.id << " user " << user;
      }
    }
  }
}

TEST(ReplicationTest, MergeOrderDoesNotMatter) {
  const RuleSet rules = one_rule(100, kUsPerSecond, 100);
  Node a("a", rules, 1, 0), b("b", rules, 2, 0), c("c", rules, 3, 0);
  for (int i = 0; i < 7; ++i) a.consume("x", 1, 0);
  for (int i = 0; i < 5; ++i) b.consume("x", 2, 0);
  std::vector<Message> all = a.snapshot();
  for (const Message& m : b.snapshot()) all.push_back(m);
  // An older value of a's counter, as a reordered datagram would bring it.
  Message stale = all[0];
  stale.consumed = 3;
  all.push_back(stale);
  std::mt19937_64 rng(7);
  std::map<std::tuple<std::string, std::string, std::uint64_t>, std::uint64_t> first;
  for (int round = 0; round < 10; ++round) {
    Node fresh("c" + std::to_string(round), rules, 10 + round, 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (const Message& m : all) fresh.deliver(m, 0);
    for (const Message& m : all) fresh.deliver(m, 0);  // idempotent
    if (round == 0) first = fresh.ledger_view();
    EXPECT_EQ(fresh.ledger_view(), first);
    EXPECT_EQ(fresh.tokens("x", 0), 100 - 7 - 10);
  }
}

TEST(ReplicationTest, OverspendShowsAsDebtAndIsRepaid) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node a("a", rules, 1, 0), b("b", rules, 2, 0);
  // Partitioned: each side spends the whole burst.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(a.consume("x", 1, 0));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.consume("x", 1, 0));
  for (const Message& m : b.snapshot()) a.deliver(m, 0);
  for (const Message& m : a.snapshot()) b.deliver(m, 0);
  // Balance -10 on both: one token needs 11 tokens of refill, 1.1 s.
  EXPECT_EQ(a.retry_after_us("x", 1, 0), 1'100'000);
  EXPECT_EQ(b.retry_after_us("x", 1, 0), 1'100'000);
  EXPECT_FALSE(a.consume("x", 1, 1'000'000));
  EXPECT_TRUE(a.consume("x", 1, 1'100'000));
  EXPECT_EQ(a.limiter->stats().remote_tokens_charged, 10u);
}

TEST(ReplicationTest, RestartedNodeKeepsItsOldConsumptionInForce) {
  const RuleSet rules = one_rule(10, 3600 * kUsPerSecond, 10);
  Node a("a", rules, 1'000, 0), b("b", rules, 2'000, 0);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(a.consume("x", 1, 0));
  for (const Message& m : a.snapshot()) b.deliver(m, 0);
  // a crashes and comes back with a larger incarnation and empty memory.
  Node a2("a", rules, 5'000, 10);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a2.consume("x", 1, 10));
  // Its new counter is a new entry: b adds it to the old one.
  for (const Message& m : a2.snapshot()) {
    EXPECT_NE(m.incarnation, a.snapshot()[0].incarnation);
    b.deliver(m, 10);
  }
  EXPECT_EQ(b.tokens("x", 10), 10 - 6 - 2);
  // a learns its earlier consumption from b and charges it.
  for (const Message& m : b.snapshot()) a2.deliver(m, 10);
  EXPECT_EQ(a2.tokens("x", 10), 10 - 6 - 2);
  EXPECT_EQ(a2.ledger_view(), b.ledger_view());
}

// Finding 3 of docs/accuracy.md. A node that starts (or restarts) after the
// cluster has run a while learns every origin's cumulative counter; charging
// it all put the node 900 tokens in debt here, while its peers had refilled
// long since, and it admitted nothing for as long as the others consumed
// every refill. History (entries older than the process) is charged up to
// one burst per key: the node starts empty, not in debt. Consumption by an
// origin that began after it (a partition's, say) is still charged in full.
TEST(ReplicationTest, ANodeStartedLaterIsChargedAtMostOneBurstOfHistory) {
  const RuleSet rules = one_rule(100, kUsPerSecond, 100);
  const TimeUs epoch = 1'000 * kUsPerSecond;  // wall clock at a's start
  Node a("a", rules, epoch, 0);
  // a consumes 1,000 over 10 s, at the limit.
  TimeUs now = 0;
  for (int i = 0; i < 1000; ++i) {
    now = i * 10'000;
    ASSERT_TRUE(a.consume("x", 1, now)) << i;
  }
  // b starts at 20 s (its incarnation is the wall clock then) and learns it.
  const TimeUs b_start = 20 * kUsPerSecond;
  Node b("b", rules, epoch + b_start, b_start);
  for (const Message& m : a.snapshot()) b.deliver(m, b_start);
  EXPECT_EQ(b.tokens("x", b_start), 0);  // was 100 - 1000 = -900
  EXPECT_EQ(b.retry_after_us("x", 1, b_start), 10'000);
  EXPECT_EQ(a.tokens("x", b_start), 100);
  EXPECT_EQ(b.limiter->ledger().history_forgiven(), 900u);
  EXPECT_EQ(b.ledger_view(), a.ledger_view());  // the counters themselves are whole
  // Later growth of the old entry is charged in full.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(a.consume("x", 1, b_start));
  for (const Message& m : a.snapshot()) b.deliver(m, b_start);
  // Balance -30: one token needs 31 of refill at 100/s.
  EXPECT_EQ(b.retry_after_us("x", 1, b_start), 310'000);
  // So is all of an origin that began after b, beyond any burst.
  Node c("c", rules, epoch + b_start + 1, b_start + 1);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 100; ++j) ASSERT_TRUE(c.consume("x", 1, b_start + 1 + i * kUsPerSecond));
  }
  for (const Message& m : c.snapshot()) b.deliver(m, b_start + 1);
  // Balance -530, less the 1 us of refill (0.0001 tokens): 531 to go.
  EXPECT_EQ(b.retry_after_us("x", 1, b_start + 1), 5'310'000 - 1);
}

TEST(ReplicationTest, IdleCountersAreForgottenOnlyAfterRetentionAndRepayment) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node a("a", rules, 1, 0), b("b", rules, 2, 0);
  for (int i = 0; i < 10; ++i) a.consume("x", 1, 0);
  for (int i = 0; i < 10; ++i) b.consume("x", 1, 0);
  for (const Message& m : b.snapshot()) a.deliver(m, 0);
  // Drain the changed list as a gossip round would.
  Ledger& ledger = a.limiter->ledger();
  for (int round = 0; round < 10; ++round) {
    for (const std::string& key : ledger.changed()) ledger.sent(key);
    ledger.compact_changed();
  }
  const TimeUs retention = a.limiter->counter_retention_us(ledger.changed().empty()
                                                               ? a.snapshot()[0].key
                                                               : ledger.changed()[0]);
  EXPECT_EQ(retention, 60 * kUsPerSecond);  // the minimum beats two 1 s periods
  // In debt (-10) and recently changed: kept.
  a.limiter->sweep(kUsPerSecond, 1000);
  EXPECT_EQ(ledger.size(), 1u);
  // Idle past retention and long repaid: forgotten.
  a.limiter->sweep(retention + 1, 1000);
  EXPECT_EQ(ledger.size(), 0u);
  EXPECT_EQ(a.limiter->stats().counter_keys_forgotten, 1u);
  // New consumption after forgetting starts a new entry under a larger
  // incarnation, so b (which still holds the old value) adds rather than
  // ignores it.
  ASSERT_TRUE(a.consume("x", 1, retention + 2));
  const std::vector<Message> fresh = a.snapshot();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_GT(fresh[0].incarnation, 1u);
  const std::uint64_t charged_before = b.limiter->stats().remote_tokens_charged;
  b.deliver(fresh[0], retention + 2);
  EXPECT_EQ(b.limiter->stats().remote_tokens_charged, charged_before + 1);
}

TEST(ReplicationTest, UnknownRuleKeysAreKeptButChargeNothing) {
  Node a("a", one_rule(10, kUsPerSecond, 10), 1, 0);
  RuleSet other = one_rule(10, kUsPerSecond, 10);
  other.rules[0].name = "renamed";
  Node b("b", other, 2, 0);
  ASSERT_TRUE(a.consume("x", 3, 0));
  for (const Message& m : a.snapshot()) b.deliver(m, 0);
  EXPECT_EQ(b.limiter->stats().remote_unknown_keys, 1u);
  EXPECT_EQ(b.limiter->key_count(), 0u);
  EXPECT_EQ(b.limiter->ledger().size(), 1u);
}

TEST(ReplicationTest, EchoOfOwnCounterChangesNothing) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node a("a", rules, 1, 0);
  ASSERT_TRUE(a.consume("x", 4, 0));
  Message echo = a.snapshot()[0];
  echo.consumed = 9;  // even a larger echo of our own live entry is ignored
  a.deliver(echo, 0);
  EXPECT_EQ(a.tokens("x", 0), 6);
}

}  // namespace
}  // namespace rlimit::core

namespace rlimit::core {
namespace {

TEST(ReplicationTest, InlineLimitsAndMultiRuleChecksReplicate) {
  // Two rules on one request plus an inline limit: three buckets, each
  // charged everywhere; the inline bucket is rebuilt from its key alone.
  RuleSet rules = one_rule(100, kUsPerSecond, 100);
  Rule daily = rules.rules[0];
  daily.name = "daily";
  daily.params = {5, 86400 * kUsPerSecond, 5};
  rules.rules.push_back(daily);
  Node a("a", rules, 1, 0), b("b", rules, 2, 0);
  const Descriptor d[] = {{"user", "x"}};
  const InlineLimit job{"export", {3, 60 * kUsPerSecond, 3}};
  CheckOutput out;
  for (int i = 0; i < 2; ++i) {
    a.limiter->check({d, 1, &job}, 0, out);
    ASSERT_TRUE(out.allowed);
  }
  for (const Message& m : a.snapshot()) b.deliver(m, 0);
  b.limiter->check({d, 0, &job}, 0, out);
  ASSERT_EQ(out.rules.size(), 3u);
  EXPECT_EQ(out.rules[0].remaining, 98);  // per-user
  EXPECT_EQ(out.rules[1].remaining, 3);   // daily
  EXPECT_EQ(out.rules[2].remaining, 1);   // the inline limit, built from its key
  b.limiter->check({d, 2, &job}, 0, out);
  EXPECT_FALSE(out.allowed);  // the inline bucket holds 1: all or nothing
  EXPECT_EQ(b.limiter->stats().remote_unknown_keys, 0u);
}

// Balances (docs/cluster.md, "Balances after a partition"). The bucket is
// capped at its burst, so its balance depends on the path: a node that sat
// at the cap while the others consumed is charged with all of it later and
// ends up below them for good. A peer's balance under the same counters is
// at or below one perfect limiter's, so raising ours to it is sound; what we
// were charged with beyond the peer's counters is subtracted first.
TEST(ReplicationTest, APeersBalanceUnderTheSameCountersRaisesOursToTheIdeal) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node a("a", rules, 1, 0), b("b", rules, 2, 0);
  // a consumes 3 and then idles at the cap; b, cut off from a, consumes 10
  // at 0 s and 10 at 1 s (its bucket refilled in between).
  ASSERT_TRUE(a.consume("x", 3, 0));
  ASSERT_TRUE(b.consume("x", 10, 0));
  ASSERT_TRUE(b.consume("x", 10, kUsPerSecond));
  // The heal: a learns b's 20; b does not hear of a's 3 yet.
  const TimeUs heal = kUsPerSecond;
  for (const Message& m : b.snapshot()) a.deliver(m, heal);
  const std::string key = b.snapshot().front().key;
  const Ledger::KeyState* a_state = a.limiter->ledger().find(key);
  const Ledger::KeyState* b_state = b.limiter->ledger().find(key);
  ASSERT_NE(a_state, nullptr);
  ASSERT_NE(b_state, nullptr);
  // a refilled to the cap (10) while b consumed, then paid 20: -10. The one
  // perfect limiter: 10 + 10 of refill - 23 = -3. b has not heard of a's 3: 0.
  EXPECT_EQ(a.limiter->offered_balance(key, *a_state, heal), -10);
  const std::optional<std::int64_t> offer = b.limiter->offered_balance(key, *b_state, heal);
  ASSERT_EQ(offer, 0);
  // b's offer stands for its 20; a holds 23, so 3 beyond: a rises to -3,
  // exactly the ideal, not to b's 0.
  EXPECT_EQ(a.limiter->raise_balance(key, *offer, 20, heal), 7);
  EXPECT_EQ(a.limiter->offered_balance(key, *a_state, heal), -3);
  EXPECT_EQ(a.limiter->stats().balances_raised, 1u);
  EXPECT_EQ(a.limiter->stats().balance_tokens_raised, 7u);
  // Never lowered: once b hears of a's 3 (and is charged to -3 itself), a's
  // offer of -3 for 23 changes nothing, and a lower one neither.
  for (const Message& m : a.snapshot()) b.deliver(m, heal);
  EXPECT_EQ(b.limiter->offered_balance(key, *b_state, heal), -3);
  EXPECT_EQ(b.limiter->raise_balance(key, -3, 23, heal), 0);
  EXPECT_EQ(b.limiter->raise_balance(key, -20, 23, heal), 0);
  EXPECT_EQ(b.limiter->stats().balance_offers_refused, 0u);
  // The same offer again changes nothing (idempotent).
  EXPECT_EQ(a.limiter->raise_balance(key, *offer, 20, heal), 0);
  // A stale offer is a low one: by 1.5 s a has refilled 5 to 2; b's offer
  // of 0 from the heal (for 20, 3 beyond) is -3 and raises nothing.
  EXPECT_EQ(a.limiter->raise_balance(key, *offer, 20, heal + kUsPerSecond / 2), 0);
  EXPECT_EQ(a.limiter->offered_balance(key, *a_state, heal + kUsPerSecond / 2), 2);
  // Never above the burst.
  EXPECT_EQ(a.limiter->raise_balance(key, 1'000, 20, heal + kUsPerSecond / 2), 8);
  EXPECT_EQ(a.limiter->offered_balance(key, *a_state, heal + kUsPerSecond / 2), 10);
}

// An offer for more consumption than we hold cannot stand for what we were
// charged with: refused and counted.
TEST(ReplicationTest, ABalanceOfferForCountersWeLackIsRefused) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node a("a", rules, 1, 0);
  ASSERT_TRUE(a.consume("x", 10, 0));
  const std::string key = a.snapshot().front().key;
  EXPECT_EQ(a.limiter->raise_balance(key, 5, 11, 0), 0);
  EXPECT_EQ(a.limiter->stats().balance_offers_refused, 1u);
  EXPECT_EQ(a.tokens("x", 0), 0);
  // A key we hold nothing for, or no bucket for, raises nothing.
  EXPECT_EQ(a.limiter->raise_balance("no such key", 5, 0, 0), 0);
}

// What a node forgave (history over one burst: docs/cluster.md, "Restarts
// and new nodes") it was never charged with; its offer subtracts it, so no
// peer inherits the forgiveness. A key reset here, or charged with less than
// its counters (no rule), is never offered.
TEST(ReplicationTest, ForgivenHistoryAndUnchargedKeysAreNotOffered) {
  const RuleSet rules = one_rule(10, kUsPerSecond, 10);
  Node b("b", rules, 2, 0);
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(b.consume("x", 10, s * kUsPerSecond));
  const TimeUs later = 2 * kUsPerSecond;
  Node c("c", rules, 100, later);  // started later: b's 30 are history
  for (const Message& m : b.snapshot()) c.deliver(m, later);
  const std::string key = b.snapshot().front().key;
  const Ledger::KeyState* state = c.limiter->ledger().find(key);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->history_forgiven, 20u);
  EXPECT_EQ(c.tokens("x", later), 0);  // charged one burst
  EXPECT_EQ(c.limiter->offered_balance(key, *state, later), -20);

  // Reset here: the counters stay, the bucket no longer answers for them.
  const Descriptor d[] = {{"user", "x"}};
  CheckOutput out;
  EXPECT_EQ(b.limiter->reset({d, 1, nullptr}, later, out), 1u);
  const Ledger::KeyState* b_state = b.limiter->ledger().find(key);
  ASSERT_NE(b_state, nullptr);
  EXPECT_EQ(b.limiter->offered_balance(key, *b_state, later), std::nullopt);

  // No rule here: kept and passed on, charged to nothing, never offered.
  Node d_node("d", RuleSet{}, 3, 0);
  for (const Message& m : b.snapshot()) d_node.deliver(m, later);
  const Ledger::KeyState* d_state = d_node.limiter->ledger().find(key);
  ASSERT_NE(d_state, nullptr);
  EXPECT_TRUE(d_state->uncharged);
  EXPECT_EQ(d_node.limiter->offered_balance(key, *d_state, later), std::nullopt);
}

}  // namespace
}  // namespace rlimit::core
