#include "rlimit/ratelimit_headers.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace rlimit {
namespace {

// A Structured Field Integer has at most 15 decimal digits (RFC 8941 3.3.1).
constexpr std::uint64_t kMaxSfInteger = 999'999'999'999'999;
constexpr std::uint64_t kMsPerSecond = 1000;
constexpr std::int64_t kUsPerSecond = 1'000'000;
// The longest window tried for an exact whole-second rate (see the header).
constexpr std::uint64_t kMaxExactWindowS = 1000;

void append_integer(std::string& out, std::uint64_t value) {
  out += std::to_string(std::min(value, kMaxSfInteger));
}

void append_sf_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte > 0x7e) {
      out += '?';
    } else {
      out += c;
    }
  }
  out += '"';
}

std::uint64_t ceil_seconds(std::int64_t us) {
  if (us <= 0) return 0;
  return static_cast<std::uint64_t>(us / kUsPerSecond + (us % kUsPerSecond != 0 ? 1 : 0));
}

// limit per period_ms as q per w seconds (see the header).
void policy_window(std::uint64_t limit, std::uint64_t period_ms, std::uint64_t& q,
                   std::uint64_t& w) {
  if (period_ms % kMsPerSecond == 0) {
    q = limit;
    w = period_ms / kMsPerSecond;
    return;
  }
  // limit * w * 1000 / period_ms must be whole: try the smallest such w.
  const unsigned __int128 wide_limit = limit;
  for (std::uint64_t window = 1; window <= kMaxExactWindowS; ++window) {
    const unsigned __int128 scaled = wide_limit * window * kMsPerSecond;
    if (scaled % period_ms == 0) {
      const unsigned __int128 quota = scaled / period_ms;
      q = quota > kMaxSfInteger ? kMaxSfInteger : static_cast<std::uint64_t>(quota);
      w = window;
      return;
    }
  }
  const unsigned __int128 per_second = wide_limit * kMsPerSecond / period_ms;
  q = per_second > kMaxSfInteger ? kMaxSfInteger : static_cast<std::uint64_t>(per_second);
  w = 1;
}

}  // namespace

RateLimitHeaders ratelimit_headers(std::span<const RateLimitHeaderItem> items, bool allowed,
                                   std::int64_t retry_after_us) {
  RateLimitHeaders headers;
  for (const RateLimitHeaderItem& item : items) {
    if (!headers.policy.empty()) headers.policy += ", ";
    append_sf_string(headers.policy, item.name);
    if (item.period_ms == 0) {
      headers.policy += ";q=";
      append_integer(headers.policy, item.limit);
      headers.policy += ";qu=\"concurrent-requests\"";
    } else {
      std::uint64_t q = 0;
      std::uint64_t w = 0;
      policy_window(item.limit, item.period_ms, q, w);
      headers.policy += ";q=";
      append_integer(headers.policy, q);
      headers.policy += ";w=";
      append_integer(headers.policy, w);
    }

    if (!headers.ratelimit.empty()) headers.ratelimit += ", ";
    append_sf_string(headers.ratelimit, item.name);
    headers.ratelimit += ";r=";
    append_integer(headers.ratelimit, item.remaining);
    // A concurrency limit frees slots when work ends, not at a time; a
    // limit that never refills has no reset either.
    if (item.period_ms != 0 && item.reset_after_us >= 0) {
      headers.ratelimit += ";t=";
      append_integer(headers.ratelimit, ceil_seconds(item.reset_after_us));
    }
  }
  if (!allowed && retry_after_us > 0) {
    headers.retry_after = std::to_string(std::max<std::uint64_t>(1, ceil_seconds(retry_after_us)));
  }
  return headers;
}

}  // namespace rlimit
