#include "core/token_bucket.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace rlimit::core {

const char* validate(const BucketParams& params) {
  if (params.limit < 0) return "limit must not be negative";
  if (params.limit > kMaxTokens) return "limit too large (at most 2^50)";
  if (params.burst < 0) return "burst must not be negative";
  if (params.burst > kMaxTokens) return "burst too large (at most 2^50)";
  if (params.period_us <= 0) return "period must be positive";
  if (params.period_us > kMaxPeriodUs) return "period too long (at most 100 years)";
  return nullptr;
}

TokenBucket TokenBucket::full(const BucketParams& params, TimeUs now) {
  assert(validate(params) == nullptr);
  TokenBucket bucket;
  bucket.tokens_ = params.burst;
  bucket.frac_ = 0;
  bucket.last_us_ = now;
  return bucket;
}

std::int64_t TokenBucket::raise_to(const BucketParams& params, std::int64_t tokens) {
  const std::int64_t target = std::min(tokens, params.burst);
  // The balance is tokens_ + frac_ / period_us < tokens_ + 1 <= target.
  if (target <= tokens_) return 0;
  const std::int64_t raised = target - tokens_;
  tokens_ = target;
  frac_ = 0;
  return raised;
}

void TokenBucket::refill_exactly(const BucketParams& params, TimeUs now) {
  assert(now > last_us_ && tokens_ < params.burst);
  const TimeUs last_us = last_us_;
  last_us_ = now;
  std::int64_t elapsed, scaled, units, sum;
  if (!__builtin_sub_overflow(now, last_us, &elapsed) &&
      !__builtin_mul_overflow(elapsed, params.limit, &scaled) &&
      !__builtin_add_overflow(scaled, frac_, &units) &&
      !__builtin_add_overflow(tokens_, units / params.period_us, &sum)) {
    if (sum >= params.burst) {
      tokens_ = params.burst;
      frac_ = 0;
    } else {
      tokens_ = sum;
      frac_ = units % params.period_us;
    }
    return;
  }
  const __int128 elapsed_us = static_cast<__int128>(now) - last_us;
  const __int128 wide_units = elapsed_us * params.limit + frac_;
  const __int128 tokens = tokens_ + wide_units / params.period_us;
  if (tokens >= params.burst) {
    tokens_ = params.burst;
    frac_ = 0;
  } else {
    tokens_ = static_cast<std::int64_t>(tokens);
    frac_ = static_cast<std::int64_t>(wide_units % params.period_us);
  }
}

std::int64_t TokenBucket::time_to_accrue_us(const BucketParams& params, __int128 units) {
  if (units <= 0) return 0;
  if (params.limit == 0) return -1;
  const __int128 us = (units + params.limit - 1) / params.limit;
  return us > std::numeric_limits<std::int64_t>::max() ? std::numeric_limits<std::int64_t>::max()
                                                       : static_cast<std::int64_t>(us);
}

}  // namespace rlimit::core
