// What a rule is: which requests it applies to (a match on descriptors) and
// the limit it imposes. Plain data built by the config loader; immutable once
// handed to a Limiter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/glob.h"
#include "core/token_bucket.h"

namespace rlimit::core {

// Where a rule came from, for messages ("rlimitd.toml:12:1").
struct SourceLocation {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string to_string() const;
};

enum class ValueMatchKind {
  kAny,     // the descriptor must be present; any value
  kExact,   // value == pattern
  kPrefix,  // value starts with pattern
  kGlob,    // value matches the glob
};

// How one descriptor's value is matched. With `each`, every distinct value
// that passes the match gets its own bucket; without it, all matching values
// share the rule's bucket.
struct ValueMatcher {
  ValueMatchKind kind = ValueMatchKind::kAny;
  std::string pattern;       // exact value or prefix
  std::optional<Glob> glob;  // set when kind == kGlob
  bool each = false;

  bool matches(std::string_view value) const;
  // "alice", "prefix:/api/", "glob:/v1/*", "*", with " (each)" when each.
  std::string describe() const;
};

struct DescriptorMatch {
  std::string key;
  ValueMatcher value;
};

enum class Algorithm { kTokenBucket };
const char* algorithm_name(Algorithm algorithm);

// Other parameters for requests that also match `match` (e.g. tier=premium).
// The first matching override wins; its requests get buckets of their own.
struct Override {
  std::vector<DescriptorMatch> match;
  BucketParams params;
};

struct Rule {
  std::string name;                    // unique within a RuleSet
  std::vector<DescriptorMatch> match;  // all must match; sorted by key
  BucketParams params;
  Algorithm algorithm = Algorithm::kTokenBucket;
  std::vector<Override> overrides;
  SourceLocation where;

  // Same match, limits and algorithm (name and location aside): a reload keeps
  // the buckets of a rule whose definition is the same.
  bool same_definition(const Rule& other) const;
  std::string describe_match() const;
};

// Requests matching an exemption are allowed without charging the listed
// rules (all rules when `rules` is empty).
struct Exemption {
  std::vector<DescriptorMatch> match;
  std::vector<std::string> rules;
  SourceLocation where;
};

struct RuleSet {
  std::vector<Rule> rules;
  std::vector<Exemption> exemptions;
};

}  // namespace rlimit::core
