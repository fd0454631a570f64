// The rule set the request-handling targets decide against: every algorithm,
// each kind of match, an override, exemptions and throttle modes, keyed on
// descriptors the seeds and the dictionary use (user, ip, path, api, tier).
#pragma once

#include <string_view>

#include "config/config.h"
#include "core/limiter.h"
#include "fuzz_check.h"

namespace rlimit::fuzz {

inline constexpr std::string_view kRulesText = R"toml(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 10
period = "1s"
burst = 20
  [[rule.override]]
  match = { tier = "premium" }
  multiplier = 10

[[rule]]
name = "per-ip"
match = { ip = { each = true } }
algorithm = "gcra"
limit = 100
period = "1s"
burst = 5

[[rule]]
name = "search"
match = { path = { prefix = "/api/search" } }
algorithm = "sliding_window"
limit = 500
period = "1s"

[[rule]]
name = "login"
match = { path = { glob = "/v1/*/login" }, ip = { each = true } }
algorithm = "sliding_log"
limit = 5
period = "1m"

[[rule]]
name = "export"
match = { api = "export" }
algorithm = "concurrency"
limit = 3
lease_ttl = "10s"
local = true

[[rule]]
name = "window"
match = { api = { each = true } }
algorithm = "fixed_window"
limit = 7
period = "1s"
mode = "soft"
soft_percent = 20

[[rule]]
name = "shaper"
match = { queue = { each = true } }
algorithm = "leaky_bucket"
limit = 10
period = "1s"
burst = 5
shaper = true
max_delay = "300ms"

[[rule]]
name = "bursty"
match = { tenant = { each = true } }
algorithm = "smooth_bursty"
limit = 10
period = "1s"
max_delay = "100ms"

[[rule]]
name = "warming"
match = { model = { each = true } }
algorithm = "smooth_warming_up"
limit = 10
period = "1s"
warmup = "2s"
max_delay = "200ms"
mode = "elastic"
elastic_threshold_percent = 50

[[exempt]]
match = { user = "healthcheck" }

[[exempt]]
match = { ip = { prefix = "10." } }
rules = ["per-ip"]
)toml";

// Small bounds so a run reaches them (a full key table, the descriptor cap).
inline core::LimiterOptions fuzz_limiter_options() {
  core::LimiterOptions options;
  options.max_keys = 64;
  options.max_descriptors_per_check = 16;
  return options;
}

inline core::RuleSet fuzz_rules() {
  config::LoadResult loaded = config::load_rules(kRulesText, "fuzz-rules.toml", {});
  FUZZ_CHECK(loaded.ok());
  return std::move(loaded.config.rules);
}

}  // namespace rlimit::fuzz
