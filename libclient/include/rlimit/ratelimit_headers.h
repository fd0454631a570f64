// The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers,
// the current syntax: `RateLimit-Policy: "name";q=100;w=60` and
// `RateLimit: "name";r=50;t=30`) and `Retry-After`, made from a decision.
// One function makes them for every face that speaks HTTP: the daemon's
// gRPC (Envoy) and HTTP check faces and any service using libclient, so all
// of them say the same thing about the same decision.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rlimit/export.h"

namespace rlimit {

struct Decision;

// What the fields say of one limit that judged a request. The caller keeps
// `name`'s bytes alive for the call.
struct RateLimitHeaderItem {
  std::string_view name;            // the rule's name: the list member's String
  std::uint64_t limit = 0;          // tokens per period
  // 0: a concurrency limit (slots, not a rate): q counts slots with
  // qu="concurrent-requests", and w and t are left out.
  std::uint64_t period_ms = 0;
  std::uint64_t remaining = 0;      // whole units left
  std::int64_t reset_after_us = 0;  // until the limit is whole again; -1: never (t left out)
};

// The fields' values (without the names). An empty string: leave the field
// out.
struct RateLimitHeaders {
  std::string policy;       // RateLimit-Policy
  std::string ratelimit;    // RateLimit
  std::string retry_after;  // Retry-After, in whole seconds; only on a denial
};

// One list member per item, in order, comma-separated. Names are written
// as Structured Field Strings: `"` and `\` escaped, bytes outside printable
// ASCII replaced by `?`. q is the limit per window w in seconds: the rule's
// own when its period is a whole number of seconds, else the same rate per
// the shortest whole-second window that keeps q a whole number (10 per
// 250 ms: q=40;w=1; 1 per 1500 ms: q=2;w=3), rounded down per second if no
// window up to 1000 s does. t is reset_after rounded up to whole seconds. Integers are
// clamped to the 15 digits a Structured Field Integer allows. `retry_after_us`
// is the decision's wait: when `allowed` is false and it is above 0,
// Retry-After is that wait rounded up to whole seconds (at least 1); when it
// is -1 (the limit never admits the request) Retry-After is left out.
RLIMIT_API RateLimitHeaders ratelimit_headers(std::span<const RateLimitHeaderItem> items,
                                              bool allowed, std::int64_t retry_after_us);

// The same for a libclient decision: one item per rule in it (a concurrency
// rule, whose period_ms carries its lease TTL, as a concurrency limit).
RLIMIT_API RateLimitHeaders ratelimit_headers(const Decision& decision);

}  // namespace rlimit
