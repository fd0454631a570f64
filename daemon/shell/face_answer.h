// What every face other than the Unix socket (the HTTP check, Envoy's gRPC
// rate-limit API) shares: faces translate their request into the same
// rlimit.v1.Request the socket protocol carries, let the Dispatcher answer it
// (so validation, bounds, counters and the core are the socket's own), and
// read the same rlimit.v1.CheckResult back. This file turns a CheckResult
// into what the faces say about it. Pure; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rlimit/ratelimit_headers.h"

namespace rlimit::v1 {
class CheckResult;
}  // namespace rlimit::v1

namespace rlimit::shell {

// The IETF RateLimit fields and Retry-After for one check's answer, one list
// member per rule that judged it (rlimit::ratelimit_headers, which libclient
// uses too).
RateLimitHeaders ietf_headers(const v1::CheckResult& result);

// The longest wait among the rules that refused (-1: one never admits), 0
// when allowed: what Retry-After and a client's back-off come from.
std::int64_t retry_after_us(const v1::CheckResult& result);

// True when some rule's throttle mode (shadow, soft, elastic) admitted what
// its algorithm refused: the answer is OK and says so.
bool over_limit(const v1::CheckResult& result);

// "ok", "exempt", "invalid" or "key_table_full": the result's status as the
// faces' JSON and docs/protocol.md name it.
std::string_view status_name(const v1::CheckResult& result);

}  // namespace rlimit::shell
