// The decision engine of one node: matches a check against the rules, finds or
// makes each matched rule's key (a token bucket, or the state of the rule's
// algorithm), and allows the check only if every matched rule admits it
// (after its throttle mode), charging all of them or none. Pure and deterministic: time is
// an argument, nothing is read from the outside. Every call on one Limiter
// (checks, merges, sweeps, balances) must pass `now` from one clock: a
// balance offered to a peer is refilled to the time it is read. Not thread-safe: one Limiter
// per event loop (shard by key if there are several).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/divider.h"
#include "core/fair_share.h"
#include "core/key_table.h"
#include "core/ledger.h"
#include "core/rule.h"
#include "core/rule_state.h"
#include "core/state_table.h"
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
  // Cluster: spend a fair share of a key's balance per news horizon when
  // others may spend on it too (core/fair_share.h, docs/cluster.md).
  bool fair_share = true;
};

struct Descriptor {
  std::string_view key;
  std::string_view value;
};

struct InlineLimit {
  std::string_view key;
  BucketParams params;
};

enum class CheckMode : std::uint8_t {
  kCheck,    // decide, and consume when allowed
  kPeek,     // decide as kCheck would, consume nothing
  kReserve,  // admit now if the wait until the cost fits is within max_wait_us,
             // consume now, and say how long to wait before proceeding;
             // sliding_log and concurrency rules cannot schedule and decide
             // as kCheck does (a concurrency slot is free now or refused)
};

struct CheckInput {
  std::span<const Descriptor> descriptors;
  std::int64_t cost = 1;
  const InlineLimit* inline_limit = nullptr;  // optional
  CheckMode mode = CheckMode::kCheck;
  // The longest wait the caller accepts, or -1 for no bound given. Replaces
  // the rule's max_delay for the rules that hand out waits (leaky shaper,
  // smooth_*) in every mode; in kReserve, also bounds the reservation.
  std::int64_t max_wait_us = -1;
  // The daemon's own load, in permille of one core, for elastic rules.
  std::int64_t load_permille = 0;
};

enum class CheckStatus { kOk, kExempt, kInvalid, kKeyTableFull };

// How one matched rule (or the inline limit) judged a check.
struct RuleVerdict {
  // User-provided, so that emplace_back() sets the members one by one rather
  // than zeroing the whole struct first (`rep stos`: measured at a quarter of
  // a hot-key check).
  RuleVerdict() {}

  std::string_view name;  // valid until the rules are replaced
  Algorithm algorithm = Algorithm::kTokenBucket;
  bool allowed = false;
  // The algorithm refused and the rule's throttle mode (shadow, soft,
  // elastic) admitted anyway.
  bool over_limit = false;
  BucketParams params;              // the configured limit, period and burst
  std::int64_t capacity = 0;        // what remaining counts against (burst, window limit...)
  std::int64_t remaining = 0;       // whole units left, >= 0
  std::int64_t retry_after_us = 0;  // 0 allowed, -1 never
  std::int64_t reset_after_us = 0;
  std::int64_t delay_us = 0;           // wait this long before proceeding (shaper, smooth, reserve)
  alg::Ticket lease = alg::kNoTicket;  // concurrency: the lease to release
  // The key's bytes, valid until the next call on the Limiter; with `lease`,
  // what release_lease() takes.
  std::string_view key;
};

struct CheckOutput {
  bool allowed = false;
  CheckStatus status = CheckStatus::kOk;
  std::string error;          // when kInvalid
  std::int64_t delay_us = 0;  // the longest of the rules' delays, when allowed
  std::vector<RuleVerdict> rules;
  void clear() {
    allowed = false;
    status = CheckStatus::kOk;
    error.clear();
    delay_us = 0;
    rules.clear();
  }
};

// What a check's answer would hold, without deciding it (Limiter::shape):
// enough to bound the answer's size before anything is charged.
struct CheckShape {
  std::size_t error_bytes = 0;      // the check is invalid: its error's length
  std::size_t verdicts = 0;         // rules matched (and the inline limit)
  std::size_t name_bytes = 0;       // the verdicts' names, summed
  std::size_t leases = 0;           // verdicts that may carry a lease (concurrency)
  std::size_t lease_key_bytes = 0;  // those verdicts' keys, summed
};

// A rule's key: this header (fingerprint, override) followed by 4 + value
// bytes per descriptor the rule keys on.
inline constexpr std::size_t kRuleKeyHeaderBytes = 9;

// Facts of the installed rules that bound any check's answer.
struct RuleSetBounds {
  std::size_t rules = 0;           // a check matches at most these (and its inline limit)
  std::size_t max_name_bytes = 0;  // the longest rule name
  bool concurrency = false;        // some rule hands out leases
};

enum class LeaseStatus {
  kDone,       // released (or extended)
  kUnknown,    // no such live lease: expired, released, or never issued
  kNotALease,  // the key is not a concurrency rule's (or its rule changed)
};

// Monotonic counters, for status and metrics.
struct LimiterStats {
  std::uint64_t checks = 0;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t exempt = 0;
  std::uint64_t unmatched = 0;  // no rule matched: allowed
  std::uint64_t invalid = 0;
  std::uint64_t key_table_full = 0;  // a bucket could not be made
  std::uint64_t keys_created = 0;
  std::uint64_t keys_evicted = 0;
  std::uint64_t clock_went_back = 0;      // `now` earlier than a bucket's time
  std::uint64_t peeks = 0;                // checks in kPeek mode (also in allowed/denied)
  std::uint64_t delayed = 0;              // allowed with a wait (shaper, smooth, reserve)
  std::uint64_t over_limit_admitted = 0;  // rule verdicts a throttle mode overrode
  std::uint64_t leases_released = 0;
  std::uint64_t leases_unknown = 0;  // release/extend of no live lease
  std::uint64_t keys_reset = 0;
  std::uint64_t resets_sent = 0;     // keys reset here, sent to the cluster
  std::uint64_t resets_applied = 0;  // resets from peers applied here
  // Cluster.
  std::uint64_t remote_increases = 0;        // counter entries that raised what we knew
  std::uint64_t remote_tokens_charged = 0;   // tokens charged into buckets for peers
  std::uint64_t remote_unknown_keys = 0;     // keys of rules this node does not have
  std::uint64_t remote_charges_dropped = 0;  // no bucket could be made (key table full)
  std::uint64_t counter_keys_forgotten = 0;  // ledger keys garbage-collected
  // Balances learned from peers (docs/cluster.md, "Balances after a partition").
  std::uint64_t balances_raised = 0;        // offers that raised a bucket
  std::uint64_t balance_tokens_raised = 0;  // whole tokens they added
  // Offers refused because our entries for the key did not cover what the
  // offer stood for (should not happen: the offer's entries are merged first).
  std::uint64_t balance_offers_refused = 0;
  // Fair shares (core/fair_share.h).
  std::uint64_t share_refused = 0;    // rule verdicts the algorithm allowed and the share did not
  std::uint64_t share_epochs = 0;     // shares fixed (once per key per horizon at most)
  std::uint64_t share_probes = 0;     // of those, probes of a key new here
  std::uint64_t share_untracked = 0;  // checks not gated: the ledger held max_keys
  std::uint64_t share_wake_epochs = 0;  // of the epochs, those sharing a burst's pool at its wake
  // Of the epochs, a sliding log's ended where its room starts to free
  // (FairShare::kLogEpochCutFrom): sharing no refill.
  std::uint64_t share_log_epochs_cut = 0;
  // Of the epochs, a sliding log's that shared the wake's pool as one of a
  // crowd of single requests (FairShare::single_in_crowd) where its own
  // demand was not dense: docs/cluster.md, "A crowd of single requests".
  std::uint64_t share_single_crowd_epochs = 0;
  // Of the epochs, those that found a key crowded (FairShare::kCrowdedOrigins)
  // and made demand on it dense; the ledger counts the crowded bursts.
  std::uint64_t share_crowded_epochs = 0;
  // Rules whose probes turned strict while their spread was unknown: this
  // node began FairShare::kDenseRequests probes of their keys in one horizon.
  std::uint64_t share_crowded_starts = 0;
  // Keys made crowded at such a start (FairShare::make_crowded, from
  // FairShare::kCrowdedNodes live nodes): dense for 60 s, gossiped rather
  // than routed to owners (where keys are routed, only a sliding log's or
  // window's: FairShare::start_epoch).
  std::uint64_t share_keys_crowded = 0;
  // Asks made: a share refused a key this node had no entry of, where keys
  // are routed (Ledger::add_ask; docs/cluster.md, "Asks").
  std::uint64_t share_asks = 0;
  // Keys a peer's news told of a crowd on (KeyNews::crowd, note_crowd),
  // not dense here before: made crowded for FairShare::kToldCrowdUs.
  std::uint64_t share_crowds_told = 0;
  // Epochs whose raise for the bursts this node asks nothing in was held at
  // its bound (FairShare::kMaxIdleRaiseX4).
  std::uint64_t share_idle_raise_capped = 0;
  // Epochs whose share was raised for this node's sparse asking on a busy
  // key (FairShare, "A sparse asker's turn covers its interval"), and
  // those whose raise was held at its bound (FairShare::kMaxSparseRaise).
  std::uint64_t share_sparse_raised = 0;
  std::uint64_t share_sparse_raise_capped = 0;
  // Epochs whose share counted a contended balance kContendedBalanceX times,
  // or kContendedAccruingBalanceX on a sliding window (FairShare, "A
  // contended balance, shared over": a sliding log under dense demand or a
  // sliding window, a balance below the epoch's refill, two on a window).
  std::uint64_t share_contended_balance = 0;
  // Epochs whose crowd's chance was counted from the askers' floor
  // (FairShare::kLeastAskedWakesX63: this node asked in hardly any of the
  // key's recent bursts).
  std::uint64_t share_askers_floored = 0;
  // Wakes at which a key's share carried a debt its last burst ran up and
  // the idle spell forgave (FairShare, "A forgiven debt"), the units
  // carried, and those held at the bound (FairShare::kMaxDebtX8; a fixed
  // window's credit FairShare::kMaxStepCreditX8).
  std::uint64_t share_debts_carried = 0;
  std::uint64_t share_debt_carried_units = 0;
  std::uint64_t share_debts_capped = 0;
  // Wakes at which a key's share credited the room its last burst left
  // while refusing and the idle spell lost at the cap (FairShare, "A lost
  // shortfall"), and the units credited; held at the bound: counted in
  // share_debts_capped.
  std::uint64_t share_credits_carried = 0;
  std::uint64_t share_credit_carried_units = 0;
  // Epochs whose first request beyond the share a draw did not keep: a
  // crowd's first requests, thinned (FairShare::start_epoch).
  std::uint64_t share_passes_thinned = 0;
};

// How one rule's verdicts went, for metrics (Limiter::rule_counters). A check
// that matches several rules counts in each; a rule may allow a check that
// another denies. Checks refused before any rule decided (invalid, key table
// full) and exempted rules are not counted here.
struct RuleCounters {
  std::uint64_t allowed = 0;     // verdicts that admitted (throttle-mode admissions included)
  std::uint64_t denied = 0;      // verdicts that refused
  std::uint64_t over_limit = 0;  // of allowed: over the limit, admitted by the throttle mode
  std::uint64_t checks() const { return allowed + denied; }
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
  // A limiter holding the rules `rules_of` holds without compiling them
  // again (compiled rules are immutable; the two share them) and none of its
  // state: no key, no counter, no stats. For harnesses that need many fresh
  // limiters with one rule set (a fuzz target makes one per input).
  // `rules_of` may be destroyed first; replacing the rules of either later
  // leaves the other's alone.
  Limiter(LimiterOptions options, const Limiter& rules_of);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  // Decides one check at time `now`. `out` is cleared and filled; reusing it
  // across calls avoids allocation.
  void check(const CheckInput& input, TimeUs now, CheckOutput& out);

  // Starts fetching the token buckets `input` will touch, without deciding
  // anything: a caller with several checks in hand (a batch, a pipeline)
  // prefetches a few checks ahead, so their cache misses overlap instead of
  // coming one after another. Changes nothing observable.
  void prefetch(const CheckInput& input);

  // What check() would answer for `input` holds at most (see CheckShape),
  // found without deciding: changes no key and counts nothing. Invalidates
  // the views of the last check's output, as check() does.
  void shape(const CheckInput& input, CheckShape& out);

  // Forgets the state of every key the check would touch (as if never used);
  // `out.rules` names them (remaining etc. unset). Replicated, each key's
  // reset goes to the whole cluster (Ledger::reset_local): every node resets
  // the key once it hears; a `local` rule's keys are reset here only.
  // Returns the number of keys that existed here.
  std::size_t reset(const CheckInput& input, TimeUs now, CheckOutput& out);

  // Releases (or, with `extend`, restarts the TTL of) the lease `id` of the
  // concurrency key `key` (RuleVerdict::key).
  LeaseStatus release_lease(std::string_view key, alg::Ticket id, bool extend, TimeUs now);

  // Installs new rules. A rule with the same name and the same definition keeps
  // its buckets and its RuleCounters; the buckets of changed and removed rules
  // are dropped by the sweep, their counters start again from zero.
  ReplaceSummary replace_rules(RuleSet rules);

  // Evicts up to `max_visits` entries' worth of full or orphaned buckets.
  // Returns how many were evicted. Call it periodically.
  std::size_t sweep(TimeUs now, std::size_t max_visits);

  // Cluster: start keeping counters as origin `origin_id`, process
  // incarnation `incarnation` (larger on every restart), at time `now`.
  void enable_replication(std::string origin_id, std::uint64_t incarnation, TimeUs now);
  // Cluster: the live nodes and news horizon fair shares use (the cluster
  // node sets it every gossip round; until then there is no gate).
  void set_share_view(const ShareView& view) {
    share_view_ = view;
    // A key quiet for a horizon has had its news reach every node.
    ledger_.set_wake_quiet_us(view.live_nodes > 1 ? view.horizon_us : 0);
  }
  // Merges a peer's absolute counter for `key`; charges the bucket with what
  // it adds to what we knew. Returns that increase (0 for old news).
  std::uint64_t merge_remote(std::string_view key, std::string_view origin,
                             std::uint64_t incarnation, std::uint64_t consumed, TimeUs now);
  // Balances (token buckets; docs/cluster.md, "Balances after a partition").
  // What this node offers peers for `key`, whose ledger state is `state`: its
  // bucket's whole tokens at `now` less the history it forgave for the key.
  // nullopt unless the key is a replicated token bucket here whose bucket was
  // charged with every increase of `state`'s entries.
  std::optional<std::int64_t> offered_balance(std::string_view key, const Ledger::KeyState& state,
                                              TimeUs now);
  // What rides with a key's entries in a payload besides its counters.
  struct KeyNews {
    std::optional<std::int64_t> balance;  // offered_balance
    // How long before `now` (ms, rounded down) the newest consumption of the
    // key this node knows of happened (Ledger::KeyState::consumed_at_us), for
    // a key whose limit is a sliding log or window: a receiver charges the
    // news at the time it happened, not when it arrived (docs/cluster.md,
    // "The age of news"). 0: now, or not sent (other algorithms do not use
    // it). Each entry's own age adds Ledger::behind_ms (entry_age_ms).
    std::uint32_t age_ms = 0;
    bool timed = false;  // the key's news carries ages (a sliding log or window)
    bool crowd = false;
  };
  // A peer told of a crowd on `key`: its demand dense here (note_crowd).
  void note_crowd(std::string_view key, TimeUs now);
  // The age news gives entry `e` of a key whose news is `news`: 0 (none)
  // unless the news is timed.
  static std::uint32_t entry_age_ms(const KeyNews& news, const Ledger::KeyState& state,
                                    const Ledger::Entry& e) {
    return news.timed ? news.age_ms + Ledger::behind_ms(state, e) : 0;
  }
  // The balance only `with_balance` (all of the key's entries go together).
  KeyNews key_news(std::string_view key, const Ledger::KeyState& state, TimeUs now,
                   bool with_balance);
  // A peer offered `balance` for `key` together with entries that sum to
  // `offered_consumed`, all of them merged here already. Raises the bucket
  // (never lowers it) to `balance` less what our entries for the key hold
  // beyond the offer's, capped at burst. Returns the whole tokens it rose by.
  std::int64_t raise_balance(std::string_view key, std::int64_t balance,
                             std::uint64_t offered_consumed, TimeUs now);
  // The same with the origin already interned (ledger().intern_origin, not
  // kNoOrigin): a payload's entries share a few origins, interned once each.
  std::uint64_t merge_remote(std::string_view key, std::uint32_t origin_index,
                             std::uint64_t incarnation, std::uint64_t consumed, TimeUs now);
  // The same for news whose sender says the key's newest consumption it
  // knew of happened `age_us` before now (KeyNews::age_ms).
  std::uint64_t merge_remote(std::string_view key, std::uint32_t origin_index,
                             std::uint64_t incarnation, std::uint64_t consumed, TimeUs now,
                             TimeUs age_us);
  // Merges a peer's floor of the reset `epoch` of `key` (Ledger::merge_floor,
  // origin interned); when that completes the reset, resets the key's state
  // and charges it with what its entries hold above their floors, at most a
  // burst. Returns what the ledger did with the floor.
  Ledger::FloorMerge merge_reset_floor(std::string_view key, std::uint32_t origin_index,
                                       std::uint64_t incarnation, std::uint64_t floor,
                                       std::uint64_t epoch, std::uint32_t floor_count, TimeUs now);
  Ledger& ledger() { return ledger_; }
  const Ledger& ledger() const { return ledger_; }
  // How long the counters of `key` are kept after their last change.
  TimeUs counter_retention_us(std::string_view key) const;
  // True if counters of `key` last changed `age_us` ago are within
  // 1/`divisor` of their retention. Tests the floor (counter_retention_min_us)
  // first: most keys are younger than it, and the exact retention reads the
  // key's bytes, a cache miss per key a sweep or anti-entropy slice visits.
  bool within_retention(std::string_view key, TimeUs age_us, TimeUs divisor = 1) const {
    return age_us < options_.counter_retention_min_us / divisor ||
           age_us < counter_retention_us(key) / divisor;
  }

  const RuleSet& rules() const;
  const RuleSetBounds& rule_bounds() const;
  const LimiterStats& stats() const { return stats_; }
  // Per rule, parallel to rules().rules, then one more for the inline limits.
  const std::vector<RuleCounters>& rule_counters() const { return rule_counters_; }
  std::size_t key_count() const { return total_keys(); }
  const LimiterOptions& options() const { return options_; }
  void set_max_keys(std::size_t max_keys);

 private:
  struct CompiledRules;

  std::shared_ptr<const CompiledRules> compiled_;
  LimiterOptions options_;
  // What a key of one rule (or one of its overrides) runs.
  // What a key of one rule (or one of its overrides) runs, with the facts
  // the check path needs derived once, when the rules are installed.
  struct CompiledLimit {
    CompiledLimit(const BucketParams& bucket, const AlgorithmParams& params,
                  const AlgorithmOptions* options);
    BucketParams bucket;
    AlgorithmParams params;  // BucketParams for the token bucket
    const AlgorithmOptions* options = nullptr;
    Algorithm algorithm;
    bool in_cell;          // the state is a StateCell in the KeyTable
    bool hands_out_waits;  // a request's max wait replaces the rule's
    // A reserve may defer the request (not so for the sliding log, which
    // logs a request when admitted, nor concurrency, whose slot is held).
    bool schedules;
    Divider limit_divider;  // Divider(bucket.limit), or by 1 when the limit is 0
    bool per_descriptor = false;  // a key per descriptor value (`each`): per user, per tenant
    bool token_bucket() const { return algorithm == Algorithm::kTokenBucket; }
  };
  // The limit of the key `key` names, if its rule (or the inline limit
  // encoded in it) is known here. Inline limits are token buckets.
  std::optional<CompiledLimit> limit_for_key(std::string_view key) const;
  // Where a remote charge of a key goes: its cell or its state, found or
  // made fresh (a found token bucket refilled to `now`). nullopt when none
  // can be made (the key table is full): counted, the key marked uncharged.
  struct RemoteTarget {
    StateCell* cell = nullptr;
    RuleState* state = nullptr;
  };
  std::optional<RemoteTarget> remote_target(std::string_view key, const CompiledLimit& limit,
                                            TimeUs now);
  // Charges `owed` (capped at kMaxTokens; a cap or a saturated bucket marks
  // the key uncharged) into `target`, as consumed at `consumed_at`: when the
  // news says it happened, or when it arrived if the news has no age. Only
  // a sliding log's or window's news has one (key_news): their states
  // remember when; the others' balances do not. `now`: when it is charged
  // (a log carries what overshoots its window then).
  void charge_target(std::string_view key, const RemoteTarget& target, const CompiledLimit& limit,
                     std::uint64_t owed, TimeUs consumed_at, TimeUs now);
  std::optional<std::int64_t> offered_balance(std::string_view key, const CompiledLimit* limit,
                                              const Ledger::KeyState& state, TimeUs now);
  // Validates the check, applies exemptions and fills pending_ with the
  // keys the check touches. False when `out` is already the answer.
  // kCounted: count what it decides (exempt, unmatched, invalid) in stats_;
  // shape() counts nothing.
  template <bool kCounted>
  bool gather(const CheckInput& input, CheckOutput& out);
  // What deciding every pending_ key at `now` found: refills, evaluates and
  // fills each one's decision (and verdict), charging nothing.
  struct Tally {
    bool allowed = true;
    std::size_t fresh_buckets = 0;  // KeyTable cells to insert
    std::size_t fresh_states = 0;   // StateTable states to insert
  };
  Tally decide(const CheckInput& input, TimeUs now);
  struct Pending;
  // Fair shares: true if `p`'s share admits the check's cost, with
  // `headroom` what the algorithm would admit now. Starts the key's epoch
  // when due. On a refusal, p.share_retry_us says when the next one starts.
  bool share_admits(Pending& p, std::string_view key, std::int64_t headroom,
                    const CheckInput& input, TimeUs now);
  // The algorithm refused a check of `key` before its fair share saw it:
  // demand on the key still, whose end a forgiven debt needs
  // (FairShare::note_asked; a node whose bucket refused a burst's last
  // 100 ms took it for ended then and carried 100 ms of refill too much).
  // A hot key's refusals note it once per slot of 2^10 us (refusal_noted_:
  // the key's KeyTable cell and the slot it was last noted in): a ledger
  // lookup a millisecond at most, the burst's end a millisecond early at
  // most (a lookup per refusal cost GCRA's refused check 62 -> 82 ns,
  // BM_ReplicatedHotKeyRefused).
  void note_refused_demand(const Pending& p, std::string_view key, TimeUs now);
  static constexpr int kRefusedDemandSlotBits = 10;
  struct RefusalNoted {
    const StateCell* cell = nullptr;
    TimeUs slot = -1;
  };
  // Direct-mapped by the cell's address: a key whose way another took is
  // looked up again, which costs time, not accuracy.
  std::array<RefusalNoted, 64> refusal_noted_{};
  ShareView share_view_;
  // What fair shares learn of each rule's keys (one more for inline
  // limits), for probing its new keys (ShareInputs::spenders, sparse_rule).
  static constexpr std::uint32_t kNoRule = UINT32_MAX;
  static constexpr std::uint32_t kSpreadUnknown = UINT32_MAX;  // every live node may spend
  struct RuleShares {
    std::uint32_t spread_x16 = kSpreadUnknown;  // nodes spending on one key, x16, running average
    TimeUs dense_until_us = 0;                  // a key of it saw dense demand lately
    // While the spread is unknown: the probes this node began since
    // `probes_since_us` (one horizon at most), and whether kDenseRequests of
    // them fell in one horizon (many keys new at once: their probes are
    // strict until the spread is learned).
    TimeUs probes_since_us = 0;
    std::uint32_t recent_probes = 0;
    bool crowded_start = false;
  };
  std::vector<RuleShares> rule_shares_;
  RuleShares& rule_shares_of(const Pending& p);
  std::size_t total_keys() const { return table_.size() + states_.size(); }

  KeyTable table_;     // token buckets and every other state that fits a StateCell
  StateTable states_;  // the sliding log's and concurrency's states
  Ledger ledger_;
  LimiterStats stats_;
  std::vector<RuleCounters> rule_counters_;  // rule_counters()
  // Scratch space reused across checks, so a check does not allocate.
  struct AlgorithmScratch;
  // Only grows, like key_scratch_: the first pending_count_ are this check's
  // keys (a push_back per key was a call the compiler would not inline).
  std::vector<Pending> pending_;
  std::size_t pending_count_ = 0;
  Pending& add_pending();
  std::span<Pending> pending();
  std::vector<AlgorithmScratch> algorithm_scratch_;
  std::string key_scratch_;
  CheckOutput shape_scratch_;
  std::string prefetch_scratch_;
  std::vector<std::string_view> match_values_;
  std::vector<bool> skipped_;
};

}  // namespace rlimit::core
