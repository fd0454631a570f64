#include "core/store_sync.h"

#include <algorithm>
#include <cassert>

namespace rlimit::core {
namespace {

// The store keeps a key for twice its counter retention after the last write:
// every node forgets the key's counters within one retention of their last
// change, so no node that still holds the key reads it back empty.
std::int64_t store_ttl_ms(const Limiter& limiter, std::string_view key) {
  const TimeUs retention_us = limiter.counter_retention_us(key);
  return std::max<std::int64_t>(1000, 2 * (retention_us / 1000));
}

}  // namespace

StoreSync::StoreSync(StoreSyncOptions options, Limiter& limiter)
    : options_(options), limiter_(limiter) {
  assert(options_.sync_interval_us > 0);
  assert(options_.max_writes_per_batch > 0);
  // Each own change is listed once: collect_changes() takes it from the
  // ledger's changed list in the next tick.
  limiter_.ledger().set_retransmit_rounds(1);
}

void StoreSync::collect_changes(TimeUs now) {
  Ledger& ledger = limiter_.ledger();
  const auto& changed = ledger.changed();
  for (std::size_t i = 0; i < changed.size(); ++i) {
    const Ledger::KeyState& state = ledger.changed_state(i);
    if (state.own >= 0 && state.entries[static_cast<std::size_t>(state.own)].sends_left > 0) {
      dirty_.insert(changed[i]);
      held_[changed[i]].own_us = now;
    }
    ledger.sent_changed(i);
  }
  ledger.compact_changed();
}

void StoreSync::add_reads(StoreBatch& batch, std::size_t budget, TimeUs now) {
  if (budget == 0) return;
  std::unordered_set<std::string_view> written;
  for (const StoreWrite& w : batch.writes) written.insert(w.key);
  // One pass over the ring at most per batch.
  for (std::size_t visited = 0; batch.reads.size() < budget && visited <= held_.size(); ++visited) {
    if (read_cursor_ >= read_ring_.size()) {
      // A new lap: the keys held now, less those out of retention.
      for (auto it = held_.begin(); it != held_.end();) {
        const bool known = limiter_.ledger().find(it->first) != nullptr;
        if (!known || !limiter_.within_retention(it->first, now - it->second.own_us)) {
          it = held_.erase(it);
        } else {
          ++it;
        }
      }
      read_ring_.clear();
      read_ring_.reserve(held_.size());
      for (const auto& [key, held] : held_) read_ring_.push_back(key);
      std::sort(read_ring_.begin(), read_ring_.end());  // deterministic order
      read_cursor_ = 0;
      if (read_ring_.empty()) return;
    }
    const std::string& key = read_ring_[read_cursor_++];
    if (written.count(key) != 0 || held_.count(key) == 0) continue;
    batch.reads.push_back(key);
  }
}

std::optional<StoreBatch> StoreSync::tick(TimeUs now) {
  collect_changes(now);
  update_share_view(now);
  if (in_flight_id_ != 0) {
    if (now - in_flight_since_us_ < options_.batch_timeout_us) return std::nullopt;
    // Given up: its writes are written again.
    ++stats_.batches_timed_out;
    for (std::string& key : in_flight_writes_) dirty_.insert(std::move(key));
    in_flight_writes_.clear();
    in_flight_id_ = 0;
    set_health(false, "no answer from the store within the batch timeout");
  }
  if (now < next_sync_us_) return std::nullopt;
  next_sync_us_ = now + options_.sync_interval_us;
  if (!healthy_) charge_standins(now);

  StoreBatch batch;
  batch.id = next_id_++;
  add_writes(batch);
  add_reads(batch, options_.max_reads_per_batch, now);
  if (batch.writes.empty() && batch.reads.empty()) return std::nullopt;
  send(batch, now);
  return batch;
}

std::optional<StoreBatch> StoreSync::final_batch(TimeUs now) {
  collect_changes(now);
  for (std::string& key : in_flight_writes_) dirty_.insert(std::move(key));
  in_flight_writes_.clear();
  StoreBatch batch;
  batch.id = next_id_++;
  add_writes(batch);
  if (batch.writes.empty()) return std::nullopt;
  send(batch, now);
  return batch;
}

void StoreSync::add_writes(StoreBatch& batch) {
  const Ledger& ledger = limiter_.ledger();
  std::vector<std::string> keys;
  keys.reserve(dirty_.size());
  for (const std::string& key : dirty_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (std::string& key : keys) {
    if (batch.writes.size() >= options_.max_writes_per_batch) {
      ++stats_.batches_full;
      break;
    }
    dirty_.erase(key);
    const Ledger::KeyState* state = ledger.find(key);
    if (state == nullptr || state->own < 0) continue;  // forgotten since
    const Ledger::Entry& own = state->entries[static_cast<std::size_t>(state->own)];
    StoreWrite write;
    write.ttl_ms = store_ttl_ms(limiter_, key);
    write.entries.push_back({ledger.self_id(), own.incarnation, own.consumed});
    write.key = std::move(key);
    batch.writes.push_back(std::move(write));
  }
}

void StoreSync::send(const StoreBatch& batch, TimeUs now) {
  in_flight_id_ = batch.id;
  in_flight_since_us_ = now;
  in_flight_writes_.clear();
  for (const StoreWrite& w : batch.writes) in_flight_writes_.push_back(w.key);
  ++stats_.batches;
  stats_.keys_written += batch.writes.size();
  stats_.keys_read += batch.reads.size();
}

void StoreSync::on_result(const StoreResult& result, TimeUs now) {
  stats_.commands += result.commands;
  stats_.round_trips += result.round_trips;
  stats_.bytes_out += result.bytes_out;
  stats_.bytes_in += result.bytes_in;
  // A copy: merging interns new origins, which may move the ledger's names.
  const std::string self = limiter_.ledger().self_id();
  for (const StoreKey& key : result.keys) {
    track_others(key, self, now);
    for (const StoreEntry& entry : key.entries) {
      ++stats_.entries_received;
      // Our own counter echoed: the ledger never raises our current entry.
      const std::uint64_t increase =
          limiter_.merge_remote(key.key, entry.origin, entry.incarnation, entry.consumed, now);
      if (increase == 0) continue;
      ++stats_.entries_applied;
      stats_.tokens_charged_remote += increase;
      if (entry.origin != self) origin_seen_us_[entry.origin] = now;
    }
  }
  if (result.id != in_flight_id_) return;  // given up before: merged, nothing more
  in_flight_id_ = 0;
  in_flight_writes_.clear();
  for (const std::string& key : result.failed_writes) dirty_.insert(key);
  stats_.writes_failed += result.failed_writes.size();
  if (!result.ok) ++stats_.batches_failed;
  set_health(result.ok, result.error);
}

void StoreSync::track_others(const StoreKey& key, const std::string& self, TimeUs now) {
  const auto held = held_.find(key.key);
  if (held == held_.end()) return;
  Held& h = held->second;
  h.news_us = now;
  for (const StoreEntry& entry : key.entries) {
    if (entry.origin == self) continue;
    auto r = std::find_if(h.others.begin(), h.others.end(), [&](const OriginRate& o) {
      return o.origin == entry.origin && o.incarnation == entry.incarnation;
    });
    if (r == h.others.end()) {
      if (h.others.size() >= limiter_.ledger().bounds().max_entries_per_key) {
        ++stats_.standin_origins_untracked;
        continue;
      }
      h.others.push_back({entry.origin, entry.incarnation, entry.consumed, entry.consumed, now,
                          entry.consumed, now, 0});
      continue;
    }
    // A stand-in may have raised the ledger past the real counter (so the
    // merge raises nothing): the origin is still live when its real one rose.
    if (entry.consumed > r->seen) origin_seen_us_[entry.origin] = now;
    r->seen = entry.consumed;
    if (now - r->newer_us >= kRateStepUs) {
      r->rate_per_us = entry.consumed > r->older ? static_cast<double>(entry.consumed - r->older) /
                                                       static_cast<double>(now - r->older_us)
                                                 : 0.0;
      r->older = r->newer;
      r->older_us = r->newer_us;
      r->newer = entry.consumed;
      r->newer_us = now;
    }
  }
}

void StoreSync::charge_standins(TimeUs now) {
  if (options_.standin_max_us <= 0) return;
  const TimeUs horizon_us = 2 * options_.sync_interval_us;
  for (const auto& [key, h] : held_) {
    if (h.news_us < 0 || h.others.empty() || now - h.news_us <= horizon_us) continue;
    const TimeUs span_us = std::min(now - h.news_us, options_.standin_max_us);
    for (const OriginRate& r : h.others) {
      if (r.rate_per_us <= 0) continue;
      const std::uint64_t estimate =
          r.seen + static_cast<std::uint64_t>(r.rate_per_us * static_cast<double>(span_us));
      stats_.tokens_charged_standin +=
          limiter_.merge_remote(key, r.origin, r.incarnation, estimate, now);
    }
  }
}

void StoreSync::update_share_view(TimeUs now) {
  for (auto it = origin_seen_us_.begin(); it != origin_seen_us_.end();) {
    it = now - it->second > kOriginWindowUs ? origin_seen_us_.erase(it) : std::next(it);
  }
  // This node's place among the origins writing lately, for fair shares'
  // draws (ShareView::rank; the draw seed 0: the store is the cluster).
  const std::string& self = limiter_.ledger().self_id();
  const auto rank = std::count_if(origin_seen_us_.begin(), origin_seen_us_.end(),
                                  [&](const auto& origin) { return origin.first < self; });
  limiter_.set_share_view({.live_nodes = static_cast<std::uint32_t>(origin_seen_us_.size() + 1),
                           .horizon_us = 2 * options_.sync_interval_us,
                           .rank = static_cast<std::uint32_t>(rank)});
}

void StoreSync::set_health(bool healthy, const std::string& error) {
  if (!healthy) last_error_ = error;
  if (healthy == healthy_) return;
  healthy_ = healthy;
  health_changed_ = true;
  if (!healthy) ++stats_.store_down;
}

}  // namespace rlimit::core
