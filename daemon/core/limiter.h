// The decision engine of one node: matches a check against the rules, finds or
// makes the buckets, and allows the check only if every matched bucket holds
// enough tokens, charging all of them or none. Pure and deterministic: time is
// an argument, nothing is read from the outside. Not thread-safe: one Limiter
// per event loop (shard by key if there are several).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/key_table.h"
#include "core/ledger.h"
#include "core/rule.h"
#include "core/time.h"

namespace rlimit::core {

enum class KeyTableFullPolicy { kAllow, kDeny };

struct LimiterOptions {
  std::size_t max_keys = 1'000'000;
  KeyTableFullPolicy key_table_full = KeyTableFullPolicy::kAllow;
  bool allow_inline_limits = true;
  // Bounds the per-check work (descriptor lookups are linear).
  std::size_t max_descriptors_per_check = 64;
  // Cluster: keep per-origin consumption counters (see ledger.h) so peers can
  // exchange them. Off on a single node.
  bool replicated = false;
  // Counters of an idle key are kept at least this long, and at least two of
  // the key's periods, after their last change.
  TimeUs counter_retention_min_us = 60'000'000;
};

struct Descriptor {
  std::string_view key;
  std::string_view value;
};

struct InlineLimit {
  std::string_view key;
  BucketParams params;
};

struct CheckInput {
  std::span<const Descriptor> descriptors;
  std::int64_t cost = 1;
  const InlineLimit* inline_limit = nullptr;  // optional
};

enum class CheckStatus { kOk, kExempt, kInvalid, kKeyTableFull };

// How one matched rule (or the inline limit) judged a check.
struct RuleVerdict {
  std::string_view name;  // valid until the rules are replaced
  bool allowed = false;
  BucketParams params;
  std::int64_t remaining = 0;       // whole tokens left, >= 0
  std::int64_t retry_after_us = 0;  // 0 allowed, -1 never
  std::int64_t reset_after_us = 0;
};

struct CheckOutput {
  bool allowed = false;
  CheckStatus status = CheckStatus::kOk;
  std::string error;  // when kInvalid
  std::vector<RuleVerdict> rules;
  void clear();
};

// Monotonic counters, for status and metrics.
struct LimiterStats {
  std::uint64_t checks = 0;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t exempt = 0;
  std::uint64_t unmatched = 0;        // no rule matched: allowed
  std::uint64_t invalid = 0;
  std::uint64_t key_table_full = 0;   // a bucket could not be made
  std::uint64_t keys_created = 0;
  std::uint64_t keys_evicted = 0;
  std::uint64_t clock_went_back = 0;  // `now` earlier than a bucket's time
  // Cluster.
  std::uint64_t remote_increases = 0;        // counter entries that raised what we knew
  std::uint64_t remote_tokens_charged = 0;   // tokens charged into buckets for peers
  std::uint64_t remote_unknown_keys = 0;     // keys of rules this node does not have
  std::uint64_t remote_charges_dropped = 0;  // no bucket could be made (key table full)
  std::uint64_t counter_keys_forgotten = 0;  // ledger keys garbage-collected
};

struct ReplaceSummary {
  std::size_t kept = 0;     // rules whose buckets survived
  std::size_t changed = 0;  // same name, new definition: buckets reset
  std::size_t added = 0;
  std::size_t removed = 0;
};

class Limiter {
 public:
  Limiter(LimiterOptions options, RuleSet rules);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  // Decides one check at time `now`. `out` is cleared and filled; reusing it
  // across calls avoids allocation.
  void check(const CheckInput& input, TimeUs now, CheckOutput& out);

  // Installs new rules. A rule with the same name and the same definition keeps
  // its buckets; the buckets of changed and removed rules are dropped by the
  // sweep.
  ReplaceSummary replace_rules(RuleSet rules);

  // Evicts up to `max_visits` entries' worth of full or orphaned buckets.
  // Returns how many were evicted. Call it periodically.
  std::size_t sweep(TimeUs now, std::size_t max_visits);

  // Cluster: start keeping counters as origin `origin_id`, process
  // incarnation `incarnation` (larger on every restart), at time `now`.
  void enable_replication(std::string origin_id, std::uint64_t incarnation, TimeUs now);
  // Merges a peer's absolute counter for `key`; charges the bucket with what
  // it adds to what we knew. Returns that increase (0 for old news).
  std::uint64_t merge_remote(std::string_view key, std::string_view origin,
                             std::uint64_t incarnation, std::uint64_t consumed, TimeUs now);
  Ledger& ledger() { return ledger_; }
  const Ledger& ledger() const { return ledger_; }
  // How long the counters of `key` are kept after their last change.
  TimeUs counter_retention_us(std::string_view key) const;

  const RuleSet& rules() const;
  const LimiterStats& stats() const { return stats_; }
  std::size_t key_count() const { return table_.size(); }
  const LimiterOptions& options() const { return options_; }
  void set_max_keys(std::size_t max_keys);

 private:
  struct CompiledRules;

  std::shared_ptr<const CompiledRules> compiled_;
  LimiterOptions options_;
  // The parameters of the bucket `key` names, if its rule (or the inline
  // limit encoded in it) is known here.
  std::optional<BucketParams> params_for_key(std::string_view key) const;

  KeyTable table_;
  Ledger ledger_;
  LimiterStats stats_;
  // Scratch space reused across checks, so a check does not allocate.
  struct Pending;
  std::vector<Pending> pending_;
  std::string key_scratch_;
  std::vector<std::string_view> match_values_;
  std::vector<bool> skipped_;
};

}  // namespace rlimit::core
