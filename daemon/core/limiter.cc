#include "core/limiter.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <unordered_map>

#include "core/bytes.h"
#include "core/stable_hash.h"

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
constexpr std::size_t kKeyHeaderBytes = kRuleKeyHeaderBytes;
constexpr std::uint64_t kInlineFingerprint = 0;
constexpr std::size_t kInlineKeyBytes = kKeyHeaderBytes + 24;
// Buckets visited, at most, to make room when a new key meets a full table.
constexpr std::size_t kMakeRoomVisits = 64;

std::uint64_t read_u64(std::string_view key, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, key.data() + at, 8);
  return v;
}

std::string describe_params(const BucketParams& p) {
  return std::to_string(p.limit) + "/" + std::to_string(p.period_us) + "/" +
         std::to_string(p.burst);
}

// Hashes everything that defines a rule's buckets. Never 0 (the inline space).
std::uint64_t fingerprint(const Rule& rule) {
  std::string text = rule.name + '\0' + rule.describe_match() + '\0' +
                     describe_params(rule.params) + '\0' + algorithm_name(rule.algorithm);
  // Token-bucket rules without options hash as they did before options
  // existed, so their keys survive an upgrade.
  if (const std::string options = rule.options.describe(); !options.empty()) text += '\0' + options;
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

// What a check reads of a rule's match, packed (a DescriptorMatch is 120
// bytes of strings): the descriptor key as a view into the compiled rule set,
// which does not move once compiled.
struct MatchStep {
  std::string_view key;
  const ValueMatcher* matcher = nullptr;  // nullptr: any value
  bool each = false;                      // the value is part of the bucket key
};

// Appends the key of a rule (fingerprint `fp`, override `override_index`,
// match `steps`) to `out` at `used`, growing it as needed; `values` are the
// matched values in step order. Returns the key's length.
[[gnu::always_inline]] inline std::size_t write_rule_key(std::span<const MatchStep> steps,
                                                         std::uint64_t fp,
                                                         std::uint8_t override_index,
                                                         const std::string_view* values,
                                                         std::string& out, std::size_t& used) {
  // Sized first, so the buffer is checked once and each value copied inline.
  std::size_t bytes = kKeyHeaderBytes;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].each) bytes += 4 + values[i].size();
  }
  if (out.size() < used + bytes) out.resize(std::max(2 * out.size(), used + bytes));
  char* at = out.data() + used;
  used += bytes;
  std::memcpy(at, &fp, 8);
  at[8] = static_cast<char>(override_index);
  at += kKeyHeaderBytes;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].each) continue;
    const std::string_view value = values[i];
    const auto length = static_cast<std::uint32_t>(value.size());
    std::memcpy(at, &length, 4);
    copy_bytes(at + 4, value.data(), value.size());
    at += 4 + value.size();
  }
  return bytes;
}

[[gnu::always_inline]] inline const std::string_view* find_value(
    std::span<const Descriptor> descriptors, std::string_view key) {
  for (const Descriptor& d : descriptors) {
    if (equal_bytes(d.key, key)) return &d.value;
  }
  return nullptr;
}

// True when `descriptors` satisfy every step. With `values` (which holds at
// least steps.size() entries), records each step's value for the bucket key.
[[gnu::always_inline]] inline bool matches_steps(std::span<const MatchStep> steps,
                                                 std::span<const Descriptor> descriptors,
                                                 std::string_view* values = nullptr) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string_view* value = find_value(descriptors, steps[i].key);
    if (value == nullptr) return false;
    if (steps[i].matcher != nullptr && !steps[i].matcher->matches(*value)) return false;
    if (values != nullptr) values[i] = *value;
  }
  return true;
}

// matches_steps without recording values, out of line: for overrides and
// exemptions, so that the rule loop it would otherwise be inlined into stays
// small enough for the compiler to inline what the common check needs.
[[gnu::noinline]] bool matches_all_steps(std::span<const MatchStep> steps,
                                         std::span<const Descriptor> descriptors) {
  return matches_steps(steps, descriptors);
}

// Where in CompiledRules::steps one match list (a rule's, an override's, an
// exemption's) lies.
struct StepRange {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

// Appends `match` to `steps` as MatchSteps (views into `match`, which must
// not move afterwards); returns where they lie.
StepRange compile_steps(const std::vector<DescriptorMatch>& match, std::vector<MatchStep>& steps) {
  const StepRange range{static_cast<std::uint32_t>(steps.size()),
                        static_cast<std::uint32_t>(match.size())};
  for (const DescriptorMatch& m : match) {
    steps.push_back(
        {m.key, m.value.kind == ValueMatchKind::kAny ? nullptr : &m.value, m.value.each});
  }
  return range;
}

// The sliding log and window keep a record of when they admitted, not a
// balance: a peer's news of them carries its age (key_news), and what they
// admit beyond the limit is repaid only as far as the record holds it (the
// log: not at all; the window: its carried overshoot), so fair shares do
// not share a burst's pool at their wake as the others do (share_admits;
// the log does, over two horizons, where demand is dense).
bool remembers_when(Algorithm algorithm) {
  return algorithm == Algorithm::kSlidingLog || algorithm == Algorithm::kSlidingWindow;
}

// An algorithm whose room an epoch's share spends as it comes back (in
// proportion to the time elapsed in the epoch), not all at the epoch's
// start (share_admits). A sliding window frees room continuously (the
// previous window's weight falls with time), and what it admits beyond one
// limiter is not a debt. The bucket-like ones repay an early spend as a
// debt, but only while demand lasts: a burst that stops before the epoch's
// end leaves a debt the idle bucket forgives at its cap, an excess one
// bucket would not have admitted (docs/cluster.md, "Fair shares": "A refill
// accrues"; a job at every node every 5 s, `periodic`, 20 nodes, seeds 1-4:
// +3.50% -> +1.26%). A log or a fixed window frees in steps that the
// algorithm itself times (it refuses until then): spendable at once.
bool refill_accrues(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSlidingWindow:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
    case Algorithm::kSmoothBursty:
    case Algorithm::kSmoothWarmingUp:
    case Algorithm::kTokenBucket:
      return true;
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      return false;
  }
  return false;
}

// An algorithm whose share takes the fraction of the unit it will be
// freeing at the epoch's end from a second verdict (freed_fraction()): one
// that frees a unit every period / limit and keeps no fractions a share can
// read, as a token bucket's Accrual is read. Smooth bursty, tried, came out
// the same (docs/cluster.md, "A refill's fraction").
bool keeps_refill_fraction(Algorithm algorithm) {
  return algorithm == Algorithm::kGcra || algorithm == Algorithm::kLeakyBucket;
}

// An algorithm that admits one request beyond the units its verdict counts
// as remaining (smooth bursty's reservation: the request passes and the
// next one waits), so the balance and the cap a share sees hold that
// request too, as its bucket would (share_admits): its shares left it out
// and summed a request short of each burst, which the cap then lost
// (`coldkeys`, 60 s, seed 1, at 5 / 20 / 50 nodes: -0.73 / -1.04 / -1.51%
// -> +0.08 / -0.07 / -0.27%; docs/cluster.md, "Smooth bursty's request
// ahead"). Smooth warming up reserves alike but is not measured so: left
// as it was.
bool admits_one_ahead(Algorithm algorithm) { return algorithm == Algorithm::kSmoothBursty; }

// An algorithm whose burst's overspend, forgiven by the idle spell that
// fills it to its cap, the next burst repays (FairShare, "A forgiven
// debt"): a continuous refill at the rule's rate up to its burst. Warming
// up's stored permits and the rate they come back at are its own.
// And the windows: what a fixed window admits beyond its limit its next
// window repays, but an idle window forgives; what a sliding window admits
// beyond its limit in a burst into an emptied window nothing repays (docs/
// cluster.md, "A fixed window's debt", "A sliding window's debt").
bool carries_debt(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
    case Algorithm::kSmoothBursty:
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindow:
      return true;
    case Algorithm::kSmoothWarmingUp:
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      return false;
  }
  return false;
}

}  // namespace

struct Limiter::CompiledRules {
  // Pinned in place: steps and plans point into set and limits.
  CompiledRules() = default;
  CompiledRules(const CompiledRules&) = delete;
  CompiledRules& operator=(const CompiledRules&) = delete;

  RuleSet set;
  std::vector<std::uint64_t> fingerprints;                        // parallel to set.rules
  std::unordered_map<std::uint64_t, std::size_t> by_fingerprint;  // -> rule index
  // Per rule: [0] the rule's own limit, [o + 1] override o's.
  std::vector<std::vector<CompiledLimit>> limits;
  // Per exemption: indices of the rules it skips (empty: all).
  std::vector<std::vector<std::size_t>> exempt_rules;
  // What a check reads of each rule, parallel to set.rules: its match and
  // its overrides' matches as ranges of `steps`.
  struct RulePlan {
    StepRange match;
    std::uint32_t first_override = 0;  // index into override_matches
    std::uint32_t override_count = 0;  // at most 255 (the key's override byte)
    std::uint64_t fingerprint = 0;
    const CompiledLimit* limits = nullptr;  // [0] the rule's own, [o + 1] override o's
    bool token_bucket = false;
    bool hard_token_bucket = false;  // a token bucket in hard throttle mode
  };
  std::vector<MatchStep> steps;
  std::vector<RulePlan> plans;
  std::vector<StepRange> override_matches;   // every rule's, in rule order
  std::vector<StepRange> exemption_matches;  // parallel to set.exemptions
  RuleSetBounds bounds;
  std::span<const MatchStep> steps_of(StepRange range) const {
    return {steps.data() + range.first, range.count};
  }
  // 1 + the index of the first override of `plan` that `descriptors` match,
  // 0 for none. Inline for the common rule without overrides.
  [[gnu::always_inline]] std::uint8_t override_of(const RulePlan& plan,
                                                  std::span<const Descriptor> descriptors) const {
    if (plan.override_count == 0) return 0;
    return first_override_matching(plan, descriptors);
  }
  std::uint8_t first_override_matching(const RulePlan& plan,
                                       std::span<const Descriptor> descriptors) const {
    for (std::uint32_t o = 0; o < plan.override_count; ++o) {
      if (matches_all_steps(steps_of(override_matches[plan.first_override + o]), descriptors)) {
        return static_cast<std::uint8_t>(o + 1);
      }
    }
    return 0;
  }
};

const AlgorithmOptions kDefaultOptions;

// One key a check touches. Trivially destructible, so that reusing pending_
// across checks (add_pending) costs nothing: what only other algorithms need
// (a variant that may hold a vector) lives in Limiter::AlgorithmScratch.
struct Limiter::Pending {
  // User-provided, so emplace_back() initializes member by member instead of
  // zeroing the whole struct first (a `rep stos` that measured a third of a
  // hot-key check).
  Pending() {}

  std::string_view name;
  const CompiledLimit* limit = nullptr;  // nullptr: the inline limit (a token bucket)
  const AlgorithmOptions* options = &kDefaultOptions;
  BucketParams params;
  bool token_bucket = true;
  bool hard_token_bucket = true;  // decided without building a verdict (unless reserving)
  bool in_table = true;           // the state is a StateCell in the KeyTable
  std::uint32_t scratch = 0;      // other algorithms: index into algorithm_scratch_
  std::size_t key_offset = 0;
  std::size_t key_bytes = 0;
  // A token bucket or another compact state, in the KeyTable.
  StateCell* cell = nullptr;  // existing, or nullptr (a fresh one)
  StateCell fresh;            // used when cell == nullptr
  // The sliding log and concurrency, in the StateTable.
  RuleState* state = nullptr;  // existing state, or nullptr (the scratch's fresh one)
  // The decision (the verdict it came from, when one was built, is in the
  // scratch).
  alg::ThrottleDecision decision;
  // Fair shares, when gated: the key's ledger state, which holds its share
  // (and saves add_local a lookup); whether the share is spent on charge;
  // when it refused what the algorithm allowed, until its next epoch.
  Ledger::KeyState* ledger_state = nullptr;
  bool share_spends = false;
  std::int64_t share_retry_us = 0;
  std::uint32_t rule = kNoRule;  // index into the rules (for rule_shares_)

  // The key's algorithm (an inline limit is a token bucket).
  Algorithm algorithm() const { return limit != nullptr ? limit->algorithm : Algorithm::kTokenBucket; }
  StateCell& current() { return cell != nullptr ? *cell : fresh; }
  TokenBucket& bucket() { return current().as<TokenBucket>(); }
  // The token bucket's waits, dividing by the rule's precomputed limit
  // (inline limits have no CompiledLimit: they divide).
  const Divider* limit_divider() const {
    return limit != nullptr ? &limit->limit_divider : nullptr;
  }
  std::int64_t retry_after_us(std::int64_t cost) {
    return bucket().retry_after_us(params, cost, limit_divider());
  }
  std::int64_t reset_after_us() { return bucket().reset_after_us(params, limit_divider()); }
  // The token bucket's answer in the algorithms' terms, for throttle modes
  // and reservations. The bucket is refilled to now.
  alg::Verdict token_bucket_verdict(std::int64_t cost) {
    const TokenBucket& b = bucket();
    alg::Verdict v;
    v.allowed = b.allows(cost);
    v.limit = params.burst;
    v.remaining = std::max<std::int64_t>(b.tokens() - (v.allowed ? cost : 0), 0);
    v.retry_after_us = v.allowed ? 0 : retry_after_us(cost);
    v.reset_after_us = reset_after_us();
    v.excess = v.allowed ? 0 : cost - b.tokens();
    return v;
  }
};

// A fresh Pending at the end of this check's keys, reusing pending_'s
// storage (Pending is trivially destructible: constructing over it is fine).
[[gnu::always_inline]] inline Limiter::Pending& Limiter::add_pending() {
  if (pending_count_ == pending_.size()) pending_.emplace_back();  // grows a few times at most
  return *std::construct_at(&pending_[pending_count_++]);
}

inline std::span<Limiter::Pending> Limiter::pending() { return {pending_.data(), pending_count_}; }

// What a rule other than a hard token bucket needs while a check is decided.
struct Limiter::AlgorithmScratch {
  AlgorithmParams effective;  // the limit's params, with the request's max wait
  RuleState fresh_state;
  alg::Verdict verdict;
};
Limiter::CompiledLimit::CompiledLimit(const BucketParams& bucket_params,
                                      const AlgorithmParams& algorithm_params,
                                      const AlgorithmOptions* algorithm_options)
    : bucket(bucket_params),
      params(algorithm_params),
      options(algorithm_options),
      algorithm(algorithm_of(algorithm_params)),
      in_cell(core::in_cell(algorithm_params)),
      hands_out_waits(core::hands_out_waits(algorithm_params)),
      schedules(algorithm != Algorithm::kSlidingLog && algorithm != Algorithm::kConcurrency),
      limit_divider(bucket_params.limit > 0
                        ? Divider(static_cast<std::uint64_t>(bucket_params.limit))
                        : Divider()) {}

Limiter::Limiter(LimiterOptions options, RuleSet rules)
    : options_(options), table_(options.max_keys) {
  replace_rules(std::move(rules));
}

Limiter::Limiter(LimiterOptions options, const Limiter& rules_of)
    : compiled_(rules_of.compiled_),
      options_(options),
      rule_shares_(compiled_->set.rules.size() + 1),
      table_(options.max_keys),
      rule_counters_(compiled_->set.rules.size() + 1) {}

Limiter::~Limiter() = default;

const RuleSet& Limiter::rules() const { return compiled_->set; }

const RuleSetBounds& Limiter::rule_bounds() const { return compiled_->bounds; }

void Limiter::set_max_keys(std::size_t max_keys) {
  options_.max_keys = max_keys;
  table_.set_max_keys(max_keys);
}

ReplaceSummary Limiter::replace_rules(RuleSet rules) {
  auto next = std::make_shared<CompiledRules>();
  ReplaceSummary summary;
  std::unordered_map<std::string_view, std::size_t> old_by_name;
  // A kept rule keeps its counters; the inline limits' slot (last) stays.
  std::vector<RuleCounters> counters(rules.rules.size() + 1);
  if (!rule_counters_.empty()) counters.back() = rule_counters_.back();
  if (compiled_) {
    for (std::size_t i = 0; i < compiled_->set.rules.size(); ++i) {
      old_by_name.emplace(compiled_->set.rules[i].name, i);
    }
  }
  std::size_t still_present = 0;
  for (std::size_t r = 0; r < rules.rules.size(); ++r) {
    const Rule& rule = rules.rules[r];
    auto old = old_by_name.find(rule.name);
    if (old == old_by_name.end()) {
      ++summary.added;
    } else {
      ++still_present;
      // Same definition, same fingerprint: its buckets simply stay.
      if (compiled_->set.rules[old->second].same_definition(rule)) {
        ++summary.kept;
        counters[r] = rule_counters_[old->second];
      } else {
        ++summary.changed;
      }
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
  // The options live in next->set, which does not move again.
  for (const Rule& rule : next->set.rules) {
    std::vector<CompiledLimit>& limits = next->limits.emplace_back();
    const auto compile = [&](const BucketParams& bucket) {
      std::string error;
      std::optional<AlgorithmParams> params =
          make_algorithm_params(rule.algorithm, bucket, rule.options, &error);
      // The config loader validates every rule with the same function.
      assert(params && "a rule the config loader would refuse");
      limits.push_back({bucket, params ? *params : AlgorithmParams(bucket), &rule.options});
    };
    compile(rule.params);
    for (const Override& o : rule.overrides) compile(o.params);
    const bool per_descriptor = std::any_of(rule.match.begin(), rule.match.end(),
                                            [](const DescriptorMatch& m) { return m.value.each; });
    for (CompiledLimit& limit : limits) limit.per_descriptor = per_descriptor;
  }
  // Plans last: they point into set and limits, which are complete now.
  for (std::size_t r = 0; r < next->set.rules.size(); ++r) {
    const Rule& rule = next->set.rules[r];
    CompiledRules::RulePlan& plan = next->plans.emplace_back();
    plan.match = compile_steps(rule.match, next->steps);
    plan.first_override = static_cast<std::uint32_t>(next->override_matches.size());
    plan.override_count =
        static_cast<std::uint32_t>(std::min<std::size_t>(rule.overrides.size(), 255));
    for (std::uint32_t o = 0; o < plan.override_count; ++o) {
      next->override_matches.push_back(compile_steps(rule.overrides[o].match, next->steps));
    }
    plan.fingerprint = next->fingerprints[r];
    plan.limits = next->limits[r].data();
    plan.token_bucket = rule.algorithm == Algorithm::kTokenBucket;
    plan.hard_token_bucket =
        plan.token_bucket && rule.options.throttle.mode == alg::ThrottleMode::kHard;
    RuleSetBounds& bounds = next->bounds;
    ++bounds.rules;
    bounds.max_name_bytes = std::max(bounds.max_name_bytes, rule.name.size());
    bounds.concurrency = bounds.concurrency || rule.algorithm == Algorithm::kConcurrency;
  }
  for (const Exemption& exemption : next->set.exemptions) {
    next->exemption_matches.push_back(compile_steps(exemption.match, next->steps));
  }
  compiled_ = std::move(next);
  rule_counters_ = std::move(counters);
  // Learned per rule, and the rules are new: learned again.
  rule_shares_.assign(compiled_->set.rules.size() + 1, RuleShares{});
  return summary;
}

template <bool kCounted>
bool Limiter::gather(const CheckInput& input, CheckOutput& out) {
  const CompiledRules& compiled = *compiled_;
  auto invalid = [&](std::string message) {
    out.status = CheckStatus::kInvalid;
    out.allowed = false;
    out.error = std::move(message);
    if constexpr (kCounted) ++stats_.invalid;
    return false;
  };
  if (input.cost < 0 || input.cost > kMaxTokens) {
    return invalid("cost must be between 0 and 2^50");
  }
  if (input.max_wait_us < -1 || input.max_wait_us > alg::kMaxToleranceUs) {
    return invalid("max_wait_us must be -1 (none) or between 0 and 2^60");
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
    if (!matches_all_steps(compiled.steps_of(compiled.exemption_matches[e]), input.descriptors)) {
      continue;
    }
    const std::vector<std::size_t>& skip = compiled.exempt_rules[e];
    if (skip.empty()) {
      out.status = CheckStatus::kExempt;
      out.allowed = true;
      if constexpr (kCounted) {
        ++stats_.exempt;
        ++stats_.allowed;
      }
      return false;
    }
    for (std::size_t r : skip) skipped_[r] = true;
  }

  // Gather the keys every matching rule (and the inline limit) points at.
  // Keys are written into key_scratch_, which only grows: `key_used` bytes of
  // it hold this check's keys.
  pending_count_ = 0;
  std::uint32_t algorithm_scratch_used = 0;
  // Rules that build a verdict get scratch space (reused across checks).
  const auto take_scratch = [&](Pending& p) {
    p.scratch = algorithm_scratch_used++;
    if (algorithm_scratch_.size() < algorithm_scratch_used) algorithm_scratch_.emplace_back();
  };
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
  for (std::size_t r = 0; r < compiled.plans.size(); ++r) {
    const CompiledRules::RulePlan& plan = compiled.plans[r];
    const std::span<const MatchStep> steps = compiled.steps_of(plan.match);
    if (match_values_.size() < steps.size()) match_values_.resize(steps.size());
    if (!matches_steps(steps, input.descriptors, match_values_.data())) continue;
    if (has_exemptions && skipped_[r]) {
      any_skipped = true;
      continue;
    }
    const Rule& rule = compiled.set.rules[r];
    const std::uint8_t override_index = compiled.override_of(plan, input.descriptors);
    Pending& p = add_pending();
    p.rule = static_cast<std::uint32_t>(r);
    p.name = rule.name;
    p.limit = &plan.limits[override_index];
    p.options = &rule.options;
    p.params = p.limit->bucket;
    p.token_bucket = plan.token_bucket;
    p.hard_token_bucket = plan.hard_token_bucket;
    p.in_table = p.token_bucket || p.limit->in_cell;
    if (!p.hard_token_bucket || input.mode == CheckMode::kReserve) take_scratch(p);
    p.key_offset = key_used;
    p.key_bytes = write_rule_key(steps, plan.fingerprint, override_index, match_values_.data(),
                                 key_scratch_, key_used);
  }
  if (input.inline_limit != nullptr) {
    Pending& p = add_pending();
    p.name = input.inline_limit->key;
    p.params = input.inline_limit->params;
    if (input.mode == CheckMode::kReserve) take_scratch(p);
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
  if (pending_count_ == 0) {
    out.allowed = true;
    out.status = any_skipped ? CheckStatus::kExempt : CheckStatus::kOk;
    if constexpr (kCounted) {
      ++(any_skipped ? stats_.exempt : stats_.unmatched);
      ++stats_.allowed;
    }
    return false;
  }
  return true;
}

void Limiter::shape(const CheckInput& input, CheckShape& shape) {
  shape = CheckShape{};
  shape_scratch_.clear();
  if (!gather</*kCounted=*/false>(input, shape_scratch_)) {
    shape.error_bytes = shape_scratch_.error.size();
    return;
  }
  for (const Pending& p : pending()) {
    ++shape.verdicts;
    shape.name_bytes += p.name.size();
    if (p.algorithm() == Algorithm::kConcurrency) {
      ++shape.leases;
      shape.lease_key_bytes += p.key_bytes;
    }
  }
}

void Limiter::prefetch(const CheckInput& input) {
  const CompiledRules& compiled = *compiled_;
  for (std::size_t r = 0; r < compiled.plans.size(); ++r) {
    const CompiledRules::RulePlan& plan = compiled.plans[r];
    if (!plan.token_bucket) continue;
    const std::span<const MatchStep> steps = compiled.steps_of(plan.match);
    if (match_values_.size() < steps.size()) match_values_.resize(steps.size());
    if (!matches_steps(steps, input.descriptors, match_values_.data())) continue;
    const std::uint8_t override_index = compiled.override_of(plan, input.descriptors);
    std::size_t used = 0;
    const std::size_t bytes = write_rule_key(steps, plan.fingerprint, override_index,
                                             match_values_.data(), prefetch_scratch_, used);
    table_.prefetch(std::string_view(prefetch_scratch_.data(), bytes));
  }
}

Limiter::RuleShares& Limiter::rule_shares_of(const Pending& p) {
  // The inline limits share the last slot.
  return rule_shares_[p.rule == kNoRule ? rule_shares_.size() - 1 : p.rule];
}

void Limiter::note_refused_demand(const Pending& p, std::string_view key, TimeUs now) {
  if (p.cell != nullptr) {
    RefusalNoted& noted =
        refusal_noted_[(reinterpret_cast<std::uintptr_t>(p.cell) >> 6) % refusal_noted_.size()];
    const TimeUs slot = now >> kRefusedDemandSlotBits;
    if (noted.cell == p.cell && noted.slot == slot) return;
    noted = {p.cell, slot};
  }
  Ledger::KeyState* state = ledger_.state_with_share(key);
  if (state != nullptr) state->share->note_asked(now);
}

bool Limiter::share_admits(Pending& p, std::string_view key, std::int64_t headroom,
                           const CheckInput& input, TimeUs now) {
  // Set afresh each time: a check may be decided twice.
  p.ledger_state = nullptr;
  p.share_spends = false;
  p.share_retry_us = 0;
  // A key with no ledger record yet gets one (and a share) only while the
  // ledger holds fewer than max_keys: a flood of new keys refused by other
  // rules must not grow it without bound. Past that, no gate (counted).
  Ledger::KeyState* found = ledger_.share_state(key, now, ledger_.size() < options_.max_keys);
  if (found == nullptr) {
    ++stats_.share_untracked;
    return true;
  }
  Ledger::KeyState& state = *found;
  FairShare& share = *state.share;
  p.ledger_state = &state;
  if (share.due(now)) {
    // The request this epoch decides is the key's first growth after a
    // quiet spell, if it is one: the wake is noted now, so the epoch that
    // starts the burst here counts as one after the wake.
    ledger_.wake_if_quiet(state, now);
    ShareInputs in;
    in.headroom = headroom;
    // Within a horizon of the key's wake, the epoch shares the pool as it
    // stood then and ends with that horizon, where an overspend is repaid in
    // full, as a debt (the buckets, GCRA, the fixed window): it makes the
    // shares' overlap a little larger. On a sliding window at 200 nodes it
    // took `aligned` from +1.41% to +3.70% (docs/cluster.md, "A burst's pool").
    const Algorithm algorithm = p.algorithm();
    const bool repays = !remembers_when(algorithm);
    // A sliding log repays nothing, and with one horizon from the wake the
    // burst's second epochs shared again what the first ones had spent but
    // not yet been heard of (aligned bursts from the 10th second on: +0.58%
    // at 20 nodes, +0.79% at 50), while without the wake's pool the late
    // starters shared only what the first had left (-1.27% at 200). So
    // where this node's demand on the key is dense (a burst, not a user's
    // request now and then: sparse keys would wait two horizons for a
    // share), its epoch within two horizons of the wake shares the wake's
    // pool and ends with them
    // (docs/cluster.md, "A log's burst in one epoch"), less what the burst
    // before consumed beyond its pool ("A log's burst error, carried").
    // And where it is one of a crowd of single requests (many nodes, each
    // asking a request or so of each burst: thin at each node, a burst in
    // all), whose shares, each a chance, spent 88-92% of each burst's room
    // with no burst error to credit the rest (`coldkeys` at 200 nodes, seed
    // 1: -7.29% -> -3.08% over 60 s; docs/cluster.md, "A crowd of single
    // requests").
    TimeUs wake_end = 0;
    // A log whose demand here is a burst's, in either way.
    const bool log = algorithm == Algorithm::kSlidingLog;
    const bool dense = share.dense(now);
    const bool single_in_crowd = log && !dense && share.single_in_crowd();
    const bool log_in_burst = log && (dense || single_in_crowd);
    if (repays) {
      // A fixed window frees nothing until its window ends: where demand
      // here is dense, the wake's pool is shared over
      // kFixedWindowWakeHorizons, a burst in one epoch, up to the wake's
      // window's end; with one horizon the next epochs re-shared the
      // balance from views that had not yet heard of the first ones'
      // spending, and the debt repaid it only a job late (`periodic` at 20
      // nodes, 30 s, seeds 1-4: +1.08% mean, +0.04% so; docs/cluster.md,
      // "A fixed window's burst in one epoch"). None in a later window:
      // its pool is its own (FairShare::wake_end_in_step_us; below).
      wake_end = algorithm == Algorithm::kFixedWindow
                     ? share.wake_end_in_step_us(share_view_, now,
                                                 dense ? FairShare::kFixedWindowWakeHorizons : 1,
                                                 p.params.period_us)
                     : share.wake_end_us(share_view_, now);
    } else if (log_in_burst) {
      wake_end = share.wake_end_us(share_view_, now, FairShare::kLogWakeHorizons);
      in.carry_burst_error = wake_end > 0;
      // What the log holds back of its own carry, in the headroom: the
      // burst error does not take it again (ShareInputs::algorithm_held).
      if (in.carry_burst_error && !p.in_table && p.state != nullptr) {
        in.algorithm_held = held_state(*p.state, algorithm_scratch_[p.scratch].effective, now);
      }
    }
    in.from_wake = wake_end > 0;
    if (single_in_crowd && in.from_wake) ++stats_.share_single_crowd_epochs;
    in.epoch_end_us = in.from_wake ? wake_end : now + share_view_.horizon_us;
    // The refill is what the algorithm frees by the epoch's end, within it.
    TimeUs refill_at_us = in.epoch_end_us;
    if (algorithm == Algorithm::kFixedWindow) {
      // A fixed window's room comes back whole at its window's end: an
      // epoch that ran past it shared one window's room over both sides
      // of the edge (the headroom now, or the next window's whole limit as
      // its refill), and 200 nodes whose jobs cross a window's start
      // (`periodic` from 3.9 s) admitted 72 of the second window's 100. So
      // the epoch ends with its window, and its refill is what the window
      // frees before that end: nothing. (Not a probe's, FairShare's: cut,
      // the next epoch would find no news yet and take the whole balance.)
      // And a dense node's first epoch in a window the key's burst went on
      // into shares that window's pool as it stood at its start (the limit,
      // less the debt: ShareInputs::from_step), over
      // kFixedWindowWakeHorizons, as the wake's epoch shares the wake's: the
      // nodes whose first request in the window came after others' news
      // shared only what those had left (docs/cluster.md, "A fixed window's
      // epoch ends with its window").
      const TimeUs window_end_us = FairShare::step_end_us(now, p.params.period_us);
      if (!in.from_wake && dense && share.first_in_new_step(now, p.params.period_us)) {
        in.from_step = true;
        in.epoch_end_us = now + FairShare::kFixedWindowWakeHorizons * share_view_.horizon_us;
      }
      in.epoch_end_us = std::min(in.epoch_end_us, window_end_us);
      if (in.epoch_end_us == window_end_us) refill_at_us = window_end_us - 1;
    }
    if (p.token_bucket) {
      // With the fraction of a token the bucket holds and the one the epoch
      // adds, as the bucket itself keeps them: rounded down, an epoch about
      // a token's refill time long (a limit of 10/s, bursts of 100 ms)
      // shared none of its refill (docs/cluster.md, "A refill's fraction").
      const TokenBucket::Accrual accrual =
          p.bucket().accrual_over(p.params, in.epoch_end_us - now, FairShare::kFractionBits);
      in.refill = accrual.tokens;
      in.refill_fraction = accrual.fraction;
    } else {
      // What the algorithm would admit by the epoch's end if nothing more
      // were spent: a log or a window frees what it admitted a period ago,
      // which need not come back at the average rate.
      const AlgorithmScratch& scratch = algorithm_scratch_[p.scratch];
      const auto evaluate_at = [&](std::int64_t cost, TimeUs at) {
        return p.in_table ? evaluate_cell(p.current(), scratch.effective, cost, at)
                          : evaluate_state(p.state != nullptr ? *p.state : scratch.fresh_state,
                                           scratch.effective, cost, at);
      };
      const auto at_epoch_end = [&](std::int64_t cost) { return evaluate_at(cost, refill_at_us); };
      // A log frees its room when its entries leave, at times the log knows,
      // and each node's log refuses only beyond its own view's room: a share
      // of what frees later in the epoch, spendable at once, let every node
      // spend its part before it freed wherever its view held some room now
      // (bursts every 300 ms at 200 nodes: later windows 1.71 x the limit,
      // then silence). So where this node's demand on the key is a burst's
      // (log_in_burst) and the log frees its first unit beyond the headroom
      // a part of the epoch or more in (FairShare::kLogEpochCutFrom), the
      // epoch ends there and shares the room there is; the next shares what
      // freed (docs/cluster.md, "A log's epoch ends where its room frees").
      // Not where it is sparse: each cut epoch gave a node one more sparse
      // pass (`algo_sliding_log`, seeds 1-8: +0.01% -> +0.23% mean).
      bool cut = false;
      if (log_in_burst) {
        const alg::Verdict next = evaluate_at(std::max<std::int64_t>(1, headroom + 1), now);
        const TimeUs frees_at = now + next.retry_after_us;
        cut = !next.allowed && next.retry_after_us > 0 && frees_at < in.epoch_end_us &&
              FairShare::kLogEpochCutFrom * next.retry_after_us >= in.epoch_end_us - now;
        if (cut) {
          in.epoch_end_us = frees_at;
          ++stats_.share_log_epochs_cut;
        }
      }
      if (!cut) {
        const alg::Verdict later = at_epoch_end(input.cost);
        const std::int64_t headroom_later = later.remaining + (later.allowed ? input.cost : 0);
        in.refill = std::max<std::int64_t>(0, headroom_later - headroom);
        if (keeps_refill_fraction(algorithm)) {
          // And the fraction of the next unit they will have freed by then,
          // as a token bucket's share holds its own: the wait for one unit
          // more against the time a unit takes to free (a refused verdict; a
          // bucket at its cap, or a shaper that would delay it, holds none).
          const alg::Verdict next = at_epoch_end(headroom_later + 1);
          if (!next.allowed) {
            in.refill_fraction =
                freed_fraction(next.retry_after_us, p.params.limit, p.params.period_us);
          }
        }
      }
    }
    in.refill_accrues = refill_accrues(algorithm);
    in.carries_debt = carries_debt(algorithm);
    in.rate_limit = p.params.limit;
    in.rate_period_us = p.params.period_us;
    in.capacity = p.params.burst;
    if (algorithm == Algorithm::kFixedWindow || algorithm == Algorithm::kSlidingWindow) {
      // A window's room comes back in windows: a fixed window's whole at
      // each start; a sliding window's at the rate from the end of the
      // window a burst woke in (counted whole there, a burst across a
      // window's start found a shortfall each time: docs/cluster.md, "A
      // sliding window's burst across a window's start"). A sliding window
      // forgets a burst only once its previous window no longer holds it
      // (docs/cluster.md, "A fixed window's debt", "A sliding window's
      // debt").
      in.capacity = p.params.limit;
      in.refill_step_us = p.params.period_us;
      in.forget_steps = algorithm == Algorithm::kSlidingWindow ? 2 : 1;
    }
    if (admits_one_ahead(algorithm)) {
      in.headroom += input.cost;
      in.capacity += input.cost;
    }
    for (const Ledger::Entry& e : state.entries) {
      if (e.origin == 0) {  // this node, in any incarnation
        in.own_consumed += e.consumed;
      } else {
        ++in.others;
      }
    }
    // Within a horizon of a wake, the last burst's origins count too: a node
    // that starts late in a burst has heard of it, and the last burst's
    // origins no longer look recent beside its news (a job on 200 nodes
    // every 5 s, `periodic`: +6.30% without, +4.48% with, +4.76% counting
    // every origin with an entry).
    in.new_burst = ledger_.quiet(state, now);
    in.repays_overshoot = repays;
    // Where an overshoot stays one (a sliding log or window), a crowd counts
    // the nodes that ask: a log's single askers, a window's every asker
    // (`coldkeys` at 200 nodes over 60 s, seed 1: the log -3.08% -> +0.67%,
    // the window -1.83% -> -0.96%; docs/cluster.md, "A crowd of single
    // requests, as many as ask").
    using Askers = ShareInputs::CrowdOfAskers;
    in.crowd_of_askers = algorithm == Algorithm::kSlidingLog      ? Askers::kSingleAskers
                         : algorithm == Algorithm::kSlidingWindow ? Askers::kEveryAsker
                                                                  : Askers::kNone;
    TimeUs woke_us = share.wake_end_us(share_view_, now) > 0 ? share.woke_us() : 0;
    if (!repays && !in.new_burst) {
      // Where an overshoot stays one, a burst is new to this epoch while it
      // began (as its entries' times tell) within a horizon, though news of
      // its first spenders has come: a node asked one request of the burst
      // late in it, or one without a share to note the wake at all, would
      // see neither a quiet key nor a wake (FairShare::start_epoch, "A
      // sliding log repays no overshoot"). Its origins are counted from
      // then: a wake this node noted when news came may lie well after it.
      const TimeUs burst_woke_us = Ledger::burst_woke_us(state, now, share_view_.horizon_us);
      if (burst_woke_us > 0) {
        in.new_burst = true;
        woke_us = burst_woke_us;
      }
    }
    const Ledger::RecentOthers recent =
        Ledger::recent_others(state, FairShare::kCrowdedWithinUs,
                              FairShare::kBurstHorizons * share_view_.horizon_us, woke_us);
    in.recent_others = recent.within;
    in.burst_others = recent.in_burst;
    if (woke_us == 0 && share.young(now)) {
      // A node meeting the key (its share young, no wake noted here) counts
      // the crowd of the key's last burst too, as one that noted the wake
      // does: the news of this burst has barely begun, and without it such
      // nodes passed their first request of each key unthinned (`coldkeys`
      // at 200 nodes, the leaky bucket, seed 2: 896 of the second burst's
      // 1,552 admitted, 1.55 x the limit; docs/cluster.md, "A newcomer
      // counts the last burst"). The last burst is the one before a horizon
      // ago; counted in one burst (kBurstHorizons), so a key asked now and
      // then by many nodes over a second opens no gate (`hotkeys` at 50
      // nodes, counting a second's origins instead: -1.40% -> -4.43%, or
      // -6.50% where that kept the key thinned at its new bursts).
      // (The larger of this burst's count and the last one's, as above.)
      in.burst_others = Ledger::recent_others(state, FairShare::kCrowdedWithinUs,
                                              FairShare::kBurstHorizons * share_view_.horizon_us,
                                              now - share_view_.horizon_us)
                            .in_burst;
    }
    in.has_own = Ledger::own_consumed(state) > 0;  // an ask is no spending
    // How many nodes spend on a key of this rule, learned from its keys'
    // epochs (x16, a running average).
    RuleShares& rule = rule_shares_of(p);
    if (rule.spread_x16 == kSpreadUnknown) {
      // Until learned: a rule's one shared key may be spent on by every
      // node at once (strict); a key per user most likely sees a request now
      // and then (the probe keeps the first request of an epoch), unless
      // this node met many of the rule's keys new at once (crowded_start):
      // then every node may be meeting the same keys (many users' first
      // requests at once, `coldkeys`), and each passing its first request
      // of each key admitted a request a node a key before any news (10.9 x
      // the limit in the first second at 200 nodes).
      in.spenders = share_view_.live_nodes;
      in.sparse_rule = (p.limit == nullptr || p.limit->per_descriptor) &&
                       now >= rule.dense_until_us && !rule.crowded_start;
    } else {
      in.spenders = rule.spread_x16 < 2 * 16 ? 0 : (rule.spread_x16 + 15) / 16;
      in.sparse_rule = now >= rule.dense_until_us;
    }
    in.all_consumed = Ledger::consumed_sum(state);
    // One seed, the one the algorithm's draws use (ShareInputs::spread_draws).
    in.spread_draws = algorithm != Algorithm::kSlidingLog;
    if (in.spread_draws) {
      in.key_seed = fnv1a(key);
    } else {
      in.dither_seed = ledger_.dither_seed(key);
    }
    // Learned only from keys this node has known for a news horizon (a
    // younger key's other spenders may not have been heard of yet),
    // including keys its probe refused and nobody else spent on: spread 1.
    // Where keys are routed, from a key whose first epoch is over: an owner
    // sends a node that asked or spent every entry it holds, and a spender's
    // news reaches the key's other nodes through the owners in two gossip
    // rounds, well within the probe's horizon (rounds + 1 of them), so the
    // first epoch's spenders are known at its end; the horizon after it,
    // for the probe's late spenders, held a crowded start's strict probes
    // (ShareInputs::crowded_start) on every key the node met meanwhile:
    // `owners1000` at 150 nodes, 20,000 users each on 4 nodes, all new at
    // once, refused 5% of the requests of users below their limit
    // (docs/cluster.md, "Keys new at once": "A routed rule's spread").
    const bool learn = !share.young(now) || (share_view_.routed && share.met_before());
    in.crowded_start = rule.crowded_start && rule.spread_x16 == kSpreadUnknown;
    const FairShare::EpochStart found = share.start_epoch(share_view_, in, now);
    if (found.crowded_origins) ++stats_.share_crowded_epochs;
    if (found.made_crowded) ++stats_.share_keys_crowded;
    if (found.idle_raise_capped) ++stats_.share_idle_raise_capped;
    if (found.sparse_raised) ++stats_.share_sparse_raised;
    if (found.sparse_raise_capped) ++stats_.share_sparse_raise_capped;
    if (found.contended_balance) ++stats_.share_contended_balance;
    if (found.askers_floored) ++stats_.share_askers_floored;
    if (found.debt_carried) {
      ++stats_.share_debts_carried;
      stats_.share_debt_carried_units += static_cast<std::uint64_t>(share.debt());
    }
    if (found.credit_carried) {
      ++stats_.share_credits_carried;
      stats_.share_credit_carried_units += static_cast<std::uint64_t>(-std::int64_t{share.debt()});
    }
    if (found.debt_capped) ++stats_.share_debts_capped;
    if (found.pass_thinned) ++stats_.share_passes_thinned;
    if (learn) {
      // Asks count: the nodes that asked for a key spend on it when they can.
      const std::uint32_t spenders = in.others + (state.own >= 0 ? 1 : 0);
      const std::uint32_t origins_x16 = 16 * std::max<std::uint32_t>(1, spenders);
      rule.spread_x16 =
          rule.spread_x16 == kSpreadUnknown ? origins_x16 : (3 * rule.spread_x16 + origins_x16) / 4;
    }
    ++stats_.share_epochs;
    if (share.probing()) {
      ++stats_.share_probes;
      if (rule.spread_x16 == kSpreadUnknown && !rule.crowded_start) {
        if (now - rule.probes_since_us >= share_view_.horizon_us) {
          rule.probes_since_us = now;
          rule.recent_probes = 0;
        }
        if (++rule.recent_probes >= FairShare::kDenseRequests) {
          rule.crowded_start = true;
          ++stats_.share_crowded_starts;
        }
      }
    }
    if (in.from_wake) ++stats_.share_wake_epochs;
  }
  switch (share.ask(input.cost, now)) {
    case FairShare::Answer::kCredit:
      p.share_spends = true;
      return true;
    case FairShare::Answer::kSparse:
      return true;
    case FairShare::Answer::kRefused:
      break;
  }
  // Refused a key it has no entry of, where keys are routed: ask the key's
  // owners for its news (Ledger::add_ask), which routing sends only to the
  // nodes with an entry.
  if (share_view_.routed && ledger_.add_ask(key, state, now)) ++stats_.share_asks;
  p.share_retry_us = std::max<std::int64_t>(1, share.epoch_end_us() - now);
  return false;
}

Limiter::Tally Limiter::decide(const CheckInput& input, TimeUs now) {
  const bool reserve = input.mode == CheckMode::kReserve;
  // Fair shares gate what a replicated rule's algorithm admits (a peek and
  // a cost of 0 spend nothing: no gate).
  const bool shared = options_.replicated && options_.fair_share && share_view_.live_nodes > 1 &&
                      input.cost > 0 && input.mode != CheckMode::kPeek;
  Tally tally;
  for (Pending& p : pending()) {
    const std::string_view key(key_scratch_.data() + p.key_offset, p.key_bytes);
    const AlgorithmOptions& options = *p.options;
    const bool gated = shared && !options.local;
    if (p.token_bucket) {
      p.cell = table_.find(key);
      if (p.cell != nullptr) {
        TokenBucket& bucket = p.bucket();
        if (now < bucket.last_refill_us()) ++stats_.clock_went_back;
        bucket.refill(p.params, now);
      } else {
        p.fresh = StateCell::of(TokenBucket::full(p.params, now));
      }
      if (p.hard_token_bucket && !reserve) {
        // The common case, without building a verdict.
        bool ok = p.bucket().allows(input.cost);
        if (ok && gated) {
          ok = share_admits(p, key, p.bucket().tokens(), input, now);
        } else if (gated) {
          note_refused_demand(p, key, now);  // the bucket refused: demand still
        }
        p.decision = {.allowed = ok, .charge = ok, .over_limit = false, .delay_us = 0};
      } else {
        algorithm_scratch_[p.scratch].verdict = p.token_bucket_verdict(input.cost);
      }
    } else {
      // A request's own maximum wait replaces the rule's.
      AlgorithmScratch& scratch = algorithm_scratch_[p.scratch];
      scratch.effective = input.max_wait_us >= 0 && p.limit->hands_out_waits
                              ? with_max_wait(p.limit->params, input.max_wait_us)
                              : p.limit->params;
      if (p.in_table) {
        p.cell = table_.find(key);
        if (p.cell == nullptr) p.fresh = fresh_cell(scratch.effective, now);
        scratch.verdict = evaluate_cell(p.current(), scratch.effective, input.cost, now);
      } else {
        p.state = states_.find(key);
        if (p.state == nullptr) scratch.fresh_state = fresh_state(scratch.effective, now);
        scratch.verdict = evaluate_state(p.state != nullptr ? *p.state : scratch.fresh_state,
                                         scratch.effective, input.cost, now);
      }
    }
    if (!p.hard_token_bucket || reserve) {
      alg::Verdict& v = algorithm_scratch_[p.scratch].verdict;
      // A share that refuses what the algorithm allows refuses as the
      // algorithm would, so throttle modes treat it alike (a reservation
      // does not wait it out: below).
      if (v.allowed && gated && !share_admits(p, key, v.remaining + input.cost, input, now)) {
        v.allowed = false;
        v.remaining = 0;
        v.retry_after_us = p.share_retry_us;
        v.excess = input.cost;
        v.delay_us = 0;
      } else if (!v.allowed && gated && remembers_when(p.algorithm())) {
        // The algorithm refused: still demand on the key, counted towards
        // this node's density (below) as a request its share saw would be.
        // Counting only what the algorithm let through, 300 ms bursts on 200
        // nodes looked sparse at the many nodes whose view was full, each of
        // their epochs kept a first request beyond the share, and a log or a
        // window does not repay that: +12% and +49% over a run (the others
        // repay it as a debt; docs/cluster.md, "Fair shares": "Demand is
        // what is asked").
        p.ledger_state = ledger_.state_with_share(key);
        if (p.ledger_state != nullptr) p.ledger_state->share->enter_span(now);
      } else if (!v.allowed && gated && carries_debt(p.algorithm())) {
        // The algorithm refused: demand still, which a forgiven debt's
        // burst lasts through (not counted towards density: the buckets
        // repay what a sparse-looking node's first request overspends).
        note_refused_demand(p, key, now);
      }
      const bool schedules = p.limit == nullptr || p.limit->schedules;
      // Taken now, proceeding when it would have fit: the wait is until the
      // cost fits (retry_after) or, for the rules that hand out waits, the
      // wait the rule would hand out now (delay_us; their retry_after is only
      // until that wait fits the bound). The bound is on the whole wait.
      const std::int64_t wait_us = std::max(v.delay_us, v.retry_after_us);
      // A refusal by this node's fair share is not a wait: how soon the share
      // covers the cost depends on the others' spending. Refused.
      if (reserve && schedules && !v.allowed && v.retry_after_us >= 0 && p.share_retry_us == 0 &&
          (input.max_wait_us < 0 || wait_us <= input.max_wait_us)) {
        v.allowed = true;
        v.delay_us = wait_us;
        v.retry_after_us = 0;
        v.excess = 0;
      }
      p.decision = alg::apply_throttle(v, options.throttle, input.load_permille);
    }
    if (p.decision.charge) {
      if (p.in_table && p.cell == nullptr) ++tally.fresh_buckets;
      if (!p.in_table && p.state == nullptr) ++tally.fresh_states;
    }
    tally.allowed = tally.allowed && p.decision.allowed;
  }
  return tally;
}

void Limiter::check(const CheckInput& input, TimeUs now, CheckOutput& out) {
  static_assert(std::is_trivially_destructible_v<Pending>);
  out.clear();
  ++stats_.checks;
  if (input.mode == CheckMode::kPeek) ++stats_.peeks;
  if (!gather</*kCounted=*/true>(input, out)) return;

  // Decide: every key must admit `cost`. Refill and evaluate are idempotent
  // at one `now`, so deciding twice (after making room) changes nothing.
  const bool peek = input.mode == CheckMode::kPeek;
  const bool reserve = input.mode == CheckMode::kReserve;
  Tally tally = decide(input, now);
  const auto needs_room = [&] {
    const std::size_t fresh = tally.fresh_buckets + tally.fresh_states;
    return tally.allowed && !peek && fresh > 0 && total_keys() + fresh > options_.max_keys;
  };
  const auto grow_if_needed = [&] {
    if (tally.allowed && !peek && tally.fresh_buckets > 0 && !needs_room() &&
        table_.will_grow(tally.fresh_buckets)) {
      // Inserting would move every bucket: grow first, then find them again.
      table_.reserve(tally.fresh_buckets);
      tally = decide(input, now);
    }
  };
  grow_if_needed();
  if (needs_room()) {
    // The sweep erases only keys that are idle at `now`, which a fresh key
    // replaces exactly; decide again since pointers may be stale.
    sweep(now, kMakeRoomVisits);
    tally = decide(input, now);
    grow_if_needed();
    if (needs_room()) {
      ++stats_.key_table_full;
      out.status = CheckStatus::kKeyTableFull;
      out.allowed = options_.key_table_full == KeyTableFullPolicy::kAllow;
      ++(out.allowed ? stats_.allowed : stats_.denied);
      return;  // nothing charged: all or nothing
    }
  }

  const bool allowed = tally.allowed;
  out.allowed = allowed;
  ++(allowed ? stats_.allowed : stats_.denied);
  out.rules.reserve(pending_count_);
  for (Pending& p : pending()) {
    const std::string_view key(key_scratch_.data() + p.key_offset, p.key_bytes);
    const bool charge = allowed && !peek && p.decision.charge;
    alg::Ticket ticket = alg::kNoTicket;
    if (charge) {
      if (p.in_table) {
        if (p.cell == nullptr) {
          p.cell = table_.insert(key, p.fresh);
          assert(p.cell != nullptr);  // room was made above
          ++stats_.keys_created;
        }
        if (p.token_bucket) {
          p.bucket().charge(input.cost);
        } else {
          ticket = commit_cell(*p.cell, algorithm_scratch_[p.scratch].effective, input.cost, now);
        }
      } else {
        if (p.state == nullptr) {
          p.state = states_.insert(key, std::move(algorithm_scratch_[p.scratch].fresh_state));
          assert(p.state != nullptr);
          ++stats_.keys_created;
        }
        ticket = commit_state(*p.state, algorithm_scratch_[p.scratch].effective, input.cost, now);
      }
      if (p.ledger_state != nullptr) {
        ledger_.add_local(key, *p.ledger_state, static_cast<std::uint64_t>(input.cost), now);
      } else if (options_.replicated && !p.options->local) {
        ledger_.add_local(key, static_cast<std::uint64_t>(input.cost), now);
      }
      if (p.share_spends) p.ledger_state->share->spend(input.cost);
    }
    if (p.ledger_state != nullptr && p.ledger_state->share->count(now)) {
      rule_shares_of(p).dense_until_us = now + FairShare::kDenseMemoryUs;
    }
    const bool share_refused = p.share_retry_us > 0;
    if (share_refused) {
      ++stats_.share_refused;
      p.ledger_state->share->note_refused();
    }
    // A refusal, where the algorithm keeps what it tells: the room this
    // node's share refused (a sliding window's credit), or, where the
    // algorithm refused, how far the room opened since an overshoot was
    // noted (a sliding window's overshoot: sliding_window.h). Not a peek's,
    // which is no demand. A key with no state here yet has nothing to note
    // it in.
    if (!charge && !p.token_bucket && (share_refused || (!p.decision.allowed && !peek))) {
      const Refusal by = share_refused ? Refusal::kByShare : Refusal::kByAlgorithm;
      if (p.in_table && p.cell != nullptr) {
        note_refusal_cell(*p.cell, algorithm_scratch_[p.scratch].effective, by, now);
      } else if (!p.in_table && p.state != nullptr) {
        note_refusal_state(*p.state, algorithm_scratch_[p.scratch].effective, by, now);
      }
    }
    RuleCounters& counted = rule_counters_[p.rule == kNoRule ? rule_counters_.size() - 1 : p.rule];
    ++(p.decision.allowed ? counted.allowed : counted.denied);
    RuleVerdict& v = out.rules.emplace_back();
    v.name = p.name;
    v.params = p.params;
    v.key = key;
    v.lease = ticket;
    v.allowed = p.decision.allowed;
    if (p.hard_token_bucket && !reserve) {
      const TokenBucket& bucket = p.bucket();
      v.capacity = p.params.burst;
      // After the request when it was admitted (as if, for a peek).
      v.remaining = std::max<std::int64_t>(bucket.tokens() - (peek && allowed ? input.cost : 0), 0);
      v.retry_after_us = p.decision.allowed ? 0 : p.retry_after_us(input.cost);
      if (p.share_retry_us > 0) {  // the bucket had room, this node's share did not
        v.remaining = 0;
        v.retry_after_us = p.share_retry_us;
      }
      v.reset_after_us = p.reset_after_us();
      continue;
    }
    v.algorithm = p.algorithm();
    v.over_limit = p.decision.allowed && p.decision.over_limit;
    const alg::Verdict& verdict = algorithm_scratch_[p.scratch].verdict;
    v.capacity = verdict.limit;
    v.remaining = verdict.remaining;
    v.retry_after_us = p.decision.allowed ? 0 : verdict.retry_after_us;
    v.reset_after_us = verdict.reset_after_us;
    if (p.token_bucket && charge) v.reset_after_us = p.reset_after_us();
    v.delay_us = allowed ? p.decision.delay_us : 0;
    if (v.over_limit) {
      ++stats_.over_limit_admitted;
      ++counted.over_limit;
    }
    out.delay_us = std::max(out.delay_us, v.delay_us);
  }
  if (out.delay_us > 0) ++stats_.delayed;
}

std::size_t Limiter::reset(const CheckInput& input, TimeUs now, CheckOutput& out) {
  out.clear();
  if (!gather</*kCounted=*/true>(input, out)) return 0;
  std::size_t existed = 0;
  out.allowed = true;
  for (const Pending& p : pending()) {
    const std::string_view key(key_scratch_.data() + p.key_offset, p.key_bytes);
    const bool erased = p.in_table ? table_.erase(key) : states_.erase(key);
    if (erased) ++existed;
    // In a cluster the reset goes to every node: the counters stay, with
    // floors at what they hold now (the fresh state owes nothing above them).
    if (options_.replicated && !p.options->local) {
      ledger_.reset_local(key, now);
      ++stats_.resets_sent;
    }
    RuleVerdict& v = out.rules.emplace_back();
    v.name = p.name;
    v.params = p.params;
    v.algorithm = p.algorithm();
    v.key = key;
    v.allowed = true;
  }
  stats_.keys_reset += existed;
  return existed;
}

LeaseStatus Limiter::release_lease(std::string_view key, alg::Ticket id, bool extend, TimeUs now) {
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  const auto* params = limit ? std::get_if<alg::Concurrency::Params>(&limit->params) : nullptr;
  if (params == nullptr) return LeaseStatus::kNotALease;
  RuleState* state = states_.find(key);
  auto* leases = state != nullptr ? std::get_if<alg::Concurrency::State>(state) : nullptr;
  const bool done =
      leases != nullptr && (extend ? alg::Concurrency::extend(*leases, *params, id, now)
                                   : alg::Concurrency::release(*leases, *params, id, now));
  if (!done) {
    ++stats_.leases_unknown;
    return LeaseStatus::kUnknown;
  }
  if (!extend) ++stats_.leases_released;
  return LeaseStatus::kDone;
}

std::optional<Limiter::CompiledLimit> Limiter::limit_for_key(std::string_view key) const {
  if (key.size() < kKeyHeaderBytes) return std::nullopt;
  const std::uint64_t fp = read_u64(key, 0);
  if (fp == kInlineFingerprint) {
    if (key.size() < kInlineKeyBytes) return std::nullopt;
    const BucketParams params{read_i64(key, kKeyHeaderBytes), read_i64(key, kKeyHeaderBytes + 8),
                              read_i64(key, kKeyHeaderBytes + 16)};
    if (validate(params) != nullptr) return std::nullopt;
    return CompiledLimit{params, params, nullptr};
  }
  const CompiledRules& compiled = *compiled_;
  auto it = compiled.by_fingerprint.find(fp);
  if (it == compiled.by_fingerprint.end()) return std::nullopt;  // changed, removed, or not ours
  const std::vector<CompiledLimit>& limits = compiled.limits[it->second];
  const auto override_index = static_cast<std::uint8_t>(key[8]);
  if (override_index >= limits.size()) return std::nullopt;
  return limits[override_index];
}

TimeUs Limiter::counter_retention_us(std::string_view key) const {
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  const TimeUs periods = limit ? 2 * limit->bucket.period_us : 0;
  return std::max(options_.counter_retention_min_us, periods);
}

void Limiter::enable_replication(std::string origin_id, std::uint64_t incarnation, TimeUs now) {
  options_.replicated = true;
  ledger_.set_self(std::move(origin_id), incarnation, now);
}

std::uint64_t Limiter::merge_remote(std::string_view key, std::string_view origin,
                                    std::uint64_t incarnation, std::uint64_t consumed, TimeUs now) {
  const std::uint32_t origin_index = ledger_.intern_origin(origin);
  if (origin_index == Ledger::kNoOrigin) return 0;
  return merge_remote(key, origin_index, incarnation, consumed, now);
}

std::uint64_t Limiter::merge_remote(std::string_view key, std::uint32_t origin_index,
                                    std::uint64_t incarnation, std::uint64_t consumed, TimeUs now) {
  return merge_remote(key, origin_index, incarnation, consumed, now, 0);
}

std::uint64_t Limiter::merge_remote(std::string_view key, std::uint32_t origin_index,
                                    std::uint64_t incarnation, std::uint64_t consumed, TimeUs now,
                                    TimeUs age_us) {
  const TimeUs consumed_at = now - std::max<TimeUs>(0, age_us);
  const Ledger::Merged merged =
      ledger_.merge(key, origin_index, incarnation, consumed, now, consumed_at);
  const std::uint64_t increase = merged.increase;
  if (increase == 0) return 0;
  ++stats_.remote_increases;
  // All of it below the entry's reset floor: consumption the reset forgave.
  if (merged.chargeable == 0) return increase;
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  if (!limit || (limit->options != nullptr && limit->options->local)) {
    // Kept and passed on (peers with the rule need it), but nothing to charge.
    ++stats_.remote_unknown_keys;
    ledger_.mark_uncharged(key);
    return increase;
  }
  const std::optional<RemoteTarget> target = remote_target(key, *limit, now);
  if (!target) return increase;
  // History (consumption from before this process started): at most one
  // burst per key. Asked only now that there is a state to charge it to.
  const std::uint64_t owed =
      ledger_.charge_for(key, merged, static_cast<std::uint64_t>(limit->bucket.burst));
  charge_target(key, *target, *limit, owed, consumed_at, now);
  return increase;
}

std::optional<Limiter::RemoteTarget> Limiter::remote_target(std::string_view key,
                                                            const CompiledLimit& limit,
                                                            TimeUs now) {
  const bool room = total_keys() < options_.max_keys;
  RemoteTarget target;
  if (limit.in_cell) {
    const bool token_bucket = limit.token_bucket();
    target.cell = table_.find(key);
    if (target.cell == nullptr) {
      const StateCell fresh = token_bucket ? StateCell::of(TokenBucket::full(limit.bucket, now))
                                           : fresh_cell(limit.params, now);
      target.cell = room ? table_.insert(key, fresh) : nullptr;
    } else {
      if (token_bucket) target.cell->as<TokenBucket>().refill(limit.bucket, now);
      return target;
    }
  } else {
    target.state = states_.find(key);
    if (target.state != nullptr) return target;
    target.state = room ? states_.insert(key, fresh_state(limit.params, now)) : nullptr;
  }
  if (target.cell == nullptr && target.state == nullptr) {
    ++stats_.remote_charges_dropped;
    ledger_.mark_uncharged(key);
    return std::nullopt;
  }
  ++stats_.keys_created;
  return target;
}

void Limiter::charge_target(std::string_view key, const RemoteTarget& target,
                            const CompiledLimit& limit, std::uint64_t owed, TimeUs consumed_at,
                            TimeUs now) {
  if (owed > static_cast<std::uint64_t>(kMaxTokens)) ledger_.mark_uncharged(key);
  const auto charge = static_cast<std::int64_t>(std::min<std::uint64_t>(owed, kMaxTokens));
  if (target.state != nullptr) {
    charge_remote_state(*target.state, limit.params, charge, consumed_at, now);
  } else if (limit.token_bucket()) {
    TokenBucket& bucket = target.cell->as<TokenBucket>();
    bucket.charge(charge);
    if (bucket.tokens() <= -kMaxTokens) ledger_.mark_uncharged(key);  // charge() saturated
  } else {
    charge_remote_cell(*target.cell, limit.params, charge, consumed_at, now);
  }
  stats_.remote_tokens_charged += static_cast<std::uint64_t>(charge);
}

Ledger::FloorMerge Limiter::merge_reset_floor(std::string_view key, std::uint32_t origin_index,
                                              std::uint64_t incarnation, std::uint64_t floor,
                                              std::uint64_t epoch, std::uint32_t floor_count,
                                              TimeUs now) {
  const Ledger::FloorMerge merged =
      ledger_.merge_floor(key, epoch, floor_count, origin_index, incarnation, floor, now);
  if (merged != Ledger::FloorMerge::kComplete) return merged;
  // The reset is complete here: the key's state starts afresh, charged with
  // what its entries hold above their floors (consumption the node that
  // reset it had not seen yet), which every node computes alike.
  ++stats_.resets_applied;
  if (!table_.erase(key)) states_.erase(key);
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  if (!limit || (limit->options != nullptr && limit->options->local)) return merged;
  const Ledger::KeyState* state = ledger_.find(key);
  // At most one burst, as history (docs/cluster.md, "Restarts and new
  // nodes"): a node that applies a reset long after it was made (it was
  // down, or partitioned) holds consumption from all that time above the
  // floors, most of which the key has refilled since.
  const std::uint64_t owed =
      state != nullptr
          ? std::min(Ledger::chargeable_sum(*state),
                     static_cast<std::uint64_t>(std::max<std::int64_t>(0, limit->bucket.burst)))
          : 0;
  if (owed == 0) return merged;
  const std::optional<RemoteTarget> target = remote_target(key, *limit, now);
  if (target) charge_target(key, *target, *limit, owed, now, now);
  return merged;
}

std::optional<std::int64_t> Limiter::offered_balance(std::string_view key,
                                                     const Ledger::KeyState& state, TimeUs now) {
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  return offered_balance(key, limit ? &*limit : nullptr, state, now);
}

Limiter::KeyNews Limiter::key_news(std::string_view key, const Ledger::KeyState& state,
                                   TimeUs now, bool with_balance) {
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  KeyNews news;
  if (with_balance) news.balance = offered_balance(key, limit ? &*limit : nullptr, state, now);
  if (limit && remembers_when(limit->algorithm) && state.consumed_at_us > 0) {
    // Rounded down: the receiver takes the news for newer than it is, so
    // the slot frees later than it did (conservative).
    const TimeUs age_ms = std::max<TimeUs>(0, now - state.consumed_at_us) / 1000;
    // Room for behind_ms's 2^16 beside it.
    news.age_ms = static_cast<std::uint32_t>(
        std::min<TimeUs>(age_ms, std::numeric_limits<std::uint32_t>::max() - (1u << 16)));
    news.timed = true;
  }
  if (share_view_.routed) {
    // A crowd on the key, as this node knows it (its owners know every
    // asker): origins, asks included, about as new as the newest.
    std::uint32_t recent = 0;
    for (const Ledger::Entry& e : state.entries) {
      if (state.consumed_at_us - Ledger::consumed_at_us(state, e) <= FairShare::kCrowdedWithinUs) {
        ++recent;
      }
    }
    news.crowd = recent >= FairShare::kToldCrowdOrigins;
  }
  return news;
}

void Limiter::note_crowd(std::string_view key, TimeUs now) {
  Ledger::KeyState* state = ledger_.state_with_share(key);
  if (state == nullptr) return;
  if (!state->share->dense(now)) ++stats_.share_crowds_told;
  state->share->make_crowded_for(now, FairShare::kToldCrowdUs);
}

std::optional<std::int64_t> Limiter::offered_balance(std::string_view key,
                                                     const CompiledLimit* limit,
                                                     const Ledger::KeyState& state, TimeUs now) {
  // A reset key's state answers for its entries above their floors, which a
  // peer with another reset (or none yet) would misread: no balances.
  if (state.uncharged || state.reset || state.pending) return std::nullopt;
  if (limit == nullptr || !limit->token_bucket() ||
      (limit->options != nullptr && limit->options->local)) {
    return std::nullopt;
  }
  // No bucket: it was evicted full (the sweep takes only full ones), and a
  // full bucket made again is the same bucket.
  std::int64_t tokens = limit->bucket.burst;
  if (StateCell* cell = table_.find(key)) {
    TokenBucket probe = cell->as<TokenBucket>();
    probe.refill(limit->bucket, now);
    tokens = probe.tokens();
  }
  // What we forgave we were never charged with: a peer must not inherit it.
  const auto forgiven =
      static_cast<std::int64_t>(std::min<std::uint64_t>(state.history_forgiven, kMaxTokens));
  return std::max(tokens - forgiven, -kMaxTokens);
}

std::int64_t Limiter::raise_balance(std::string_view key, std::int64_t balance,
                                    std::uint64_t offered_consumed, TimeUs now) {
  const Ledger::KeyState* state = ledger_.find(key);
  const std::optional<CompiledLimit> limit = limit_for_key(key);
  if (state == nullptr || !limit || !limit->token_bucket() ||
      (limit->options != nullptr && limit->options->local) || state->reset || state->pending) {
    return 0;
  }
  StateCell* cell = table_.find(key);
  if (cell == nullptr) return 0;  // a bucket made now is full: nothing to raise
  // Our entries cover the offer's (they were merged), so `ours` exceeds the
  // offer's sum by what we were charged with and the sender was not.
  const std::uint64_t ours = Ledger::consumed_sum(*state);
  if (ours == UINT64_MAX || offered_consumed == UINT64_MAX || ours < offered_consumed ||
      ours - offered_consumed > static_cast<std::uint64_t>(kMaxTokens) || balance < -kMaxTokens) {
    ++stats_.balance_offers_refused;
    return 0;
  }
  const std::int64_t beyond = static_cast<std::int64_t>(ours - offered_consumed);
  TokenBucket& bucket = cell->as<TokenBucket>();
  bucket.refill(limit->bucket, now);
  const std::int64_t raised = bucket.raise_to(limit->bucket, balance - beyond);
  if (raised > 0) {
    ++stats_.balances_raised;
    stats_.balance_tokens_raised += static_cast<std::uint64_t>(raised);
  }
  return raised;
}

std::size_t Limiter::sweep(TimeUs now, std::size_t max_visits) {
  // A key whose state is as good as fresh can go: a fresh one replaces it
  // exactly when it is next used.
  const auto cell_idle = [&](std::string_view key, const StateCell& cell) {
    const std::optional<CompiledLimit> limit = limit_for_key(key);
    if (!limit || !limit->in_cell) return true;  // its rule changed or left
    if (!limit->token_bucket()) return cell_is_idle(cell, limit->params, now);
    TokenBucket probe = cell.as<TokenBucket>();
    probe.refill(limit->bucket, now);
    return probe.is_full(limit->bucket);
  };
  const auto state_idle = [&](std::string_view key, const RuleState& state) {
    const std::optional<CompiledLimit> limit = limit_for_key(key);
    if (!limit || limit->in_cell) return true;
    return state_is_idle(state, limit->params, now);
  };
  std::size_t evicted = table_.sweep(max_visits, cell_idle);
  if (states_.size() > 0) evicted += states_.sweep(max_visits, state_idle);
  stats_.keys_evicted += evicted;
  if (options_.replicated) {
    // Counters go only when idle for their retention and their debt is
    // repaid: forgetting earlier would lose consumption still in force.
    stats_.counter_keys_forgotten +=
        ledger_.sweep(max_visits, [&](const std::string& key, const Ledger::KeyState& state) {
          // An ask (Ledger::add_ask) is no growth but keeps the key: its
          // time is the newest consumed_at_us.
          const TimeUs newest_us = std::max(state.changed_us, state.consumed_at_us);
          if (within_retention(key, now - newest_us)) return false;
          if (const StateCell* cell = table_.find(key)) return cell_idle(key, *cell);
          if (const RuleState* rule_state = states_.find(key)) return state_idle(key, *rule_state);
          return true;
        });
  }
  return evicted;
}

}  // namespace rlimit::core
