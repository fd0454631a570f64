// Converts an envoyproxy/ratelimit YAML configuration (one domain and its
// descriptor tree) into rlimit [[rule]] and [[exempt]] tables, for
// `rlimitctl convert envoy-ratelimit`. Pure: YAML text in, TOML text,
// warnings and errors out; nothing is read or written.
//
// How the tree maps (docs/operations.md, "rlimitctl"; the output's header says it too):
//   - rlimit's Envoy face checks a request of domain D and descriptor
//     [(k1,v1),...] as the descriptors [(domain,D),(k1,v1),...], so every
//     rule matches domain = D plus the keys of its path.
//   - A node with a limit becomes a fixed_window rule (ratelimit's counters
//     are Unix-aligned fixed windows of the unit): requests_per_unit per
//     unit; a value is an exact match, a value ending in '*' a prefix, no
//     value any value; every key has each = true, as ratelimit's cache key
//     holds every entry's value. shadow_mode becomes mode = "shadow".
//     requests_per_unit 0 (refuse all) becomes a token bucket of limit and
//     burst 0, as fixed_window needs a limit of at least 1.
//   - ratelimit picks one node per level (the exact value, else the first
//     matching wildcard, else the key alone) and a limit only when the
//     request ends at that node. rlimit matches a set of keys, so both are
//     written as exemptions scoped to the rules they concern: a rule under a
//     key-only (or wildcard) node skips requests whose value a more specific
//     sibling takes, and a rule skips requests carrying any key of the
//     configuration that its path does not name.
//   - unlimited: true writes no rule (the exemptions keep other rules off
//     its requests).
// What cannot be expressed (order of entries, entries whose key the file
// never names, replaces, metrics options) is reported as warnings and as
// comments in the TOML.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlimit::tools {

struct EnvoyConvertResult {
  std::string toml;                   // the rules; empty when errors is not
  std::vector<std::string> warnings;  // "file:line:column: message", in file order
  std::vector<std::string> errors;    // the same form; malformed YAML or schema
  // What rlimit's matching by key set cannot check for this file (entry
  // order, entries with keys the file never names); no location.
  std::vector<std::string> notes;
  bool ok() const { return errors.empty(); }
};

// `source_name` names the input in messages and in the output's header.
EnvoyConvertResult convert_envoy_ratelimit(std::string_view yaml_text,
                                           std::string_view source_name);

}  // namespace rlimit::tools
