#include "core/algorithms/concurrency.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

constexpr Concurrency::Params kTwo{2, 10 * kUsPerSecond};

TEST(ConcurrencyTest, AtMostNInFlight) {
  Concurrency::State s = Concurrency::fresh(kTwo, 0);
  EXPECT_EQ(Concurrency::evaluate(s, kTwo, 1, 0).remaining, 1);
  const Ticket a = Concurrency::commit(s, kTwo, 1, 0);
  const Ticket b = Concurrency::commit(s, kTwo, 1, 1'000'000);
  EXPECT_NE(a, kNoTicket);
  EXPECT_GT(b, a);
  const Verdict full = Concurrency::evaluate(s, kTwo, 1, 2'000'000);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.retry_after_us, 8'000'000);  // when `a` would expire
  EXPECT_EQ(full.reset_after_us, 9'000'000);  // when `b` would
  EXPECT_TRUE(Concurrency::release(s, kTwo, a, 2'000'000));
  EXPECT_FALSE(Concurrency::release(s, kTwo, a, 2'000'000));  // already released
  EXPECT_TRUE(Concurrency::evaluate(s, kTwo, 1, 2'000'000).allowed);
  EXPECT_EQ(Concurrency::in_flight(s, 2'000'000), 1);
}

TEST(ConcurrencyTest, LeasesOfCrashedClientsExpire) {
  Concurrency::State s = Concurrency::fresh(kTwo, 0);
  const Ticket a = Concurrency::commit(s, kTwo, 2, 0);  // one lease, two slots
  EXPECT_FALSE(Concurrency::evaluate(s, kTwo, 1, 9'999'999).allowed);
  EXPECT_TRUE(Concurrency::evaluate(s, kTwo, 2, 10'000'000).allowed);
  EXPECT_TRUE(Concurrency::is_idle(s, kTwo, 10'000'000));
  EXPECT_FALSE(Concurrency::release(s, kTwo, a, 10'000'000));  // too late
  EXPECT_TRUE(s.leases.empty());
}

TEST(ConcurrencyTest, ExtendIsAHeartbeat) {
  Concurrency::State s = Concurrency::fresh(kTwo, 0);
  const Ticket a = Concurrency::commit(s, kTwo, 1, 0);
  Concurrency::commit(s, kTwo, 1, 1'000'000);
  EXPECT_TRUE(Concurrency::extend(s, kTwo, a, 5'000'000));  // now expires at 15 s
  const Verdict v = Concurrency::evaluate(s, kTwo, 1, 6'000'000);
  EXPECT_EQ(v.retry_after_us, 5'000'000);  // the other lease goes first, at 11 s
  EXPECT_EQ(v.reset_after_us, 9'000'000);
  EXPECT_FALSE(Concurrency::extend(s, kTwo, a + 12345, 6'000'000));
  EXPECT_FALSE(Concurrency::extend(s, kTwo, kNoTicket, 6'000'000));
  EXPECT_FALSE(Concurrency::extend(s, kTwo, a, 15'000'000));  // expired
}

TEST(ConcurrencyTest, CostsZeroAndLarge) {
  const Concurrency::Params p{5, kUsPerSecond};
  Concurrency::State s = Concurrency::fresh(p, 0);
  EXPECT_EQ(Concurrency::commit(s, p, 0, 0), kNoTicket);  // nothing to hold
  EXPECT_TRUE(s.leases.empty());
  EXPECT_EQ(Concurrency::evaluate(s, p, 6, 0).retry_after_us, -1);
  Concurrency::commit(s, p, 3, 0);
  Concurrency::commit(s, p, 2, 100);
  EXPECT_TRUE(Concurrency::evaluate(s, p, 0, 200).allowed);  // at the limit, a peek fits
  const Verdict v = Concurrency::evaluate(s, p, 4, 200);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.excess, 4);
  EXPECT_EQ(v.retry_after_us, kUsPerSecond + 100 - 200);  // both leases must go
  const Verdict three = Concurrency::evaluate(s, p, 3, 200);
  EXPECT_EQ(three.retry_after_us, kUsPerSecond - 200);  // the 3-slot lease suffices
}

TEST(ConcurrencyTest, IdsNeverRepeatEvenAfterForgetting) {
  Concurrency::State s = Concurrency::fresh(kTwo, 5'000'000);
  std::vector<Ticket> ids;
  for (int i = 0; i < 100; ++i) {  // acquire and release within one microsecond
    ids.push_back(Concurrency::commit(s, kTwo, 1, 5'000'000));
    Concurrency::release(s, kTwo, ids.back(), 5'000'000);
  }
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_TRUE(Concurrency::is_idle(s, kTwo, 5'000'001));
  // Forgotten when idle and made again later: new ids are above the old.
  Concurrency::State again = Concurrency::fresh(kTwo, 5'000'001);
  const Ticket next = Concurrency::commit(again, kTwo, 1, 5'000'001);
  EXPECT_GT(next, ids.back());
  // A stale id from before does not free the new lease.
  EXPECT_FALSE(Concurrency::release(again, kTwo, ids.front(), 5'000'002));
  EXPECT_EQ(Concurrency::in_flight(again, 5'000'002), 1);
}

TEST(ConcurrencyTest, LocalOnlyAndBounded) {
  EXPECT_EQ(Concurrency::replication(kTwo), Replication::kLocalOnly);
  Concurrency::State s = Concurrency::fresh(kTwo, 0);
  Concurrency::charge_remote(s, kTwo, 100, 0);  // ignored
  EXPECT_TRUE(s.leases.empty());
  // Committing without evaluating (soft mode) goes beyond the limit, but the
  // table holds at most 2 * max_in_flight leases.
  for (int i = 0; i < 10; ++i) Concurrency::commit(s, kTwo, 1, i);
  EXPECT_EQ(s.leases.size(), 4u);
  EXPECT_EQ(Concurrency::commit(s, kTwo, 1, 10), kNoTicket);
  EXPECT_EQ(Concurrency::in_flight(s, 10), 4);
  EXPECT_EQ(Concurrency::evaluate(s, kTwo, 0, 10).remaining, 0);
}

TEST(ConcurrencyTest, ClockSteppingBackExpiresNothing) {
  Concurrency::State s = Concurrency::fresh(kTwo, 0);
  Concurrency::commit(s, kTwo, 2, 20 * kUsPerSecond);
  EXPECT_FALSE(Concurrency::evaluate(s, kTwo, 1, 5 * kUsPerSecond).allowed);
  EXPECT_EQ(Concurrency::evaluate(s, kTwo, 1, 5 * kUsPerSecond).retry_after_us, 25 * kUsPerSecond);
}

// The reference: a plain list of leases, scanned in full every time.
TEST(ConcurrencyTest, MatchesAListOfLeases) {
  struct Held {
    Ticket id;
    TimeUs expires;
    std::int64_t slots;
  };
  std::mt19937_64 rng(71);
  for (int trial = 0; trial < 100; ++trial) {
    const Concurrency::Params p{1 + static_cast<std::int64_t>(rng() % 8),
                                1 + static_cast<std::int64_t>(rng() % 5'000'000)};
    std::vector<Held> held;
    TimeUs now = static_cast<TimeUs>(rng() % 1'000'000);
    Concurrency::State s = Concurrency::fresh(p, now);
    for (int i = 0; i < 300; ++i) {
      now += static_cast<TimeUs>(rng() % (p.lease_ttl_us / 4 + 1));
      std::erase_if(held, [&](const Held& h) { return h.expires <= now; });
      std::int64_t in_flight = 0;
      TimeUs last = now;
      for (const Held& h : held) {
        in_flight += h.slots;
        last = std::max(last, h.expires);
      }
      ASSERT_EQ(Concurrency::in_flight(s, now), in_flight);
      switch (rng() % 4) {
        case 0:
          if (!held.empty()) {
            const std::size_t k = rng() % held.size();
            ASSERT_TRUE(Concurrency::release(s, p, held[k].id, now));
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
          }
          break;
        case 1:
          if (!held.empty()) {
            const std::size_t k = rng() % held.size();
            ASSERT_TRUE(Concurrency::extend(s, p, held[k].id, now));
            held[k].expires = now + p.lease_ttl_us;
          }
          break;
        default: {
          const std::int64_t cost = static_cast<std::int64_t>(rng() % (p.max_in_flight + 2));
          const bool fits = in_flight + cost <= p.max_in_flight;
          const Verdict v = Concurrency::evaluate(s, p, cost, now);
          ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
          ASSERT_EQ(v.remaining, p.max_in_flight - in_flight - (fits ? cost : 0));
          if (fits) {
            ASSERT_EQ(v.reset_after_us,
                      std::max(last, cost > 0 ? now + p.lease_ttl_us : now) - now);
            const Ticket id = Concurrency::commit(s, p, cost, now);
            if (cost > 0) held.push_back({id, now + p.lease_ttl_us, cost});
          } else if (cost <= p.max_in_flight) {
            // The earliest time enough leases have expired.
            std::vector<Held> by_expiry = held;
            std::sort(by_expiry.begin(), by_expiry.end(),
                      [](const Held& x, const Held& y) { return x.expires < y.expires; });
            std::int64_t left = in_flight;
            TimeUs when = now;
            for (const Held& h : by_expiry) {
              if (left + cost <= p.max_in_flight) break;
              left -= h.slots;
              when = h.expires;
            }
            ASSERT_EQ(v.retry_after_us, when - now);
          } else {
            ASSERT_EQ(v.retry_after_us, -1);
          }
        }
      }
    }
  }
}

TEST(ConcurrencyTest, ValidatesParameters) {
  EXPECT_EQ(Concurrency::validate(kTwo), nullptr);
  EXPECT_NE(Concurrency::validate({0, kUsPerSecond}), nullptr);
  EXPECT_NE(Concurrency::validate({Concurrency::kMaxInFlightBound + 1, kUsPerSecond}), nullptr);
  EXPECT_NE(Concurrency::validate({1, 0}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
