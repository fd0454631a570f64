// What answers a client inside rlimitd, without its sockets: a Limiter
// holding every algorithm (fuzz_rules.h) with small bounds, the rules
// service (not persisted) and the Dispatcher in front of them, wired as
// server.cc wires them. Built fresh for each input, so a finding replays
// from its input alone; what no input can change is made once: the rules
// are compiled once (the Limiter shares them, with none of another's state)
// and one LeaseTokens, a fixed key, signs every input's leases.
#pragma once

#include <string>

#include "config/config.h"
#include "core/limiter.h"
#include "fuzz_rules.h"
#include "shell/counters.h"
#include "shell/dispatch.h"
#include "shell/lease_token.h"
#include "shell/rules_service.h"
#include "shell/status.h"

namespace rlimit::fuzz {

struct Daemon {
  Daemon()
      : limiter(settings.limiter, compiled_rules()),
        rules_service(
            rules_options(),
            [this](core::RuleSet r) { return limiter.replace_rules(std::move(r)); },
            rules_counters),
        dispatcher(limiter, settings, counters, status, lease_tokens()) {
    status.node_id = "fuzz";
    status.config_source = "fuzz-rules.toml";
    status.rules = &rules_service;
    rules_service.set_config_rules(std::string(kRulesText));
    dispatcher.set_rules_service(&rules_service);
  }

  // The rules, compiled once: every input's Limiter shares them.
  static const core::Limiter& compiled_rules() {
    static const core::Limiter compiled(fuzz_limiter_options(), fuzz_rules());
    return compiled;
  }
  // Stateless between calls (an HMAC of what it is given, keyed once).
  static shell::LeaseTokens& lease_tokens() {
    static shell::LeaseTokens tokens{"a lease secret for the fuzzer"};
    return tokens;
  }
  static shell::RulesService::Options rules_options() {
    shell::RulesService::Options options;
    options.node_id = "fuzz";
    options.max_text_bytes = 16 * 1024;
    return options;
  }
  static config::DaemonSettings make_settings() {
    config::DaemonSettings s;
    s.limiter = fuzz_limiter_options();
    s.max_frame_bytes = 16 * 1024;
    s.max_checks_per_frame = 64;
    s.max_response_bytes = 64 * 1024;
    return s;
  }

  config::DaemonSettings settings = make_settings();
  shell::ShellCounters counters;
  shell::StatusContext status;
  shell::RulesCounters rules_counters;
  core::Limiter limiter;
  shell::RulesService rules_service;
  shell::Dispatcher dispatcher;
};

}  // namespace rlimit::fuzz
