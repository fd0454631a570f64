#include "core/limiter.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <unordered_map>

#include "core/bytes.h"

namespace rlimit::core {
namespace {

// Bucket keys: [rule fingerprint: 8 bytes][override: 1 byte][rest]. The
// fingerprint hashes the rule's whole definition, so every node with the same
// rule names the same bucket with the same bytes (the cluster exchanges
// counters by key), and a reload that changes a rule changes its keys. For
// rules, the rest is each `each` descriptor value as [length: 4][bytes], in
// the rule's (sorted) match order. Inline limits use fingerprint 0 and carry
// their parameters in the key, so two services asking for the same key with
// different limits get different buckets, and any node can rebuild the
// parameters from the key alone.
constexpr std::size_t kKeyHeaderBytes = 9;
constexpr std::uint64_t kInlineFingerprint = 0;
constexpr std::size_t kInlineKeyBytes = kKeyHeaderBytes + 24;
// Buckets visited, at most, to make room when a new key meets a full table.
constexpr std::size_t kMakeRoomVisits = 64;

std::uint64_t read_u64(std::string_view key, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, key.data() + at, 8);
  return v;
}

// FNV-1a, 64 bits: stable across builds and hosts, unlike std::hash.
std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 14695981039346656037ull) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string describe_params(const BucketParams& p) {
  return std::to_string(p.limit) + "/" + std::to_string(p.period_us) + "/" + std::to_string(p.burst);
}

// Hashes everything that defines a rule's buckets. Never 0 (the inline space).
std::uint64_t fingerprint(const Rule& rule) {
  std::string text = rule.name + '\0' + rule.describe_match() + '\0' + describe_params(rule.params) +
                     '\0' + algorithm_name(rule.algorithm);
  for (const Override& o : rule.overrides) {
    text += '\0';
    for (const DescriptorMatch& m : o.match) text += m.key + "=" + m.value.describe() + ",";
    text += describe_params(o.params);
  }
  const std::uint64_t hash = fnv1a(text);
  return hash == kInlineFingerprint ? 1 : hash;
}

std::int64_t read_i64(std::string_view key, std::size_t at) {
  std::int64_t v;
  std::memcpy(&v, key.data() + at, 8);
  return v;
}

const std::string_view* find_value(std::span<const Descriptor> descriptors, std::string_view key) {
  for (const Descriptor& d : descriptors) {
    if (equal_bytes(d.key, key)) return &d.value;
  }
  return nullptr;
}

bool value_matches(const ValueMatcher& matcher, std::string_view value) {
  return matcher.kind == ValueMatchKind::kAny || matcher.matches(value);
}

bool matches_all(const std::vector<DescriptorMatch>& match, std::span<const Descriptor> descriptors) {
  for (const DescriptorMatch& m : match) {
    const std::string_view* value = find_value(descriptors, m.key);
    if (value == nullptr || !value_matches(m.value, *value)) return false;
  }
  return true;
}

// matches_all that also records each match's value in `values` (which holds
// at least match.size() entries), for building the bucket key.
bool matches_all(const std::vector<DescriptorMatch>& match, std::span<const Descriptor> descriptors,
                 std::string_view* values) {
  for (std::size_t i = 0; i < match.size(); ++i) {
    const std::string_view* value = find_value(descriptors, match[i].key);
    if (value == nullptr || !value_matches(match[i].value, *value)) return false;
    values[i] = *value;
  }
  return true;
}

}  // namespace

struct Limiter::CompiledRules {
  RuleSet set;
  std::vector<std::uint64_t> fingerprints;                         // parallel to set.rules
  std::unordered_map<std::uint64_t, std::size_t> by_fingerprint;  // -> rule index
  // Per exemption: indices of the rules it skips (empty: all).
  std::vector<std::vector<std::size_t>> exempt_rules;
};

// One bucket a check touches.
struct Limiter::Pending {
  std::string_view name;
  BucketParams params;
  std::size_t key_offset = 0;
  std::size_t key_bytes = 0;
  TokenBucket* bucket = nullptr;  // existing bucket, or nullptr (a fresh one)
  TokenBucket fresh;              // used when bucket == nullptr
  TokenBucket& current() { return bucket != nullptr ? *bucket : fresh; }
};

void CheckOutput::clear() {
  allowed = false;
  status = CheckStatus::kOk;
  error.clear();
  rules.clear();
}

Limiter::Limiter(LimiterOptions options, RuleSet rules)
    : options_(options), table_(options.max_keys) {
  replace_rules(std::move(rules));
}

Limiter::~Limiter() = default;

const RuleSet& Limiter::rules() const { return compiled_->set; }

void Limiter::set_max_keys(std::size_t max_keys) {
  options_.max_keys = max_keys;
  table_.set_max_keys(max_keys);
}

ReplaceSummary Limiter::replace_rules(RuleSet rules) {
  auto next = std::make_shared<CompiledRules>();
  ReplaceSummary summary;
  std::unordered_map<std::string_view, std::size_t> old_by_name;
  if (compiled_) {
    for (std::size_t i = 0; i < compiled_->set.rules.size(); ++i) {
      old_by_name.emplace(compiled_->set.rules[i].name, i);
    }
  }
  std::size_t still_present = 0;
  for (const Rule& rule : rules.rules) {
    auto old = old_by_name.find(rule.name);
    if (old == old_by_name.end()) {
      ++summary.added;
    } else {
      ++still_present;
      // Same definition, same fingerprint: its buckets simply stay.
      ++(compiled_->set.rules[old->second].same_definition(rule) ? summary.kept : summary.changed);
    }
    const std::uint64_t fp = fingerprint(rule);
    next->by_fingerprint.emplace(fp, next->fingerprints.size());
    next->fingerprints.push_back(fp);
  }
  summary.removed = old_by_name.size() - still_present;
  std::unordered_map<std::string_view, std::size_t> new_by_name;
  for (std::size_t i = 0; i < rules.rules.size(); ++i) new_by_name.emplace(rules.rules[i].name, i);
  for (const Exemption& exemption : rules.exemptions) {
    std::vector<std::size_t> skipped;
    for (const std::string& name : exemption.rules) {
      auto it = new_by_name.find(name);
      // The config loader rejects unknown names; a name that slipped through
      // exempts nothing rather than everything.
      if (it != new_by_name.end()) skipped.push_back(it->second);
    }
    if (!exemption.rules.empty() && skipped.empty()) skipped.push_back(rules.rules.size());
    next->exempt_rules.push_back(std::move(skipped));
  }
  next->set = std::move(rules);
  compiled_ = std::move(next);
  return summary;
}

void Limiter::check(const CheckInput& input, TimeUs now, CheckOutput& out) {
  out.clear();
  ++stats_.checks;
  const CompiledRules& compiled = *compiled_;

  auto invalid = [&](std::string message) {
    out.status = CheckStatus::kInvalid;
    out.allowed = false;
    out.error = std::move(message);
    ++stats_.invalid;
  };
  if (input.cost < 0 || input.cost > kMaxTokens) {
    return invalid("cost must be between 0 and 2^50");
  }
  if (input.descriptors.size() > options_.max_descriptors_per_check) {
    return invalid("too many descriptors: " + std::to_string(input.descriptors.size()) +
                   " (max_descriptors_per_check is " +
                   std::to_string(options_.max_descriptors_per_check) + ")");
  }
  for (std::size_t i = 0; i < input.descriptors.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (input.descriptors[i].key == input.descriptors[j].key) {
        return invalid("descriptor key \"" + std::string(input.descriptors[i].key) +
                       "\" appears twice");
      }
    }
  }
  if (input.inline_limit != nullptr) {
    if (!options_.allow_inline_limits) return invalid("inline limits are disabled on this daemon");
    if (input.inline_limit->key.empty()) return invalid("inline limit has an empty key");
    if (const char* why = validate(input.inline_limit->params)) {
      return invalid(std::string("inline limit: ") + why);
    }
  }

  // Exemptions: a full one allows at once; a partial one skips some rules.
  const bool has_exemptions = !compiled.set.exemptions.empty();
  if (has_exemptions) skipped_.assign(compiled.set.rules.size() + 1, false);
  for (std::size_t e = 0; e < compiled.set.exemptions.size(); ++e) {
    if (!matches_all(compiled.set.exemptions[e].match, input.descriptors)) continue;
    const std::vector<std::size_t>& skip = compiled.exempt_rules[e];
    if (skip.empty()) {
      out.status = CheckStatus::kExempt;
      out.allowed = true;
      ++stats_.exempt;
      ++stats_.allowed;
      return;
    }
    for (std::size_t r : skip) skipped_[r] = true;
  }

  // Gather the buckets every matching rule (and the inline limit) points at.
  // Keys are written into key_scratch_, which only grows: `key_used` bytes of
  // it hold this check's keys.
  pending_.clear();
  std::size_t key_used = 0;
  const auto key_space = [&](std::size_t bytes) {
    if (key_scratch_.size() < key_used + bytes) {
      key_scratch_.resize(std::max(2 * key_scratch_.size(), key_used + bytes));
    }
    char* at = key_scratch_.data() + key_used;
    key_used += bytes;
    return at;
  };
  bool any_skipped = false;
  for (std::size_t r = 0; r < compiled.set.rules.size(); ++r) {
    const Rule& rule = compiled.set.rules[r];
    if (match_values_.size() < rule.match.size()) match_values_.resize(rule.match.size());
    if (!matches_all(rule.match, input.descriptors, match_values_.data())) continue;
    if (has_exemptions && skipped_[r]) {
      any_skipped = true;
      continue;
    }
    std::uint8_t override_index = 0;
    const BucketParams* params = &rule.params;
    for (std::size_t o = 0; o < rule.overrides.size() && o < 255; ++o) {
      if (matches_all(rule.overrides[o].match, input.descriptors)) {
        override_index = static_cast<std::uint8_t>(o + 1);
        params = &rule.overrides[o].params;
        break;
      }
    }
    Pending& p = pending_.emplace_back();
    p.name = rule.name;
    p.params = *params;
    p.key_offset = key_used;
    char* at = key_space(kKeyHeaderBytes);
    std::memcpy(at, &compiled.fingerprints[r], 8);
    at[8] = static_cast<char>(override_index);
    for (std::size_t i = 0; i < rule.match.size(); ++i) {
      if (!rule.match[i].value.each) continue;
      const std::string_view value = match_values_[i];
      const auto length = static_cast<std::uint32_t>(value.size());
      at = key_space(4 + value.size());
      std::memcpy(at, &length, 4);
      std::memcpy(at + 4, value.data(), value.size());
    }
    p.key_bytes = key_used - p.key_offset;
  }
  if (input.inline_limit != nullptr) {
    Pending& p = pending_.emplace_back();
    p.name = input.inline_limit->key;
    p.params = input.inline_limit->params;
    p.key_offset = key_used;
    const std::string_view name = input.inline_limit->key;
    char* at = key_space(kInlineKeyBytes + name.size());
    std::memcpy(at, &kInlineFingerprint, 8);
    at[8] = 0;
    std::memcpy(at + kKeyHeaderBytes, &p.params.limit, 8);
    std::memcpy(at + kKeyHeaderBytes + 8, &p.params.period_us, 8);
    std::memcpy(at + kKeyHeaderBytes + 16, &p.params.burst, 8);
    std::memcpy(at + kInlineKeyBytes, name.data(), name.size());
    p.key_bytes = key_used - p.key_offset;
  }
  if (pending_.empty()) {
    out.allowed = true;
    out.status = any_skipped ? CheckStatus::kExempt : CheckStatus::kOk;
    ++(any_skipped ? stats_.exempt : stats_.unmatched);
    ++stats_.allowed;
    return;
  }

  // Decide: every bucket must hold `cost`. Refill is idempotent at one `now`,
  // so deciding twice (after making room) changes nothing.
  bool allowed = true;
  std::size_t fresh_needed = 0;
  auto decide = [&] {
    allowed = true;
    fresh_needed = 0;
    for (Pending& p : pending_) {
      const std::string_view key(key_scratch_.data() + p.key_offset, p.key_bytes);
      p.bucket = table_.find(key);
      if (p.bucket != nullptr) {
        if (now < p.bucket->last_refill_us()) ++stats_.clock_went_back;
        p.bucket->refill(p.params, now);
      } else {
        p.fresh = TokenBucket::full(p.params, now);
        ++fresh_needed;
      }
      allowed = allowed && p.current().allows(input.cost);
    }
  };
  decide();
  if (allowed && fresh_needed > 0 && table_.size() + fresh_needed <= table_.max_keys() &&
      table_.will_grow(fresh_needed)) {
    // Inserting would move every bucket: grow first, then find them again.
    table_.reserve(fresh_needed);
    decide();
  }
  if (allowed && fresh_needed > 0 && table_.size() + fresh_needed > table_.max_keys()) {
    // The sweep erases only buckets that are full at `now`, which a fresh
    // bucket replaces exactly; decide again since pointers may be stale.
    sweep(now, kMakeRoomVisits);
    decide();
    if (allowed && table_.size() + fresh_needed <= table_.max_keys() &&
        table_.will_grow(fresh_needed)) {
      table_.reserve(fresh_needed);
      decide();
    }
    if (allowed && table_.size() + fresh_needed > table_.max_keys()) {
      ++stats_.key_table_full;
      out.status = CheckStatus::kKeyTableFull;
      out.allowed = options_.key_table_full == KeyTableFullPolicy::kAllow;
      ++(out.allowed ? stats_.allowed : stats_.denied);
      return;  // nothing charged: all or nothing
    }
  }

  out.allowed = allowed;
  ++(allowed ? stats_.allowed : stats_.denied);
  out.rules.reserve(pending_.size());
  for (Pending& p : pending_) {
    if (allowed) {
      if (p.bucket == nullptr) {
        const std::string_view key(key_scratch_.data() + p.key_offset, p.key_bytes);
        p.bucket = table_.insert(key, p.fresh);
        assert(p.bucket != nullptr);  // room was made above
        ++stats_.keys_created;
      }
      p.bucket->charge(input.cost);
      if (options_.replicated) {
        ledger_.add_local(std::string_view(key_scratch_.data() + p.key_offset, p.key_bytes),
                          static_cast<std::uint64_t>(input.cost), now);
      }
    }
    const TokenBucket& bucket = p.current();
    RuleVerdict& v = out.rules.emplace_back();
    v.name = p.name;
    v.params = p.params;
    v.allowed = bucket.allows(allowed ? 0 : input.cost);
    v.remaining = std::max<std::int64_t>(bucket.tokens(), 0);
    v.retry_after_us = allowed ? 0 : bucket.retry_after_us(p.params, input.cost);
    v.reset_after_us = bucket.reset_after_us(p.params);
  }
}

std::optional<BucketParams> Limiter::params_for_key(std::string_view key) const {
  if (key.size() < kKeyHeaderBytes) return std::nullopt;
  const std::uint64_t fp = read_u64(key, 0);
  if (fp == kInlineFingerprint) {
    if (key.size() < kInlineKeyBytes) return std::nullopt;
    const BucketParams params{read_i64(key, kKeyHeaderBytes), read_i64(key, kKeyHeaderBytes + 8),
                              read_i64(key, kKeyHeaderBytes + 16)};
    if (validate(params) != nullptr) return std::nullopt;
    return params;
  }
  const CompiledRules& compiled = *compiled_;
  auto it = compiled.by_fingerprint.find(fp);
  if (it == compiled.by_fingerprint.end()) return std::nullopt;  // changed, removed, or not ours
  const Rule& rule = compiled.set.rules[it->second];
  const auto override_index = static_cast<std::uint8_t>(key[8]);
  if (override_index == 0) return rule.params;
  if (override_index > rule.overrides.size()) return std::nullopt;
  return rule.overrides[override_index - 1].params;
}

TimeUs Limiter::counter_retention_us(std::string_view key) const {
  const std::optional<BucketParams> params = params_for_key(key);
  const TimeUs periods = params ? 2 * params->period_us : 0;
  return std::max(options_.counter_retention_min_us, periods);
}

void Limiter::enable_replication(std::string origin_id, std::uint64_t incarnation, TimeUs now) {
  options_.replicated = true;
  ledger_.set_self(std::move(origin_id), incarnation, now);
}

std::uint64_t Limiter::merge_remote(std::string_view key, std::string_view origin,
                                    std::uint64_t incarnation, std::uint64_t consumed,
                                    TimeUs now) {
  const std::uint32_t origin_index = ledger_.intern_origin(origin);
  if (origin_index == Ledger::kNoOrigin) return 0;
  const Ledger::Merged merged = ledger_.merge(key, origin_index, incarnation, consumed, now);
  const std::uint64_t increase = merged.increase;
  if (increase == 0) return 0;
  ++stats_.remote_increases;
  const std::optional<BucketParams> params = params_for_key(key);
  if (!params) {
    // Kept and passed on (peers with the rule need it), but nothing to charge.
    ++stats_.remote_unknown_keys;
    return increase;
  }
  TokenBucket* bucket = table_.find(key);
  if (bucket == nullptr) {
    bucket = table_.insert(key, TokenBucket::full(*params, now));
    if (bucket == nullptr) {
      ++stats_.remote_charges_dropped;
      return increase;
    }
    ++stats_.keys_created;
  } else {
    bucket->refill(*params, now);
  }
  // History (consumption from before we started) up to one burst per key.
  const std::uint64_t owed =
      ledger_.charge_for(key, merged, static_cast<std::uint64_t>(params->burst));
  const auto charge = static_cast<std::int64_t>(std::min<std::uint64_t>(owed, kMaxTokens));
  bucket->charge(charge);
  stats_.remote_tokens_charged += static_cast<std::uint64_t>(charge);
  return increase;
}

std::size_t Limiter::sweep(TimeUs now, std::size_t max_visits) {
  const std::size_t evicted = table_.sweep(max_visits, [&](std::string_view key, const TokenBucket& b) {
    const std::optional<BucketParams> params = params_for_key(key);
    if (!params) return true;  // its rule changed or left
    TokenBucket probe = b;
    probe.refill(*params, now);
    return probe.is_full(*params);  // a full bucket is the same as a fresh one
  });
  stats_.keys_evicted += evicted;
  if (options_.replicated) {
    // Counters go only when idle for their retention and their debt is
    // repaid: forgetting earlier would lose consumption still in force.
    stats_.counter_keys_forgotten +=
        ledger_.sweep(max_visits, [&](const std::string& key, const Ledger::KeyState& state) {
          if (now - state.changed_us < counter_retention_us(key)) return false;
          const TokenBucket* bucket = table_.find(key);
          const std::optional<BucketParams> params = params_for_key(key);
          if (bucket == nullptr || !params) return true;
          TokenBucket probe = *bucket;
          probe.refill(*params, now);
          return probe.is_full(*params);
        });
  }
  return evicted;
}

}  // namespace rlimit::core
