// The ledger's history rule: the first sight of an entry that began before
// this process started is history, and a key's bucket is charged with at most
// history_cap of it in total (docs/cluster.md, "Restarts and new nodes").
#include "core/ledger.h"

#include <gtest/gtest.h>

#include "core/time.h"

namespace rlimit::core {
namespace {

constexpr std::uint64_t kOurIncarnation = 50 * kUsPerSecond;

Ledger started_at(std::uint64_t incarnation) {
  Ledger ledger;
  ledger.set_self("me", incarnation, 0);
  return ledger;
}

TEST(LedgerTest, FirstSightOfAnEntryOlderThanUsIsHistory) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  // Began before we did: its whole value is history.
  Ledger::Merged m = ledger.merge("k", a, kOurIncarnation - 1, 700, 10);
  EXPECT_EQ(m.increase, 700u);
  EXPECT_EQ(m.history, 700u);
  // Its later growth is consumption we are here to see: not history.
  m = ledger.merge("k", a, kOurIncarnation - 1, 750, 20);
  EXPECT_EQ(m.increase, 50u);
  EXPECT_EQ(m.history, 0u);
  // Old news and duplicates raise nothing.
  m = ledger.merge("k", a, kOurIncarnation - 1, 740, 30);
  EXPECT_EQ(m.increase, 0u);
  EXPECT_EQ(m.history, 0u);
  // An entry that began after we did (a new origin, a restart of a peer, a
  // partition's consumption) is charged in full, however large.
  const std::uint32_t b = ledger.intern_origin("b");
  m = ledger.merge("k", b, kOurIncarnation + 1, 5000, 40);
  EXPECT_EQ(m.increase, 5000u);
  EXPECT_EQ(m.history, 0u);
  // So is our own earlier life's entry only if it is older than us: it is.
  m = ledger.merge("k", 0, kOurIncarnation - 10, 30, 50);
  EXPECT_EQ(m.history, 30u);
}

TEST(LedgerTest, HistoryIsChargedUpToTheCapPerKeyInTotalAndTheRestCounted) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  const std::uint32_t b = ledger.intern_origin("b");
  const std::uint64_t old = kOurIncarnation - kUsPerSecond;
  // Two origins' history of key k, 700 + 600, against a burst of 100.
  Ledger::Merged m = ledger.merge("k", a, old, 700, 10);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 100u);
  m = ledger.merge("k", b, old, 600, 10);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 0u);
  EXPECT_EQ(ledger.history_forgiven(), 1200u);
  // Growth is charged in full.
  m = ledger.merge("k", a, old, 740, 20);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 40u);
  // Below the cap, history is charged whole; the cap is per key.
  m = ledger.merge("j", a, old, 30, 20);
  EXPECT_EQ(ledger.charge_for("j", m, 100), 30u);
  m = ledger.merge("j", b, old, 50, 20);
  EXPECT_EQ(ledger.charge_for("j", m, 100), 50u);
  m = ledger.merge("j", b, old + 1, 50, 20);  // another entry: 20 of it fits
  EXPECT_EQ(ledger.charge_for("j", m, 100), 20u);
  EXPECT_EQ(ledger.history_forgiven(), 1230u);
  EXPECT_EQ(ledger.find("j")->history_charged, 100u);
  // The ledger keeps every value whole: what is gossiped is unchanged.
  std::uint64_t total = 0;
  for (const Ledger::Entry& e : ledger.find("k")->entries) total += e.consumed;
  EXPECT_EQ(total, 740u + 600u);
}

TEST(LedgerTest, WithoutReplicationNothingIsHistory) {
  Ledger ledger;  // set_self never called: incarnation 0
  const std::uint32_t a = ledger.intern_origin("a");
  const Ledger::Merged m = ledger.merge("k", a, 0, 10, 0);
  EXPECT_EQ(m.history, 0u);
  EXPECT_EQ(ledger.charge_for("k", m, 1), 10u);
}

}  // namespace
}  // namespace rlimit::core
