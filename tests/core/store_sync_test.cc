// StoreSync (Redis mode's core) against MemoryStore on virtual time: nodes
// share consumption through the store only; failures, retries, duplicates,
// bounds and restarts lose nothing and charge nothing twice.
#include "core/store_sync.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_store.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

// 100 per user per hour: nothing refills during a test.
RuleSet hourly_rule() {
  Rule rule;
  rule.name = "per-user";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"user", each});
  rule.params = {100, 3600 * kUsPerSecond, 100};
  RuleSet rules;
  rules.rules.push_back(rule);
  return rules;
}

// 100 per user per second, burst 100.
RuleSet per_second_rule() {
  RuleSet rules = hourly_rule();
  rules.rules[0].params = {100, kUsPerSecond, 100};
  return rules;
}

struct Node {
  std::unique_ptr<Limiter> limiter;
  std::unique_ptr<StoreSync> sync;

  Node(const std::string& id, std::uint64_t incarnation, StoreSyncOptions options = {},
       TimeUs now = 0, RuleSet rules = hourly_rule())
      : limiter(std::make_unique<Limiter>(LimiterOptions{.replicated = true, .fair_share = false},
                                          std::move(rules))) {
    limiter->enable_replication(id, incarnation, now);
    sync = std::make_unique<StoreSync>(options, *limiter);
  }
  // Admitted units of `count` checks of cost 1.
  int consume(const std::string& user, int count, TimeUs now) {
    int admitted = 0;
    for (int i = 0; i < count; ++i) {
      const Descriptor d[] = {{"user", user}};
      CheckOutput out;
      limiter->check({d, 1, nullptr}, now, out);
      admitted += out.allowed ? 1 : 0;
    }
    return admitted;
  }
  std::int64_t remaining(const std::string& user, TimeUs now) {
    const Descriptor d[] = {{"user", user}};
    CheckOutput out;
    limiter->check({d, 0, nullptr}, now, out);
    return out.rules.empty() ? -1 : out.rules[0].remaining;
  }
  // One sync against `store`, answered at once; false if none was due.
  bool sync_with(MemoryStore& store, TimeUs now) {
    std::optional<StoreBatch> batch = sync->tick(now);
    if (!batch) return false;
    sync->on_result(store.apply(*batch, now), now);
    return true;
  }
  // One sync with the store down: the batch fails whole.
  void sync_failing(TimeUs now) {
    std::optional<StoreBatch> batch = sync->tick(now);
    if (!batch) return;
    StoreResult failed;
    failed.id = batch->id;
    failed.ok = false;
    failed.error = "connection refused";
    for (const StoreWrite& w : batch->writes) failed.failed_writes.push_back(w.key);
    sync->on_result(failed, now);
  }
};

constexpr TimeUs kInterval = 100'000;

TEST(StoreSyncTest, ConsumptionReachesANodeThroughTheStore) {
  MemoryStore store;
  Node a("a", 1), b("b", 1);
  EXPECT_EQ(a.consume("u1", 30, 0), 30);
  ASSERT_TRUE(a.sync_with(store, 1));
  EXPECT_EQ(a.sync->stats().keys_written, 1u);
  EXPECT_EQ(store.live_keys(1), 1u);
  // b learns of the key when it first spends on it: its write is answered
  // with every origin's counters.
  EXPECT_EQ(b.consume("u1", 1, 2), 1);
  ASSERT_TRUE(b.sync_with(store, 3));
  EXPECT_EQ(b.remaining("u1", 4), 100 - 31);
  EXPECT_EQ(b.sync->stats().tokens_charged_remote, 30u);
  // a reads the key in rotation (it spends nothing new) and learns b's 1.
  ASSERT_TRUE(a.sync_with(store, 1 + kInterval));
  EXPECT_EQ(a.remaining("u1", 2 + kInterval), 100 - 31);
}

TEST(StoreSyncTest, ADuplicatedOrReplayedResultChargesNothingTwice) {
  MemoryStore store;
  Node a("a", 1), b("b", 1);
  a.consume("u1", 40, 0);
  a.sync_with(store, 1);
  b.consume("u1", 1, 2);
  std::optional<StoreBatch> batch = b.sync->tick(3);
  ASSERT_TRUE(batch);
  const StoreResult result = store.apply(*batch, 3);
  b.sync->on_result(result, 3);
  b.sync->on_result(result, 4);  // a duplicate
  StoreBatch again = *batch;
  b.sync->on_result(store.apply(again, 5), 5);  // the same batch retried
  EXPECT_EQ(b.remaining("u1", 6), 100 - 41);
  EXPECT_EQ(b.sync->stats().tokens_charged_remote, 40u);
}

TEST(StoreSyncTest, AFailedWriteIsWrittenAgainWithTheLatestValueAndTheNodeDecidesAlone) {
  MemoryStore store;
  Node a("a", 1);
  a.consume("u1", 10, 0);
  std::optional<StoreBatch> batch = a.sync->tick(1);
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->writes.size(), 1u);
  StoreResult failed;
  failed.id = batch->id;
  failed.ok = false;
  failed.error = "connection refused";
  failed.failed_writes = {batch->writes[0].key};
  a.sync->on_result(failed, 2);
  EXPECT_FALSE(a.sync->store_healthy());
  EXPECT_TRUE(a.sync->take_health_change());
  EXPECT_FALSE(a.sync->take_health_change()) << "said once per change";
  EXPECT_EQ(a.sync->stats().store_down, 1u);
  // The next batch writes the key again though nothing changed since.
  std::optional<StoreBatch> again = a.sync->tick(1 + kInterval);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->writes.size(), 1u);
  failed.id = again->id;
  a.sync->on_result(failed, 2 + kInterval);
  EXPECT_EQ(a.sync->stats().writes_failed, 2u);
  // Deciding goes on from local state while the store is down.
  EXPECT_EQ(a.consume("u1", 5, 3 + kInterval), 5);
  EXPECT_EQ(a.remaining("u1", 3 + kInterval), 85);
  // The store is back: one write of the value of that time.
  ASSERT_TRUE(a.sync_with(store, 1 + 2 * kInterval));
  EXPECT_TRUE(a.sync->store_healthy());
  EXPECT_TRUE(a.sync->take_health_change());
  StoreBatch probe;
  probe.id = 99;
  probe.reads = {batch->writes[0].key};
  const StoreResult read = store.apply(probe, 2 + 2 * kInterval);
  ASSERT_EQ(read.keys.size(), 1u);
  ASSERT_EQ(read.keys[0].entries.size(), 1u);
  EXPECT_EQ(read.keys[0].entries[0].consumed, 15u);
  EXPECT_EQ(a.remaining("u1", 3 + 2 * kInterval), 85) << "its own echo charged nothing";
}

TEST(StoreSyncTest, ABatchWithoutAnAnswerIsGivenUpAndALateAnswerStillMerges) {
  MemoryStore store;
  StoreSyncOptions options;
  options.batch_timeout_us = 1'000'000;
  Node a("a", 1, options), b("b", 1, options);
  b.consume("u1", 20, 0);
  b.sync_with(store, 1);
  a.consume("u1", 1, 0);
  std::optional<StoreBatch> lost = a.sync->tick(1);
  ASSERT_TRUE(lost);
  // No batch while one is in flight, however long the interval past.
  EXPECT_FALSE(a.sync->tick(1 + 5 * kInterval));
  std::optional<StoreBatch> retry = a.sync->tick(2 + options.batch_timeout_us);
  ASSERT_TRUE(retry);
  EXPECT_EQ(a.sync->stats().batches_timed_out, 1u);
  EXPECT_FALSE(a.sync->store_healthy());
  ASSERT_EQ(retry->writes.size(), 1u) << "the given-up write is written again";
  // The first batch's answer arrives late: merged, bookkeeping unchanged.
  a.sync->on_result(store.apply(*lost, 3 + options.batch_timeout_us), 3 + options.batch_timeout_us);
  EXPECT_TRUE(a.sync->in_flight());
  EXPECT_EQ(a.remaining("u1", 4 + options.batch_timeout_us), 100 - 21);
  a.sync->on_result(store.apply(*retry, 5 + options.batch_timeout_us),
                    5 + options.batch_timeout_us);
  EXPECT_FALSE(a.sync->in_flight());
  EXPECT_EQ(a.remaining("u1", 6 + options.batch_timeout_us), 100 - 21);
}

TEST(StoreSyncTest, WritesAndReadsPerBatchAreBoundedAndTheRestWaits) {
  MemoryStore store;
  StoreSyncOptions options;
  options.max_writes_per_batch = 3;
  options.max_reads_per_batch = 2;
  Node a("a", 1, options);
  for (int u = 0; u < 7; ++u) a.consume("u" + std::to_string(u), 1, 0);
  std::size_t written = 0;
  TimeUs now = 1;
  for (int round = 0; round < 3; ++round, now += kInterval) {
    std::optional<StoreBatch> batch = a.sync->tick(now);
    ASSERT_TRUE(batch);
    EXPECT_LE(batch->writes.size(), 3u);
    EXPECT_LE(batch->reads.size(), 2u);
    written += batch->writes.size();
    a.sync->on_result(store.apply(*batch, now), now);
  }
  EXPECT_EQ(written, 7u);
  EXPECT_EQ(a.sync->stats().batches_full, 2u);
  EXPECT_EQ(a.sync->dirty_keys(), 0u);
  EXPECT_EQ(a.sync->held_keys(), 7u);
  // Nothing new: the next batches only read, two keys each, in rotation.
  std::optional<StoreBatch> batch = a.sync->tick(now);
  ASSERT_TRUE(batch);
  EXPECT_TRUE(batch->writes.empty());
  EXPECT_EQ(batch->reads.size(), 2u);
  EXPECT_FALSE(a.sync->tick(now + 1)) << "one batch per interval";
}

TEST(StoreSyncTest, ARestartedNodeChargesItsOldCountersAsHistoryOnce) {
  MemoryStore store;
  Node a("a", 1);
  EXPECT_EQ(a.consume("u1", 60, 0), 60);
  a.sync_with(store, 1);
  // The node restarts (a larger incarnation, an empty ledger) and spends on
  // the key again: its write brings back its old counter, which is history:
  // at most one burst of it is charged (here all 60 of 100).
  Node restarted("a", 2, {}, 10 * kUsPerSecond);
  EXPECT_EQ(restarted.consume("u1", 1, 10 * kUsPerSecond), 1);
  restarted.sync_with(store, 10 * kUsPerSecond + 1);
  EXPECT_EQ(restarted.remaining("u1", 10 * kUsPerSecond + 2), 100 - 61);
  restarted.sync_with(store, 10 * kUsPerSecond + 1 + kInterval);
  EXPECT_EQ(restarted.remaining("u1", 10 * kUsPerSecond + 2 + kInterval), 100 - 61);
}

TEST(StoreSyncTest, TheShareViewCountsOriginsThatChangedLately) {
  MemoryStore store;
  Node a("a", 1), b("b", 1), c("c", 1);
  b.consume("u1", 1, 0);
  b.sync_with(store, 1);
  c.consume("u1", 1, 0);
  c.sync_with(store, 1);
  a.consume("u1", 1, 0);
  a.sync_with(store, 2);
  EXPECT_EQ(a.sync->recent_origins(), 2u);
  // Ten seconds without a change from them: forgotten.
  a.sync->tick(2 + StoreSync::kOriginWindowUs + kInterval);
  EXPECT_EQ(a.sync->recent_origins(), 0u);
}

TEST(StoreSyncTest, TheStoreKeepsAKeyForTwiceItsRetention) {
  MemoryStore store;
  Node a("a", 1);
  a.consume("u1", 1, 0);
  std::optional<StoreBatch> batch = a.sync->tick(1);
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->writes.size(), 1u);
  const std::int64_t retention_ms = a.limiter->counter_retention_us(batch->writes[0].key) / 1000;
  EXPECT_EQ(batch->writes[0].ttl_ms, 2 * retention_ms);
  store.apply(*batch, 1);
  EXPECT_EQ(store.live_keys(1 + (2 * retention_ms - 1) * 1000), 1u);
  EXPECT_EQ(store.live_keys(1 + 2 * retention_ms * 1000), 0u);
}

TEST(StoreSyncTest, AResultWithManyNewOriginsAndOurEchoMergesEveryOther) {
  // Interning hundreds of new origins moves the ledger's names; the echo of
  // our own counter among them must still be told apart (a dangling name
  // here was a use after free, found by a 500-node simulation).
  Node a("a", 1);
  a.consume("u1", 1, 0);
  std::optional<StoreBatch> batch = a.sync->tick(1);
  ASSERT_TRUE(batch);
  StoreResult result;
  result.id = batch->id;
  StoreKey key{batch->writes[0].key, {}};
  for (int i = 0; i < 300; ++i) key.entries.push_back({"peer" + std::to_string(i), 1, 0});
  key.entries.push_back({"a", 1, 1});  // our echo
  key.entries.push_back({"late", 1, 7});
  result.keys.push_back(key);
  a.sync->on_result(result, 2);
  EXPECT_EQ(a.sync->stats().tokens_charged_remote, 7u);
  EXPECT_EQ(a.sync->recent_origins(), 1u) << "only the origin whose counter rose";
  EXPECT_EQ(a.remaining("u1", 3), 100 - 8);
}

TEST(StoreSyncTest, TheFinalBatchWritesWhatTheStoreMayLackAtOnce) {
  MemoryStore store;
  Node a("a", 1), b("b", 1);
  EXPECT_EQ(a.consume("u1", 5, 0), 5);
  std::optional<StoreBatch> lost = a.sync->tick(1);  // in flight, never answered
  ASSERT_TRUE(lost);
  EXPECT_EQ(a.consume("u2", 3, 2), 3);  // waiting for the next interval
  EXPECT_EQ(a.consume("u1", 1, 3), 1);
  std::optional<StoreBatch> last = a.sync->final_batch(4);
  ASSERT_TRUE(last);
  EXPECT_TRUE(last->reads.empty());
  ASSERT_EQ(last->writes.size(), 2u);
  EXPECT_EQ(last->writes[0].key, lost->writes[0].key);
  EXPECT_EQ(last->writes[0].entries[0].consumed, 6u);  // the latest value
  EXPECT_EQ(last->writes[1].entries[0].consumed, 3u);
  a.sync->on_result(store.apply(*last, 5), 5);
  EXPECT_TRUE(a.sync->store_healthy());
  EXPECT_FALSE(a.sync->in_flight());
  EXPECT_FALSE(a.sync->final_batch(6));  // nothing left
  // b hears all of it on its first write of each key.
  EXPECT_EQ(b.consume("u1", 1, 7), 1);
  EXPECT_EQ(b.consume("u2", 1, 7), 1);
  ASSERT_TRUE(b.sync_with(store, 8));
  EXPECT_EQ(b.sync->stats().tokens_charged_remote, 9u);
}

TEST(StoreSyncTest, StandInsFollowAtMostTheLedgersEntriesPerKey) {
  Node a("a", 1);
  a.limiter->ledger().set_bounds({.max_entries_per_key = 2});
  EXPECT_EQ(a.consume("u1", 1, 0), 1);
  std::optional<StoreBatch> batch = a.sync->tick(1);
  ASSERT_TRUE(batch);
  StoreResult result;
  result.id = batch->id;
  result.keys.push_back({batch->writes[0].key, {{"b", 1, 5}, {"c", 1, 5}, {"d", 1, 5}}});
  a.sync->on_result(result, 2);
  EXPECT_EQ(a.sync->stats().standin_origins_untracked, 1u);
}

// Two nodes each demand 150/s of a key limited to 100/s, 5 s through the
// store, 5 s with the store down, 5 s after it returns. Alone, each would
// spend the whole limit while the store is down (200/s in all) and both
// would then be silent while repaying it; with stand-ins each charges the
// other at its earlier rate, so the pair stays near the limit throughout.
struct OutageAdmitted {
  int before = 0, during = 0, after = 0;
  std::uint64_t standin = 0;
};
OutageAdmitted run_outage(TimeUs standin_max_us) {
  MemoryStore store;
  StoreSyncOptions options;
  options.standin_max_us = standin_max_us;
  Node a("a", 1, options, 0, per_second_rule()), b("b", 1, options, 0, per_second_rule());
  OutageAdmitted out;
  constexpr TimeUs kStep = 10'000;  // 1.5 checks per node per step
  for (TimeUs t = 0; t < 15 * kUsPerSecond; t += kStep) {
    const int per_step = (t / kStep) % 2 == 0 ? 1 : 2;
    const int admitted = a.consume("u", per_step, t) + b.consume("u", per_step, t);
    const bool down = t >= 5 * kUsPerSecond && t < 10 * kUsPerSecond;
    if (t < 5 * kUsPerSecond) {
      out.before += admitted;
    } else if (down) {
      out.during += admitted;
    } else {
      out.after += admitted;
    }
    for (Node* n : {&a, &b}) {
      if (down) {
        n->sync_failing(t);
      } else {
        n->sync_with(store, t);
      }
    }
  }
  out.standin = a.sync->stats().tokens_charged_standin + b.sync->stats().tokens_charged_standin;
  return out;
}

TEST(StoreSyncTest, WhileTheStoreIsDownEachNodeChargesTheOthersAtTheirEarlierRates) {
  const OutageAdmitted alone = run_outage(0);
  const OutageAdmitted standin = run_outage(60 * kUsPerSecond);
  std::printf("[outage] alone: %d / %d / %d; stand-ins: %d / %d / %d (charged %llu)\n",
              alone.before, alone.during, alone.after, standin.before, standin.during,
              standin.after, static_cast<unsigned long long>(standin.standin));
  // Before: the limit plus the burst, either way.
  EXPECT_NEAR(standin.before, 600, 30);
  EXPECT_EQ(alone.before, standin.before);
  // Alone: the whole limit each (about 1,000 of an ideal 500), then the
  // excess repaid after the store returns.
  EXPECT_EQ(alone.standin, 0u);
  EXPECT_GT(alone.during, 900);
  EXPECT_LT(alone.after, 200);
  // Stand-ins: near the limit while down, and no silence after.
  EXPECT_GT(standin.standin, 300u);
  EXPECT_NEAR(standin.during, 500, 50);
  EXPECT_NEAR(standin.after, 500, 50);
}

}  // namespace
}  // namespace rlimit::core
