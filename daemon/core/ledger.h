// The replicated state of a cluster: for each bucket key, the cumulative cost
// each origin consumed from it (a grow-only counter entry per origin and
// incarnation). Values only grow and merge by max, so loss, duplication,
// reordering and resending neither lose nor double-count consumption.
//
// A node's own entry for a key is tagged with an incarnation made of its
// process incarnation plus the monotonic time since start at the moment the
// entry was created: after the entry is garbage-collected, a later entry for
// the same key starts at zero under a larger incarnation, so a peer still
// holding the old value never mistakes the new one for old news.
//
// History (see docs/cluster.md, "Restarts and new nodes"): an entry that
// began before this process started (its incarnation, the wall-clock time of
// its creation, is below ours) holds consumption our peers were charged with
// while we did not exist and have partly refilled since. Its value at first
// sight is history; a key's bucket is charged with at most one burst of
// history in total, the rest is forgiven (counted). Every later increase is
// charged in full.
//
// Garbage collection (see docs/cluster.md): a key's entries are forgotten
// once none changed for its retention time and its bucket is full (all debt
// repaid). Anti-entropy offers only entries that changed within half the
// retention, so by the time any node forgets a key, no peer offers it again.
//
// Gossip sends a key's changed entries only (each entry counts its own rounds
// left); anti-entropy sends every entry.
//
// Resets (docs/cluster.md, "Reset"): a key reset anywhere in the cluster is
// reset everywhere. The node that resets it makes a reset record: an epoch
// above any known for the key, and floors, its entries as it read them. A
// floor says "consumption of this entry up to here is forgiven": after a reset
// a key's state is charged only with what its entries hold above their
// floors, so every node converges to the same state whatever it learned
// first. Records travel with the key's entries (floors are gossiped like
// entries), the newest epoch wins, and a record is applied only once all its
// floors are here (until then the older one stays in force).
//
// Not thread-safe; owned by one Limiter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/fair_share.h"
#include "core/time.h"

namespace rlimit::core {

class Ledger {
 public:
  struct Entry {
    // Most gossip rounds an entry is sent in (set_retransmit_rounds clamps).
    static constexpr std::uint16_t kMaxSendsLeft = (1u << 15) - 1;

    std::uint32_t origin = 0;           // index into origins()
    std::uint16_t sends_left : 15 = 0;  // gossip rounds this entry is still sent in
    // Made by a merge: an origin this node had not seen on the key. An owner
    // of a routed key sends such an origin every entry of the key once
    // (docs/cluster.md, "Owner routing"); cleared by routed_sent_changed.
    std::uint16_t newcomer : 1 = 0;
    // When this origin's newest consumption here happened, in milliseconds
    // of our clock modulo 2^16 (behind_ms reads it against the key's
    // consumed_at_us), so that news gives each origin's entry its own age
    // (docs/cluster.md, "The age of news"). In the padding: an entry stays
    // 24 bytes.
    std::uint16_t consumed_ms = 0;
    std::uint64_t incarnation = 0;
    std::uint64_t consumed = 0;
  };
  static_assert(sizeof(Entry) == 24);
  // A reset of a key: its epoch and floors (Entry::consumed is the floor).
  struct Reset {
    std::uint64_t epoch = 0;
    std::uint32_t floor_count = 0;  // floors the reset has in all (a receiver waits for them)
    std::vector<Entry> floors;      // sends_left as for entries
  };
  struct KeyState {
    std::vector<Entry> entries;
    std::unique_ptr<Reset> reset;       // the newest reset applied, or none
    std::unique_ptr<Reset> pending;     // a newer reset whose floors are not all here yet
    std::unique_ptr<FairShare> share;   // this node's share, once it checked the key
    TimeUs changed_us = 0;              // last time any entry grew (our clock)
    // When the newest consumption of the key this node knows of happened, on
    // our clock: our own charge's time, or a peer's news less the age it
    // came with (peer.proto, CounterEntry.age_ms). 0: none yet.
    TimeUs consumed_at_us = 0;
    std::int32_t own = -1;              // index of our own entry, -1 none
    std::uint16_t sends_left = 0;       // at least the most any of its entries has left
    bool queued = false;                // in the changed list
    // Some increase of these entries was not charged to the key's bucket (no
    // bucket could be made, no rule here, or the key was reset): the bucket's
    // balance does not answer for these entries and is never offered to peers.
    bool uncharged = false;
    std::uint64_t history_charged = 0;  // history charged so far (charge_for)
    std::uint64_t history_forgiven = 0;  // history not charged (over the burst), for this key
  };
  // How long (ms, rounded down) before the key's newest consumption
  // (KeyState::consumed_at_us) entry `e`'s newest happened; a gap above
  // 65 s reads as less (modulo 2^16 ms): the entry then passes for newer
  // than it is, which frees a log's slot later (conservative).
  static std::uint32_t behind_ms(const KeyState& state, const Entry& e);
  // When entry `e`'s newest consumption happened, on our clock (from
  // behind_ms: up to a millisecond later than it did).
  static TimeUs consumed_at_us(const KeyState& state, const Entry& e) {
    return state.consumed_at_us - TimeUs{1000} * behind_ms(state, e);
  }
  // What this incarnation's own entry of the key holds: 0 without one, or
  // for an ask (add_ask).
  static std::uint64_t own_consumed(const KeyState& state) {
    return state.own >= 0 ? state.entries[static_cast<std::size_t>(state.own)].consumed : 0;
  }
  // How many other origins (not this node's entries) consumed from the key
  // at about the same time: their newest consumption within `within_us` of
  // the key's newest; or, if more, of the newest before `before_us` (> 0:
  // a wake, so that a node starting late in a burst, which already heard
  // of it, counts the last burst's origins too). Counted for two spans at
  // once (`in_burst`: within `burst_us`). Reads every entry (twice with
  // `before_us`): for an epoch's start, not for every request.
  struct RecentOthers {
    std::uint32_t within = 0;    // within `within_us`
    std::uint32_t in_burst = 0;  // within `burst_us`
  };
  static RecentOthers recent_others(const KeyState& state, TimeUs within_us, TimeUs burst_us,
                                    TimeUs before_us);
  // When a burst on the key began, as its entries tell it, if it began
  // within `quiet_us` of `now` after a quiet spell: the oldest of the
  // consumptions in (now - quiet_us, now], where the newest before them lies
  // at least `quiet_us` before it; 0 otherwise. What a node that has no
  // share of the key yet, and so noted no wake, can know of one (each
  // origin's entry holds its newest consumption only: an origin that spent
  // in both bursts counts in the newest). Reads every entry once: for an
  // epoch's start, not for every request.
  static TimeUs burst_woke_us(const KeyState& state, TimeUs now, TimeUs quiet_us);
  // What one merge did.
  struct Merged {
    std::uint64_t increase = 0;  // by how much it raised what we knew; 0: old news, duplicate
    // Of `increase`, the part above the entry's floor (all of it, without a
    // reset): what the key's state is to be charged with.
    std::uint64_t chargeable = 0;
    // Of `chargeable`, the part that is history: the whole value of an entry
    // seen for the first time whose incarnation is below our process's.
    std::uint64_t history = 0;
  };
  enum class FloorMerge {
    kOld,        // an older reset than the one applied or pending, or nothing new
    kPending,    // kept: the reset waits for more of its floors
    kComplete,   // the reset now holds all its floors and is applied: reset
                 // the key's state and charge it with chargeable_sum() (the
                 // Limiter charges at most a burst of it)
    kMalformed,  // epoch 0, or more floors than a reset can have: dropped
  };

  // Our identity: `origin_id` (the node id) and the process incarnation,
  // taken at monotonic time `start_us`.
  void set_self(std::string origin_id, std::uint64_t incarnation, TimeUs start_us);
  const std::string& self_id() const { return origins_.front(); }

  // Interns an origin name. Returns nullopt-like UINT32_MAX when max_origins
  // are known already (counted).
  std::uint32_t intern_origin(std::string_view id);
  const std::string& origin_name(std::uint32_t index) const { return origins_[index]; }

  // Rounds a change is gossiped for; set by the cluster node as membership grows.
  void set_retransmit_rounds(std::uint16_t rounds) {
    retransmit_rounds_ = std::min(rounds, Entry::kMaxSendsLeft);
  }
  // How long a key must go without growing for its next growth to wake it
  // (FairShare::note_wake); the Limiter sets one news horizon. 0: never.
  void set_wake_quiet_us(TimeUs quiet_us) { wake_quiet_us_ = quiet_us; }
  // The key's entries have not grown for wake_quiet_us_ (> 0) by `now`: its
  // next growth is a wake (FairShare::note_wake), and an epoch now starts a
  // new burst on it (FairShare::ShareInputs::new_burst).
  bool quiet(const KeyState& state, TimeUs now) const {
    return wake_quiet_us_ > 0 && now - state.changed_us >= wake_quiet_us_;
  }
  // A request on the key is about to be decided at `now` and its share's
  // epoch starts: a quiet key wakes now, so that epoch already shares as
  // one after the wake (the charge that follows, at the same `now`, finds
  // the wake noted and does not sum the entries again).
  void wake_if_quiet(KeyState& state, TimeUs now) { before_growth(state, now); }

  // Records `cost` consumed here from `key`.
  void add_local(std::string_view key, std::uint64_t cost, TimeUs now);
  // The same with the key's state in hand (share_state's: no second lookup).
  void add_local(std::string_view key, KeyState& state, std::uint64_t cost, TimeUs now);
  // This node asks for `key` at `now` without having spent on it (its
  // share refused it, where keys are routed: docs/cluster.md, "Asks"): an
  // own entry of 0, queued as a change, so that the key's owners learn
  // of this origin and send it the key's news. Its time counts as the
  // entry's newest (KeyState::consumed_at_us); it is no growth (no wake,
  // changed_us kept). False, and nothing done, if an own entry exists.
  bool add_ask(std::string_view key, KeyState& state, TimeUs now);

  // Merges an absolute value; returns by how much it raised what we knew (0
  // for old news or a duplicate) and how much of that is history. Our own
  // current entries are never raised by peers (they only echo what we sent).
  // `consumed_at` (<= now): when the news says the origin's newest
  // consumption happened (Entry::consumed_ms, KeyState::consumed_at_us).
  Merged merge(std::string_view key, std::uint32_t origin, std::uint64_t incarnation,
               std::uint64_t consumed, TimeUs now, TimeUs consumed_at);
  // News without an age: consumed when learned.
  Merged merge(std::string_view key, std::uint32_t origin, std::uint64_t incarnation,
               std::uint64_t consumed, TimeUs now) {
    return merge(key, origin, incarnation, consumed, now, now);
  }

  // Merges floor `consumed` of (`origin`, `incarnation`) of the reset `epoch`
  // of `key`, which has `floor_count` floors in all. A newer epoch replaces
  // the pending reset.
  FloorMerge merge_floor(std::string_view key, std::uint64_t epoch, std::uint32_t floor_count,
                         std::uint32_t origin, std::uint64_t incarnation, std::uint64_t consumed,
                         TimeUs now);
  // Resets `key` here: a record with an epoch above any known for the key,
  // whose floors are the key's entries as they are now, applied at once
  // (nothing is chargeable: the caller resets the key's state to fresh) and
  // queued for gossip. Returns the epoch.
  std::uint64_t reset_local(std::string_view key, TimeUs now);
  // The state of `key` with its fair share, the share made if missing, and
  // the state too if `may_create` (a key made here counts as changed now, so
  // the sweep keeps its share for the key's retention); nullptr when the key
  // has no state and may not get one.
  KeyState* share_state(std::string_view key, TimeUs now, bool may_create);
  // The state of `key` if it has a fair share already (this node checked
  // the key before), else nullptr; makes nothing.
  KeyState* state_with_share(std::string_view key);
  // A hash of `key` and this node, for a share's dither.
  std::uint64_t dither_seed(std::string_view key) const;

  // What a key's state is to be charged with after its reset: the sum of
  // what its entries hold above their floors, saturating at UINT64_MAX.
  static std::uint64_t chargeable_sum(const KeyState& state);

  // What `key`'s bucket is to be charged for `merged` (the result of a merge
  // of `key`): the chargeable increase, with history counted only while the
  // key's history charged so far stays within `history_cap` (the key's burst).
  std::uint64_t charge_for(std::string_view key, const Merged& merged, std::uint64_t history_cap);

  const KeyState* find(std::string_view key) const;

  // Records that an increase of `key`'s entries was not charged to its bucket
  // (see KeyState::uncharged). No-op for a key not in the ledger.
  void mark_uncharged(std::string_view key);

  // The sum of the key's entries, saturating at UINT64_MAX.
  static std::uint64_t consumed_sum(const KeyState& state);

  // Keys that changed, oldest first; the cluster node packs from the back
  // and calls sent() for what it sent.
  const std::vector<std::string>& changed() const { return changed_; }
  // The state of changed()[i], without a lookup.
  const KeyState& changed_state(std::size_t i) const { return *changed_states_[i]; }
  // One gossip round sent `key`'s changed entries (those with rounds left):
  // decrements their rounds left.
  void sent(std::string_view key);
  // The same for changed()[i], without a lookup.
  void sent_changed(std::size_t i) { sent_entries(*changed_states_[i]); }
  // A round sent changed()[i] by owner routing, once to named nodes: none of
  // its entries is sent again (no rounds left) and none is a newcomer.
  void routed_sent_changed(std::size_t i);
  // Drops keys with no rounds left from changed(). Call once per round.
  void compact_changed();

  // Visits up to `max_visits` keys from a rotating cursor and calls
  // visit(key, state) for each: for anti-entropy slices.
  void visit_slice(std::size_t max_visits,
                   const std::function<void(const std::string&, const KeyState&)>& visit);

  // Calls visit(key, state) for every key, moving no cursor (for reports).
  void for_each_key(const std::function<void(const std::string&, const KeyState&)>& visit) const;

  // Forgets keys for which `forget(key, state)` is true, visiting at most
  // `max_visits`. Returns the number forgotten.
  std::size_t sweep(std::size_t max_visits,
                    const std::function<bool(const std::string&, const KeyState&)>& forget);

  std::size_t size() const { return keys_.size(); }
  std::size_t origin_count() const { return origins_.size(); }
  std::uint64_t origins_over_bound() const { return origins_over_bound_; }
  // Peers' entries not merged because of max_keys / max_entries_per_key.
  std::uint64_t keys_over_bound() const { return keys_over_bound_; }
  std::uint64_t entries_over_bound() const { return entries_over_bound_; }
  // Wakes at which a key's share found the burst before crowded and made
  // demand on the key dense (FairShare::note_wake, "Crowded bursts").
  std::uint64_t crowded_bursts() const { return crowded_bursts_; }
  // Wakes whose news since the last wake held at most
  // FairShare::kMostStragglerUnits: the last was a straggler's, and a debt
  // waiting for its epoch was kept through it (FairShare::Wake::straggler).
  std::uint64_t straggler_wakes() const { return straggler_wakes_; }
  // Wakes at which a key's share found the burst before no crowd's (it
  // spent at most 1/FairShare::kDisprovedCrowdPools of its pool) and
  // dropped the key's crowd marks (FairShare::Wake::crowd_disproved).
  std::uint64_t crowds_disproved() const { return crowds_disproved_; }

  // What peers may make this ledger hold ([cluster] max_origins,
  // max_ledger_keys, max_entries_per_key). Only what peers send is refused
  // at a bound (merge, merge_floor, intern_origin), never what this node
  // consumes itself: the request path is not bounded here.
  struct Bounds {
    std::size_t max_origins = 1 << 16;
    std::size_t max_keys = 4'000'000;
    std::size_t max_entries_per_key = 16'384;
  };
  void set_bounds(const Bounds& bounds) { bounds_ = bounds; }
  const Bounds& bounds() const { return bounds_; }
  // Tokens of history not charged because a key's history_cap was reached.
  std::uint64_t history_forgiven() const { return history_forgiven_; }
  // Asks this node made (add_ask), and asks of peers merged: entries of 0
  // new here.
  std::uint64_t asks() const { return asks_; }
  std::uint64_t asks_merged() const { return asks_merged_; }

  static constexpr std::uint32_t kNoOrigin = UINT32_MAX;
  static constexpr std::size_t kMaxOrigins = 1 << 16;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Keys = std::unordered_map<std::string, KeyState, Hash, std::equal_to<>>;
  // The state of `key`, made empty if missing.
  Keys::iterator find_or_add(std::string_view key);
  // Marks `entry` of `key` (whose state is `state`) as changed now: it is
  // gossiped for the next retransmit_rounds_ rounds.
  KeyState& touch(std::string_view key, KeyState& state, Entry& entry, TimeUs now);
  // touch() without the growth: queues `entry` to be sent.
  void queue(std::string_view key, KeyState& state, Entry& entry);
  // Gives the key an own entry of 0 (it has none).
  void add_own(KeyState& state, TimeUs now);
  // Before the key's entries grow at `now`: tells its share, if it has one,
  // of a wake (a growth after wake_quiet_us_ without one).
  void before_growth(KeyState& state, TimeUs now);
  static void sent_entries(KeyState& state);
  // The floor of (origin, incarnation) in the key's applied reset; 0 for none.
  static std::uint64_t floor_of(const KeyState& state, std::uint32_t origin,
                                std::uint64_t incarnation);

  Keys keys_;
  std::vector<std::string> origins_{""};  // [0] is self
  // origins_ by name: open addressing with linear probing, a power of two
  // of slots, at most half full; each slot holds the name's hash (its low 32
  // bits) and index + 1 (0: empty). Two cache misses per lookup (slot, name)
  // where a node-based map took three or four: every payload from a peer
  // interns its origins, and at 1,000 nodes the table is cold each time.
  struct OriginSlot {
    std::uint32_t hash = 0;
    std::uint32_t index_plus_one = 0;
  };
  std::vector<OriginSlot> origin_slots_;
  bool self_set_ = false;
  void index_origin(std::uint32_t index);  // adds origins_[index] to origin_slots_
  void rebuild_origin_slots(std::size_t slot_count);
  std::uint64_t incarnation_ = 0;
  TimeUs start_us_ = 0;
  std::vector<std::string> changed_;
  // The state of each key of changed_, same order. Element pointers of an
  // unordered_map survive rehashing, and queued keys are never swept.
  std::vector<KeyState*> changed_states_;
  std::uint16_t retransmit_rounds_ = 3;
  TimeUs wake_quiet_us_ = 0;
  std::size_t slice_cursor_ = 0;
  std::size_t sweep_cursor_ = 0;
  std::uint64_t origins_over_bound_ = 0;
  std::uint64_t keys_over_bound_ = 0;
  std::uint64_t entries_over_bound_ = 0;
  std::uint64_t crowded_bursts_ = 0;
  std::uint64_t straggler_wakes_ = 0;
  std::uint64_t crowds_disproved_ = 0;
  Bounds bounds_;
  std::uint64_t history_forgiven_ = 0;
  std::uint64_t asks_ = 0;
  std::uint64_t asks_merged_ = 0;
};

}  // namespace rlimit::core
