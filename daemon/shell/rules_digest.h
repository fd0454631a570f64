// A digest of the rules in force, equal on nodes that run the same rules
// whatever the order or layout of their files: /metrics exports it as
// rlimit_rules_digest so an alert can tell when a cluster's nodes differ.
// Pure (OpenSSL's SHA-256); thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/rule.h"

namespace rlimit::shell {

// The canonical text of `rules`: every rule (sorted by name) and exemption
// (sorted) with what decides requests (match, algorithm, limits, options,
// overrides), each field length-prefixed; source locations left out.
std::string canonical_rules(const core::RuleSet& rules);

// The first 52 bits of the SHA-256 of canonical_rules(rules), as an integer:
// exact in a Prometheus sample (a double holds 53 bits).
std::uint64_t rules_digest(const core::RuleSet& rules);

}  // namespace rlimit::shell
