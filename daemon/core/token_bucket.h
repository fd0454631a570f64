// A token bucket with continuous refill in exact integer arithmetic.
//
// The balance is `tokens_ + frac_ / period_us`: whole tokens plus a remainder
// in units of 1/period_us of a token. Elapsed time dt adds dt * limit units, so
// refill neither mints nor loses tokens however often it runs. The balance may
// go negative (charge() takes unconditionally: the cluster charges remote
// consumption into it) and is capped at `burst`. A clock that steps backwards
// refills nothing and does not move the bucket's time back.
//
// The parameters are not stored here (they belong to the rule); every call
// must pass the same params the bucket was made with. Not thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "core/divider.h"
#include "core/time.h"

namespace rlimit::core {

struct BucketParams {
  std::int64_t limit = 0;      // tokens added per period, >= 0
  std::int64_t period_us = 0;  // > 0
  std::int64_t burst = 0;      // capacity, >= 0

  friend bool operator==(const BucketParams&, const BucketParams&) = default;
};

// Largest limit, burst or cost accepted anywhere; keeps every product of the
// arithmetic inside 128 bits and every balance inside 64.
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 50;
// Largest period (about 100 years).
inline constexpr std::int64_t kMaxPeriodUs = std::int64_t{100} * 366 * 24 * 3600 * 1'000'000;

// nullptr when `params` are usable, else what is wrong.
const char* validate(const BucketParams& params);

class TokenBucket {
 public:
  // A bucket holding `burst` tokens at time `now`.
  static TokenBucket full(const BucketParams& params, TimeUs now);

  // Adds what accrued since the last refill, up to burst. The common cases
  // inline, in 64 bits and without a division: less than a whole token
  // accrued (a busy key: the fraction grows) or enough to fill the bucket (an
  // idle one); everything else in refill_exactly().
  void refill(const BucketParams& params, TimeUs now) {
    if (now <= last_us_) return;  // no time passed, or the clock stepped back: mint nothing
    if (tokens_ >= params.burst) {
      last_us_ = now;
      frac_ = 0;
      return;
    }
    std::int64_t elapsed, scaled, units, deficit;
    if (!__builtin_sub_overflow(now, last_us_, &elapsed) &&
        !__builtin_mul_overflow(elapsed, params.limit, &scaled) &&
        !__builtin_add_overflow(scaled, frac_, &units)) {
      if (units < params.period_us) {
        last_us_ = now;
        frac_ = units;
        return;
      }
      if (!__builtin_mul_overflow(params.burst - tokens_, params.period_us, &deficit) &&
          units >= deficit) {
        last_us_ = now;
        tokens_ = params.burst;
        frac_ = 0;
        return;
      }
    }
    refill_exactly(params, now);
  }

  // True if a request of `cost` may proceed now (balance >= cost). Call
  // refill() first.
  bool allows(std::int64_t cost) const { return tokens_ >= cost; }

  // Removes `cost` tokens unconditionally; the balance may go negative. Stops
  // at -kMaxTokens so no amount of remote charging can overflow.
  void charge(std::int64_t cost) {
    assert(cost >= 0 && cost <= kMaxTokens);
    tokens_ = std::max(tokens_ - cost, -kMaxTokens);
  }

  // Raises the balance to `tokens` whole tokens, capped at burst, if that is
  // more than the balance now (the fraction goes). Returns by how many whole
  // tokens it rose (0: nothing changed). Call refill() first. For balances
  // learned from peers (docs/cluster.md, "Balances after a partition").
  std::int64_t raise_to(const BucketParams& params, std::int64_t tokens);

  // Whole tokens (floor of the balance; negative when in debt).
  std::int64_t tokens() const { return tokens_; }
  // What the bucket accrues over the next `span_us` from the fraction it
  // holds now, as refill() would count it but not capped at burst (a fair
  // share's pool counts an epoch's whole refill: docs/cluster.md, "A
  // refill's fraction"): whole tokens, at most kMaxTokens, and the fraction
  // of a token beyond them in 2^-fraction_bits. Call refill() first.
  struct Accrual {
    std::int64_t tokens = 0;
    std::uint32_t fraction = 0;
  };
  Accrual accrual_over(const BucketParams& params, TimeUs span_us, int fraction_bits) const {
    assert(params.period_us > 0 && span_us >= 0 && fraction_bits < 32);
    const __int128 units = static_cast<__int128>(params.limit) * span_us + frac_;
    return {static_cast<std::int64_t>(std::min<__int128>(units / params.period_us, kMaxTokens)),
            static_cast<std::uint32_t>(((units % params.period_us) << fraction_bits) /
                                       params.period_us)};
  }
  TimeUs last_refill_us() const { return last_us_; }

  // Microseconds until a request of `cost` could succeed: 0 if it can now, -1
  // if it never can (cost above burst, or limit 0 with too few tokens).
  // With `limit_divider` (Divider(params.limit), built once per rule) the
  // division by the limit is a multiply: the same results, faster.
  std::int64_t retry_after_us(const BucketParams& params, std::int64_t cost,
                              const Divider* limit_divider = nullptr) const {
    if (tokens_ >= cost) return 0;
    if (cost > params.burst) return -1;
    return time_to_accrue_us(params, cost - tokens_, frac_, limit_divider);
  }
  // Microseconds until the balance reaches burst (0 when full); the same
  // `limit_divider`.
  std::int64_t reset_after_us(const BucketParams& params,
                              const Divider* limit_divider = nullptr) const {
    if (tokens_ >= params.burst) return 0;
    return time_to_accrue_us(params, params.burst - tokens_, frac_, limit_divider);
  }
  bool is_full(const BucketParams& params) const { return tokens_ >= params.burst; }

 private:
  // refill() for whole tokens accrued short of burst, or where 64 bits
  // overflow: divides, in 128 bits when needed.
  void refill_exactly(const BucketParams& params, TimeUs now);
  // Time for the scaled deficit `units` (in 1/period_us tokens) to accrue.
  static std::int64_t time_to_accrue_us(const BucketParams& params, __int128 units);
  // The same for a deficit of `whole_tokens` less `frac` units, dividing by
  // `limit_divider` when given: (whole_tokens * period_us - frac) units,
  // rounded up to whole microseconds of accrual, in 64 bits when the product
  // fits (below about 10^8 tokens with a one-day period), as it nearly
  // always does.
  static std::int64_t time_to_accrue_us(const BucketParams& params, std::int64_t whole_tokens,
                                        std::int64_t frac, const Divider* limit_divider) {
    std::int64_t scaled, units;
    if (__builtin_mul_overflow(whole_tokens, params.period_us, &scaled) ||
        __builtin_sub_overflow(scaled, frac, &units)) {
      return time_to_accrue_us(params,
                               static_cast<__int128>(whole_tokens) * params.period_us - frac);
    }
    if (units <= 0) return 0;
    if (params.limit == 0) return -1;
    if (limit_divider != nullptr) {
      assert(limit_divider->divisor() == static_cast<std::uint64_t>(params.limit));
      return static_cast<std::int64_t>(
          limit_divider->quotient_rounded_up(static_cast<std::uint64_t>(units)));
    }
    return units / params.limit + (units % params.limit != 0 ? 1 : 0);
  }

  std::int64_t tokens_ = 0;
  std::int64_t frac_ = 0;  // in [0, period_us)
  TimeUs last_us_ = 0;
};

}  // namespace rlimit::core
