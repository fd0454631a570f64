// Backoff: exponential backoff with full jitter, floored at the daemon's
// retry_after so a retry is never sent before it could succeed.
#include "rlimit/retry.h"

#include <algorithm>

namespace rlimit {

Backoff::Backoff(RetryPolicy policy, std::uint64_t seed) : policy_(policy), rng_(seed) {}

std::optional<std::chrono::microseconds> Backoff::next_delay(std::int64_t retry_after_us) {
  if (retries_ >= policy_.max_retries) return std::nullopt;
  if (retry_after_us < 0) return std::nullopt;  // the daemon says: never
  const std::int64_t cap_us = std::max<std::int64_t>(policy_.cap.count(), 0);
  // Waiting longer than the cap is what the caller asked us never to do.
  if (retry_after_us > cap_us) return std::nullopt;

  // min(cap, base * 2^retries), doubling step by step so it cannot overflow.
  std::int64_t ceiling_us = std::clamp<std::int64_t>(policy_.base.count(), 0, cap_us);
  for (std::uint32_t i = 0; i < retries_ && ceiling_us < cap_us && ceiling_us > 0; ++i) {
    ceiling_us = std::min(cap_us, ceiling_us * 2);
  }
  std::uniform_int_distribution<std::int64_t> jitter(0, ceiling_us);
  const std::int64_t delay_us = std::max(jitter(rng_), retry_after_us);
  ++retries_;
  return std::chrono::microseconds(delay_us);
}

}  // namespace rlimit
