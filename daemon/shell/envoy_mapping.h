// Envoy's rate-limit API (envoy.service.ratelimit.v3.ShouldRateLimit) in
// terms of the socket protocol: a RateLimitRequest becomes one
// rlimit.v1.Request the Dispatcher answers, and its rlimit.v1.Response
// becomes the RateLimitResponse. Pure functions of messages; no gRPC, no
// I/O; thread-safe (the gRPC face maps requests on gRPC's threads and
// answers on the event loop). The face itself is grpc_face.h.
//
// Request (envoy_to_request):
// - Descriptor i of the request becomes check i of one CheckRequest
//   (VERSION_1, mode CHECK), whose descriptors are ("domain", <domain>) first
//   and then the descriptor's entries in order. So rules match Envoy's domain
//   like any other descriptor: match = { domain = "edge", remote_address =
//   { each = true } }.
// - Cost: the descriptor's hits_addend when set, else the request's
//   hits_addend; 0 means 1 (as Envoy's own service does). At most 2^50.
// - A descriptor's `limit` override becomes the check's inline limit when
//   the daemon allows inline limits ([daemon] inline_limits): key
//   "envoy:<domain>/<key>=<value>/..." (`%`, `/` and `=` in the parts written
//   as %25, %2F, %3D, so two descriptors share the bucket exactly when their
//   domain and entries are equal), limit = burst = requests_per_unit,
//   period = the unit: SECOND 1s, MINUTE 1m, HOUR 1h, DAY 1d, WEEK 7d,
//   MONTH 30d, YEAR 365d. An override with unit UNKNOWN is refused. When
//   inline limits are off the override is ignored and the rules decide.
// - Refused (EnvoyStatus::kInvalidArgument, the message naming the
//   descriptor index): an empty domain, no descriptors, a descriptor
//   without entries, an empty key, a key twice in one descriptor ("domain"
//   as an entry key counts: the domain already holds it), more entries than
//   max_descriptors_per_check allows (the domain counts as one), a cost above
//   2^50, an override with unit UNKNOWN.
//
// Response (envoy_from_response):
// - One DescriptorStatus per descriptor, in order: OVER_LIMIT when the check
//   was not allowed, else OK; overall_code OVER_LIMIT when any descriptor is.
// - current_limit is the rule that decided: when refused, the refusing rule
//   with the longest retry_after (one that never admits counts as longest);
//   when allowed, the rule with the least remaining. A check no rule matched
//   (or exempt) has no current_limit, limit_remaining 0 and no
//   duration_until_reset, as Envoy's own service answers an unknown
//   descriptor. name is the rule's name (an inline limit's is its key);
//   limit_remaining is the rule's remaining clamped to 2^32-1;
//   duration_until_reset is its reset_after (left out when -1: never).
// - requests_per_unit and unit (rate_limit_for): a period of exactly 1s, 1m,
//   1h, 1d, 7d, 30d or 365d is that unit (SECOND, MINUTE, HOUR, DAY, WEEK,
//   MONTH, YEAR) with the rule's limit; otherwise the smallest of those units
//   in which the rule's rate is a whole number (10 per 250 ms: 40 per
//   SECOND; 1 per 1500 ms: 40 per MINUTE); otherwise the rate per YEAR
//   rounded down (per the largest unit whose count fits 32 bits for very
//   fast rates). A rule with no period (concurrency) reports its limit with
//   unit UNKNOWN.
// - A rule in soft, shadow or elastic mode that admitted what its algorithm
//   refused leaves the descriptor OK (that is what those modes mean); the
//   answer then carries the response header `x-rlimit-over-limit` listing
//   those rules' names (comma-separated, each once, in answer order).
// - With ietf_headers, response_headers_to_add also carries RateLimit-Policy
//   and RateLimit (face_answer.h's ietf_headers over every descriptor's rules
//   as one list) and, when the answer is OVER_LIMIT, Retry-After.
// - A check the Dispatcher found INVALID fails the call with
//   kInvalidArgument and "descriptor <i>: <its error>". The checks are
//   decided in order and independently (as a batch on the socket is), so
//   the other descriptors of that request may have been charged; the mapping
//   refuses what it can before dispatch so that this is rare. An Error
//   response maps to kResourceExhausted (TOO_MANY_CHECKS: more descriptors
//   than max_checks_per_frame, or an answer above max_response_bytes),
//   kUnavailable (SHUTTING_DOWN) or kInvalidArgument (anything else), with
//   its message. A response that is neither (or has the wrong number of
//   results) is kInternal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace envoy::service::ratelimit::v3 {
class RateLimitRequest;
class RateLimitResponse;
class RateLimitResponse_RateLimit;
}  // namespace envoy::service::ratelimit::v3

namespace rlimit::v1 {
class Request;
class Response;
}  // namespace rlimit::v1

namespace rlimit::shell {

// How a call ends, as a gRPC status code (the face translates).
enum class EnvoyStatus { kOk, kInvalidArgument, kResourceExhausted, kUnavailable, kInternal };

struct EnvoyOutcome {
  EnvoyStatus status = EnvoyStatus::kOk;
  std::string message;  // why, when not kOk
};

// What the daemon's settings say about requests; read once at start (both
// are restart-only settings).
struct EnvoyRequestLimits {
  bool allow_inline_limits = true;
  std::size_t max_descriptors_per_check = 64;
};

// Fills `out` (cleared first) from `in`; kInvalidArgument with the reason
// when the request cannot be checked.
EnvoyOutcome envoy_to_request(const envoy::service::ratelimit::v3::RateLimitRequest& in,
                              const EnvoyRequestLimits& limits, v1::Request& out);

// What an answer said, for the face's counters.
struct EnvoyAnswerSummary {
  std::size_t descriptors = 0;
  bool over_limit = false;  // overall_code is OVER_LIMIT
};

// Fills `out` (cleared first) from the Dispatcher's answer to a request of
// `descriptors` checks. `out` is complete only when the outcome is kOk.
EnvoyOutcome envoy_from_response(const v1::Response& response, std::size_t descriptors,
                                 bool ietf_headers,
                                 envoy::service::ratelimit::v3::RateLimitResponse& out,
                                 EnvoyAnswerSummary* summary = nullptr);

// requests_per_unit and unit for `limit` tokens per `period_ms` (see above).
void rate_limit_for(std::uint64_t limit, std::uint64_t period_ms,
                    envoy::service::ratelimit::v3::RateLimitResponse_RateLimit& out);

// The inline limit key of a descriptor with these parts (see above).
std::string envoy_inline_key(const envoy::service::ratelimit::v3::RateLimitRequest& request,
                             int descriptor);

}  // namespace rlimit::shell
