#include "core/ledger.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>

#include "core/stable_hash.h"

namespace rlimit::core {
namespace {

// Walks hash buckets of `map` from `cursor`, calling f(key, value) until it
// returns false or `max_visits` entries were seen. Advances the cursor.
template <typename Map, typename F>
void walk(Map& map, std::size_t& cursor, std::size_t max_visits, F&& f) {
  if (map.empty()) return;
  const std::size_t bucket_count = map.bucket_count();
  const std::size_t max_walk = std::min(bucket_count, 2 * max_visits + 1);
  std::size_t visited = 0;
  for (std::size_t walked = 0; walked < max_walk && visited < max_visits; ++walked) {
    const std::size_t b = cursor % bucket_count;
    cursor = b + 1;
    for (auto it = map.begin(b); it != map.end(b); ++it) {
      ++visited;
      f(it->first, it->second);
    }
  }
}

}  // namespace

void Ledger::set_self(std::string origin_id, std::uint64_t incarnation, TimeUs start_us) {
  origins_.front() = std::move(origin_id);
  self_set_ = true;
  rebuild_origin_slots(std::max<std::size_t>(16, origin_slots_.size()));
  incarnation_ = incarnation;
  start_us_ = start_us;
}

void Ledger::rebuild_origin_slots(std::size_t slot_count) {
  assert(std::has_single_bit(slot_count) && slot_count >= 2 * origins_.size());
  origin_slots_.assign(slot_count, OriginSlot{});
  // Until set_self names us, origins_[0] is a placeholder no peer's name maps to.
  for (std::size_t i = self_set_ ? 0 : 1; i < origins_.size(); ++i) {
    index_origin(static_cast<std::uint32_t>(i));
  }
}

void Ledger::index_origin(std::uint32_t index) {
  const std::size_t hash = Hash{}(origins_[index]);
  const std::size_t mask = origin_slots_.size() - 1;
  for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
    OriginSlot& slot = origin_slots_[at];
    if (slot.index_plus_one == 0) {
      slot = {static_cast<std::uint32_t>(hash), index + 1};
      return;
    }
    // A name already present keeps its first index (set_self's id may have
    // been interned as a peer's before).
    if (slot.hash == static_cast<std::uint32_t>(hash) &&
        origins_[slot.index_plus_one - 1] == origins_[index]) {
      return;
    }
  }
}

std::uint32_t Ledger::intern_origin(std::string_view id) {
  if (origin_slots_.empty()) rebuild_origin_slots(16);
  const std::size_t hash = Hash{}(id);
  const std::size_t mask = origin_slots_.size() - 1;
  for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
    const OriginSlot& slot = origin_slots_[at];
    if (slot.index_plus_one == 0) break;
    if (slot.hash == static_cast<std::uint32_t>(hash) && origins_[slot.index_plus_one - 1] == id) {
      return slot.index_plus_one - 1;
    }
  }
  if (origins_.size() >= std::min(bounds_.max_origins, kMaxOrigins)) {
    ++origins_over_bound_;
    return kNoOrigin;
  }
  origins_.emplace_back(id);
  const auto index = static_cast<std::uint32_t>(origins_.size() - 1);
  if (2 * origins_.size() > origin_slots_.size()) {
    rebuild_origin_slots(2 * origin_slots_.size());
  } else {
    index_origin(index);
  }
  return index;
}

namespace {

// Milliseconds of `t` modulo 2^16 (Entry::consumed_ms).
std::uint16_t ms16(TimeUs t) {
  const TimeUs ms = t >= 0 ? t / 1000 : -((999 - t) / 1000);  // rounded down
  return static_cast<std::uint16_t>(static_cast<std::uint64_t>(ms) & 0xffff);
}

}  // namespace

std::uint32_t Ledger::behind_ms(const KeyState& state, const Entry& e) {
  const auto gap = static_cast<std::uint16_t>(ms16(state.consumed_at_us) - e.consumed_ms);
  // Both are rounded down to a millisecond, so the gap may read up to one
  // more than it was: one less, so that the age never says older than true.
  return gap > 0 ? gap - 1u : 0u;
}

Ledger::RecentOthers Ledger::recent_others(const KeyState& state, TimeUs within_us, TimeUs burst_us,
                                           TimeUs before_us) {
  const auto consumed_at = [&](const Entry& e) { return consumed_at_us(state, e); };
  RecentOthers recent;
  TimeUs last_burst_us = -1;  // the newest consumption before `before_us`
  for (const Entry& e : state.entries) {
    if (e.origin == 0) continue;
    const TimeUs at = consumed_at(e);
    if (state.consumed_at_us - at <= within_us) ++recent.within;
    if (state.consumed_at_us - at <= burst_us) ++recent.in_burst;
    if (at < before_us) last_burst_us = std::max(last_burst_us, at);
  }
  if (last_burst_us < 0) return recent;
  RecentOthers last_burst;
  for (const Entry& e : state.entries) {
    if (e.origin == 0 || consumed_at(e) > last_burst_us) continue;
    const TimeUs behind_us = last_burst_us - consumed_at(e);
    if (behind_us <= within_us) ++last_burst.within;
    if (behind_us <= burst_us) ++last_burst.in_burst;
  }
  return {std::max(recent.within, last_burst.within),
          std::max(recent.in_burst, last_burst.in_burst)};
}

TimeUs Ledger::burst_woke_us(const KeyState& state, TimeUs now, TimeUs quiet_us) {
  // The oldest consumption within `quiet_us` of `now`, and the newest
  // before them.
  TimeUs woke_us = std::numeric_limits<TimeUs>::max();
  TimeUs before_us = std::numeric_limits<TimeUs>::min();
  for (const Entry& e : state.entries) {
    const TimeUs at = consumed_at_us(state, e);
    if (now - at < quiet_us) {
      woke_us = std::min(woke_us, at);
    } else {
      before_us = std::max(before_us, at);
    }
  }
  const bool woke = woke_us != std::numeric_limits<TimeUs>::max() &&
                    before_us != std::numeric_limits<TimeUs>::min() &&
                    woke_us - before_us >= quiet_us;
  return woke ? woke_us : 0;
}

Ledger::Keys::iterator Ledger::find_or_add(std::string_view key) {
  auto it = keys_.find(key);
  return it != keys_.end() ? it : keys_.emplace(std::string(key), KeyState{}).first;
}

Ledger::KeyState& Ledger::touch(std::string_view key, KeyState& state, Entry& entry, TimeUs now) {
  state.changed_us = std::max(state.changed_us, now);
  queue(key, state, entry);
  return state;
}

void Ledger::queue(std::string_view key, KeyState& state, Entry& entry) {
  entry.sends_left = retransmit_rounds_;
  state.sends_left = std::max(state.sends_left, retransmit_rounds_);
  if (!state.queued) {
    state.queued = true;
    changed_.emplace_back(key);
    changed_states_.push_back(&state);
  }
}

void Ledger::before_growth(KeyState& state, TimeUs now) {
  // Not again within a spell of the last wake: a wake noted by a request
  // that its share then refused left the entries as they were, and the
  // burst's first news would wake the key a second time, ending a burst
  // that had just begun (its debt lost: a fixed window at 200 nodes on
  // `periodic`, a fifth of the nodes each job).
  if (!state.share || !quiet(state, now) || state.share->woke_within(now, wake_quiet_us_)) {
    return;
  }
  const FairShare::Wake wake =
      state.share->note_wake(consumed_sum(state), own_consumed(state), now, wake_quiet_us_,
                             state.changed_us, state.consumed_at_us);
  if (wake.crowded) ++crowded_bursts_;
  if (wake.straggler) ++straggler_wakes_;
  if (wake.crowd_disproved) ++crowds_disproved_;
}

void Ledger::sent_entries(KeyState& state) {
  std::uint16_t most = 0;
  const auto sent = [&](std::vector<Entry>& entries) {
    for (Entry& e : entries) {
      if (e.sends_left > 0) --e.sends_left;
      most = std::max(most, e.sends_left);
    }
  };
  sent(state.entries);
  if (state.reset) sent(state.reset->floors);
  if (state.pending) sent(state.pending->floors);
  state.sends_left = most;
}

std::uint64_t Ledger::floor_of(const KeyState& state, std::uint32_t origin,
                               std::uint64_t incarnation) {
  if (!state.reset) return 0;
  for (const Entry& f : state.reset->floors) {
    if (f.origin == origin && f.incarnation == incarnation) return f.consumed;
  }
  return 0;
}

std::uint64_t Ledger::chargeable_sum(const KeyState& state) {
  std::uint64_t sum = 0;
  for (const Entry& e : state.entries) {
    const std::uint64_t floor = floor_of(state, e.origin, e.incarnation);
    const std::uint64_t above = e.consumed > floor ? e.consumed - floor : 0;
    if (above > UINT64_MAX - sum) return UINT64_MAX;
    sum += above;
  }
  return sum;
}

namespace {

// Resets made here carry this node's mark in the epoch's low bits, so two
// nodes that reset a key at once make different epochs (the higher wins).
constexpr int kEpochMarkBits = 20;

std::uint64_t epoch_mark(std::string_view id) {
  return fnv1a(id) & ((std::uint64_t{1} << kEpochMarkBits) - 1);
}

}  // namespace

Ledger::KeyState* Ledger::share_state(std::string_view key, TimeUs now, bool may_create) {
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (!may_create) return nullptr;
    it = keys_.emplace(std::string(key), KeyState{}).first;
    it->second.changed_us = now;
  }
  KeyState& state = it->second;
  if (!state.share) state.share = std::make_unique<FairShare>();
  return &state;
}

Ledger::KeyState* Ledger::state_with_share(std::string_view key) {
  auto it = keys_.find(key);
  return it != keys_.end() && it->second.share ? &it->second : nullptr;
}

std::uint64_t Ledger::dither_seed(std::string_view key) const {
  return fnv1a(self_id(), fnv1a(key));
}

std::uint64_t Ledger::reset_local(std::string_view key, TimeUs now) {
  const auto it = find_or_add(key);
  KeyState& state = it->second;
  std::uint64_t newest = state.reset ? state.reset->epoch : 0;
  if (state.pending) newest = std::max(newest, state.pending->epoch);
  auto reset = std::make_unique<Reset>();
  reset->epoch = (((newest >> kEpochMarkBits) + 1) << kEpochMarkBits) | epoch_mark(self_id());
  reset->floor_count = static_cast<std::uint32_t>(state.entries.size());
  reset->floors = state.entries;
  // A key with no entries still sends its reset: one floor of nothing.
  if (reset->floors.empty()) reset->floors.push_back(Entry{});
  state.reset = std::move(reset);
  state.pending.reset();
  state.share.reset();  // the key starts afresh: so does its share
  for (Entry& floor : state.reset->floors) touch(it->first, it->second, floor, now);
  return state.reset->epoch;
}

Ledger::FloorMerge Ledger::merge_floor(std::string_view key, std::uint64_t epoch,
                                       std::uint32_t floor_count, std::uint32_t origin,
                                       std::uint64_t incarnation, std::uint64_t consumed,
                                       TimeUs now) {
  assert(origin < origins_.size());
  // A count beyond what a reset of a key can hold could never complete.
  if (epoch == 0 || floor_count > kMaxOrigins) return FloorMerge::kMalformed;
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= bounds_.max_keys) {
      ++keys_over_bound_;
      return FloorMerge::kOld;
    }
    it = keys_.emplace(std::string(key), KeyState{}).first;
  }
  KeyState& state = it->second;
  if (state.reset && epoch <= state.reset->epoch) return FloorMerge::kOld;
  if (state.pending && epoch < state.pending->epoch) return FloorMerge::kOld;
  if (!state.pending || epoch > state.pending->epoch) {
    state.pending = std::make_unique<Reset>();
    state.pending->epoch = epoch;
    state.pending->floor_count = floor_count;
  }
  std::vector<Entry>& floors = state.pending->floors;
  Entry* floor = nullptr;
  for (Entry& f : floors) {
    if (f.origin == origin && f.incarnation == incarnation) floor = &f;
  }
  if (floor != nullptr && consumed <= floor->consumed) return FloorMerge::kPending;
  if (floor == nullptr) {
    if (floors.size() >= bounds_.max_entries_per_key) {
      ++entries_over_bound_;
      return FloorMerge::kOld;
    }
    floors.push_back(Entry{.origin = origin, .incarnation = incarnation, .consumed = consumed});
    floor = &floors.back();
  }
  floor->consumed = consumed;
  touch(it->first, it->second, *floor, now);
  state.pending->floor_count = std::max(state.pending->floor_count, floor_count);
  if (floors.size() < state.pending->floor_count) return FloorMerge::kPending;
  state.reset = std::move(state.pending);
  state.share.reset();
  return FloorMerge::kComplete;
}

void Ledger::add_local(std::string_view key, std::uint64_t cost, TimeUs now) {
  if (cost == 0) return;
  add_local(key, find_or_add(key)->second, cost, now);
}

void Ledger::add_local(std::string_view key, KeyState& state, std::uint64_t cost, TimeUs now) {
  if (cost == 0) return;
  if (state.own < 0) add_own(state, now);
  before_growth(state, now);
  Entry& own = state.entries[static_cast<std::size_t>(state.own)];
  own.consumed += cost;
  own.consumed_ms = ms16(now);
  touch(key, state, own, now);
  state.consumed_at_us = std::max(state.consumed_at_us, now);
}

void Ledger::add_own(KeyState& state, TimeUs now) {
  assert(state.own < 0);
  // A fresh entry: incarnation = process incarnation + time since start, so
  // it is larger than any entry this origin made for this key before.
  const auto elapsed = static_cast<std::uint64_t>(std::max<TimeUs>(0, now - start_us_));
  state.entries.push_back({.origin = 0, .incarnation = incarnation_ + elapsed});
  state.own = static_cast<std::int32_t>(state.entries.size() - 1);
}

bool Ledger::add_ask(std::string_view key, KeyState& state, TimeUs now) {
  if (state.own >= 0) return false;
  add_own(state, now);
  Entry& own = state.entries[static_cast<std::size_t>(state.own)];
  own.consumed_ms = ms16(now);
  state.consumed_at_us = std::max(state.consumed_at_us, now);
  queue(key, state, own);
  ++asks_;
  return true;
}

Ledger::Merged Ledger::merge(std::string_view key, std::uint32_t origin, std::uint64_t incarnation,
                             std::uint64_t consumed, TimeUs now, TimeUs consumed_at) {
  assert(consumed_at <= now);
  assert(origin < origins_.size());
  auto it = keys_.find(key);
  if (it != keys_.end()) {
    KeyState& state = it->second;
    for (std::size_t i = 0; i < state.entries.size(); ++i) {
      Entry& e = state.entries[i];
      if (e.origin != origin || e.incarnation != incarnation) continue;
      // Our own live entry only ever grows here; peers merely echo it.
      if (static_cast<std::int32_t>(i) == state.own || consumed <= e.consumed) return {};
      const std::uint64_t increase = consumed - e.consumed;
      const std::uint64_t charged_to = std::max(e.consumed, floor_of(state, origin, incarnation));
      before_growth(state, now);
      e.consumed = consumed;
      e.consumed_ms = ms16(consumed_at);
      touch(it->first, it->second, e, now);
      state.consumed_at_us = std::max(state.consumed_at_us, consumed_at);
      return {increase, consumed > charged_to ? consumed - charged_to : 0, 0};
    }
  }
  if (it == keys_.end()) {
    if (keys_.size() >= bounds_.max_keys) {
      ++keys_over_bound_;
      return {};
    }
    it = keys_.emplace(std::string(key), KeyState{}).first;
  }
  const std::uint64_t floor = floor_of(it->second, origin, incarnation);
  std::vector<Entry>& entries = it->second.entries;
  if (entries.size() >= bounds_.max_entries_per_key) {
    ++entries_over_bound_;
    return {};
  }
  // An entry of 0 is a peer's ask (add_ask): no growth, but news to pass
  // on (an owner sends the asker the key's entries).
  const bool ask = consumed == 0;
  if (!ask) before_growth(it->second, now);
  entries.push_back({.origin = origin,
                     .newcomer = 1,
                     .consumed_ms = ms16(consumed_at),
                     .incarnation = incarnation,
                     .consumed = consumed});
  if (ask) {
    queue(it->first, it->second, entries.back());
    ++asks_merged_;
  } else {
    touch(it->first, it->second, entries.back(), now);
  }
  it->second.consumed_at_us = std::max(it->second.consumed_at_us, consumed_at);
  // First sight. An entry that began before we did is history: what it
  // consumed so far was charged to our peers while we did not exist.
  const std::uint64_t chargeable = consumed > floor ? consumed - floor : 0;
  return {consumed, chargeable, incarnation < incarnation_ ? chargeable : 0};
}

std::uint64_t Ledger::charge_for(std::string_view key, const Merged& merged,
                                 std::uint64_t history_cap) {
  assert(merged.history <= merged.chargeable && merged.chargeable <= merged.increase);
  if (merged.history == 0) return merged.chargeable;
  auto it = keys_.find(key);
  assert(it != keys_.end());  // merged just now
  KeyState& state = it->second;
  const std::uint64_t room =
      history_cap > state.history_charged ? history_cap - state.history_charged : 0;
  const std::uint64_t charged = std::min(merged.history, room);
  state.history_charged += charged;
  state.history_forgiven += merged.history - charged;
  history_forgiven_ += merged.history - charged;
  return merged.chargeable - merged.history + charged;
}

const Ledger::KeyState* Ledger::find(std::string_view key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : &it->second;
}

void Ledger::mark_uncharged(std::string_view key) {
  auto it = keys_.find(key);
  if (it != keys_.end()) it->second.uncharged = true;
}

std::uint64_t Ledger::consumed_sum(const KeyState& state) {
  std::uint64_t sum = 0;
  for (const Entry& e : state.entries) {
    if (e.consumed > UINT64_MAX - sum) return UINT64_MAX;
    sum += e.consumed;
  }
  return sum;
}

void Ledger::sent(std::string_view key) {
  auto it = keys_.find(key);
  if (it != keys_.end()) sent_entries(it->second);
}

void Ledger::routed_sent_changed(std::size_t i) {
  KeyState& state = *changed_states_[i];
  const auto sent = [](std::vector<Entry>& entries) {
    for (Entry& e : entries) {
      e.sends_left = 0;
      e.newcomer = 0;
    }
  };
  sent(state.entries);
  if (state.reset) sent(state.reset->floors);
  if (state.pending) sent(state.pending->floors);
  state.sends_left = 0;
}

void Ledger::compact_changed() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < changed_.size(); ++i) {
    KeyState& state = *changed_states_[i];
    assert(keys_.find(changed_[i]) != keys_.end() && &keys_.find(changed_[i])->second == &state);
    if (state.sends_left == 0) {
      state.queued = false;
      continue;
    }
    // Never self-move: a moved-onto-itself string may come out empty.
    if (kept != i) {
      changed_[kept] = std::move(changed_[i]);
      changed_states_[kept] = &state;
    }
    ++kept;
  }
  changed_.resize(kept);
  changed_states_.resize(kept);
}

void Ledger::visit_slice(std::size_t max_visits,
                         const std::function<void(const std::string&, const KeyState&)>& visit) {
  walk(keys_, slice_cursor_, max_visits,
       [&](const std::string& key, const KeyState& state) { visit(key, state); });
}

void Ledger::for_each_key(
    const std::function<void(const std::string&, const KeyState&)>& visit) const {
  for (const auto& [key, state] : keys_) visit(key, state);
}

std::size_t Ledger::sweep(std::size_t max_visits,
                          const std::function<bool(const std::string&, const KeyState&)>& forget) {
  std::vector<std::string> doomed;
  walk(keys_, sweep_cursor_, max_visits, [&](const std::string& key, const KeyState& state) {
    if (!state.queued && forget(key, state)) doomed.push_back(key);
  });
  for (const std::string& key : doomed) keys_.erase(key);
  return doomed.size();
}

}  // namespace rlimit::core
