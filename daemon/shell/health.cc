#include "shell/health.h"

#include <algorithm>
#include <boost/json.hpp>

namespace rlimit::shell {

Readiness readiness(const ReadinessInput& in) {
  const core::TimeUs up_us = std::max<core::TimeUs>(0, in.now - in.started_us);
  bool ready = false;
  const char* reason = "";
  if (in.stopping) {
    reason = "shutting down";
  } else if (!in.rules_loaded) {
    reason = "rules are not loaded";
  } else if (!in.clustered) {
    ready = true;
    reason = "rules loaded";
  } else if (in.joined) {
    ready = true;
    reason =
        in.live_members > 0 ? "joined the cluster" : "joined (no live peer now: enforcing locally)";
  } else if (up_us >= in.ready_after_seeds_unreachable_us) {
    ready = true;
    reason = "no seed answered within ready_after_seeds_unreachable: serving alone";
  } else {
    reason = "waiting to join the cluster: no seed has answered yet";
  }
  boost::json::object body;
  body["ready"] = ready;
  body["reason"] = reason;
  body["rules"] = in.rules;
  if (in.clustered) {
    body["joined"] = in.joined;
    body["live_members"] = in.live_members;
    body["uptime_ms"] = up_us / 1000;
    body["ready_after_seeds_unreachable_ms"] = in.ready_after_seeds_unreachable_us / 1000;
  }
  Readiness out;
  out.ready = ready;
  out.answer.status = ready ? 200 : 503;
  out.answer.body = boost::json::serialize(body) + "\n";
  return out;
}

HttpAnswer healthz_answer() {
  HttpAnswer answer;
  answer.content_type = "text/plain; charset=utf-8";
  answer.body = "ok\n";
  return answer;
}

}  // namespace rlimit::shell
