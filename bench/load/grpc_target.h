// rlimitd's Envoy face: envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit over gRPC (HTTP/2 on loopback TCP), asked the way Envoy's
// rate-limit filter asks it. A request is one RateLimitRequest of domain
// `domain` whose descriptors are one per check, each the single entry
// user=bench-<key> (so a batch of B checks is one call of B descriptors, as
// Envoy sends the descriptors of one HTTP request); the daemon checks
// ("domain", domain), ("user", ...) for each. Each client has its own
// channel and its own connection (a local subchannel pool), as each Envoy
// worker thread does.
//
// Synchronous requests go through the generated stub's blocking call.
// Pipelined ones through the async stub on a completion queue owned by the
// client thread: send() starts a call, receive() answers the oldest. gRPC
// may complete calls out of order; a call that finishes before an older one
// is held until the older is answered, so its latency includes that wait
// (on one connection to one server, completions are nearly in order).
#pragma once

#include <memory>
#include <string>

#include "load/target.h"

namespace rlimit::bench {

std::unique_ptr<Target> make_grpc_target(const std::string& address, const std::string& domain);

}  // namespace rlimit::bench
