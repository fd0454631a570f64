// What a rule is: which requests it applies to (a match on descriptors) and
// the limit it imposes. Plain data built by the config loader; immutable once
// handed to a Limiter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/algorithms/throttle.h"
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

// Which algorithm a rule's keys run (docs/algorithms.md). The order is the
// order of AlgorithmParams' alternatives (rule_state.h).
enum class Algorithm : std::uint8_t {
  kTokenBucket,
  kLeakyBucket,
  kFixedWindow,
  kSlidingWindow,
  kSlidingLog,
  kGcra,
  kSmoothBursty,
  kSmoothWarmingUp,
  kConcurrency,
};
inline constexpr std::size_t kAlgorithmCount = 9;
// "token_bucket", "leaky_bucket", ... as the config spells them.
const char* algorithm_name(Algorithm algorithm);
std::optional<Algorithm> algorithm_from_name(std::string_view name);

// What a rule sets beyond limit, period and burst. Which fields apply depends
// on the algorithm (the config loader refuses the others); the defaults are
// what an unset field means.
struct AlgorithmOptions {
  bool shaper = false;             // leaky_bucket: delay requests instead of refusing
  std::int64_t max_delay_us = -1;  // leaky shaper, smooth_*: longest wait handed out; -1 none
  std::int64_t max_entries = 0;    // sliding_log: log bound per key; 0: the limit (capped)
  std::int64_t warmup_us = 0;      // smooth_warming_up
  std::int64_t cold_factor = 3;    // smooth_warming_up
  // smooth_bursty: a new key stores nothing (Guava's RateLimiter.create());
  // by default it holds its whole burst, as a key never seen before should.
  bool start_empty = false;
  std::int64_t lease_ttl_us = 0;   // concurrency: a lease not released expires after this
  // Per node only: consumption is neither sent to nor taken from peers. The
  // only way a concurrency rule runs in cluster mode (in-flight counts cannot
  // be shared by grow-only counters).
  bool local = false;
  algorithms::ThrottleParams throttle;

  friend bool operator==(const AlgorithmOptions&, const AlgorithmOptions&) = default;
  // "shaper max_delay=5000us ...": every field that differs from the default,
  // for fingerprints and status.
  std::string describe() const;
};

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
  AlgorithmOptions options;  // shared by the overrides
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
