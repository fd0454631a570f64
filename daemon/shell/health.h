// The answers of GET /healthz and GET /readyz on the HTTP listener, for
// systemd and Kubernetes probes. /healthz is 200 whenever the event loop
// answers at all. /readyz is 200 once the daemon should get traffic: its
// rules are loaded and, in a cluster, it has joined (heard from another
// member, or it has no seeds to join), or its seeds have not answered for
// [http] ready_after_seeds_unreachable since start, so a lone first node
// becomes ready; else (and while shutting down) 503 with a JSON body saying
// why. Once joined, a node stays ready when its peers go: it keeps enforcing
// locally. Pure.
#pragma once

#include <cstdint>

#include "core/time.h"
#include "shell/http_check.h"

namespace rlimit::shell {

struct ReadinessInput {
  bool rules_loaded = false;
  std::uint64_t rules = 0;
  bool stopping = false;  // shutting down: not ready, whatever else holds
  bool clustered = false;
  bool joined = false;             // core::Membership::joined()
  std::uint64_t live_members = 0;  // other members alive or suspect now
  core::TimeUs started_us = 0;
  core::TimeUs now = 0;
  core::TimeUs ready_after_seeds_unreachable_us = 30'000'000;
};

struct Readiness {
  bool ready = false;
  HttpAnswer answer;  // 200 or 503, JSON: {"ready": ..., "reason": ..., ...}
};

Readiness readiness(const ReadinessInput& in);

// 200, text/plain "ok\n".
HttpAnswer healthz_answer();

}  // namespace rlimit::shell
