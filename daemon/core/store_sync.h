// Redis mode's core (docs/cluster.md, "Redis mode"): shares consumption
// through a shared store instead of gossip. The node decides every check
// from its own Limiter exactly as in the gossip modes; every sync interval
// this builds one StoreBatch (store.h):
// - writes: this node's own counters (absolute, per origin and incarnation)
//   of the keys they changed on since they were last written successfully;
//   the store raises its counters to them (max) and keeps the key for twice
//   the key's counter retention, and answers with every origin's counters;
// - reads: keys this node consumed from within their retention that were not
//   written, a rotating slice of them, so news of the others reaches a node
//   that holds a key it spends nothing new on (its bucket in debt, say).
// Every counter the result holds is merged through Limiter::merge_remote: the
// same ledger, history, debt and fair-share code as the gossip modes. A write
// that failed is written again later with the values of that time (absolute:
// nothing is charged twice); while the store fails, the node decides alone
// (fail-local) and says so once per change of state.
//
// Stand-ins while the store fails: alone, each node would spend the whole
// limit of every key it shares (N times the limit across the cluster), and
// repay the excess when the store returns (the keys silent for as long).
// So, while the store fails, every sync interval a key held here that has
// had no news for longer than the news horizon is charged with what each
// other origin would have consumed since its last news at the rate it
// consumed before (from the store's answers, over the last 1 to 2
// kRateStepUs: a burst at the key's start is out of it after three steps):
// its counter in the ledger is raised to the estimate,
// for at most standin_max_us after the key's last news. When the real
// counters come back they are merged by max as always: a real counter above
// the estimate charges the difference, one below it charges nothing (the
// node paid for more than the other spent: an under-admission, never a
// double charge). Every node estimating the others keeps the cluster near
// the limit during an outage, each node near its part of it.
//
// Bounds: at most max_writes_per_batch writes and max_reads_per_batch reads
// per batch (what does not fit waits, counted), one batch in flight, one
// batch per sync interval: store commands per node per second are at most
// (max_writes_per_batch + max_reads_per_batch) / sync interval, whatever the
// request rate.
//
// Fair shares: the news horizon is two sync intervals (a write lands, the
// others read it one interval later at most); live nodes are the distinct
// origins whose counters changed in the store within the last
// kOriginWindowUs, plus this node.
//
// Pure and deterministic; not thread-safe: the loop that drives the Limiter
// drives this (the shell carries batches to Redis on its own thread and posts
// results back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/limiter.h"
#include "core/store.h"
#include "core/time.h"

namespace rlimit::core {

struct StoreSyncOptions {
  TimeUs sync_interval_us = 100'000;
  std::uint32_t max_writes_per_batch = 4096;
  std::uint32_t max_reads_per_batch = 512;
  // A batch whose result has not come back by then is given up: its writes
  // are written again (the shell's own timeouts should answer first).
  TimeUs batch_timeout_us = 5'000'000;
  // While the store fails: how long after a key's last news its other
  // origins are still charged at their earlier rates (stand-ins, above); 0:
  // never, each node alone spends the whole limit.
  TimeUs standin_max_us = 60'000'000;
};

struct StoreSyncStats {
  std::uint64_t batches = 0;
  std::uint64_t batches_failed = 0;     // ok = false (partly or wholly)
  std::uint64_t batches_timed_out = 0;  // no result within batch_timeout_us
  std::uint64_t batches_full = 0;       // left writes for the next batch (max_writes_per_batch)
  std::uint64_t keys_written = 0;
  std::uint64_t keys_read = 0;
  std::uint64_t writes_failed = 0;  // keys written again later
  std::uint64_t entries_received = 0;
  std::uint64_t entries_applied = 0;  // raised a counter
  std::uint64_t tokens_charged_remote = 0;
  std::uint64_t tokens_charged_standin = 0;  // estimates while the store failed (stand-ins)
  // Origins not estimated: the key's followed origins were at the ledger's
  // max_entries_per_key (an origin past it gets no entry to raise).
  std::uint64_t standin_origins_untracked = 0;
  std::uint64_t store_down = 0;  // changes of state from reachable to failing
  std::uint64_t commands = 0;    // from the results
  std::uint64_t round_trips = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
};

class StoreSync {
 public:
  // `limiter` must have replication enabled (Limiter::enable_replication)
  // and outlive this.
  StoreSync(StoreSyncOptions options, Limiter& limiter);

  // The next batch when one is due (a sync interval since the last one
  // started and none in flight, or the one in flight timed out); nullopt
  // otherwise. Also keeps the fair-share view current.
  std::optional<StoreBatch> tick(TimeUs now);
  // The result of a batch. A late result of a batch given up is still
  // merged (its counters are absolute) but changes no bookkeeping.
  void on_result(const StoreResult& result, TimeUs now);
  // The last batch, when the node stops gracefully: every key whose own
  // counter the store may lack (waiting, or in the batch in flight, whose
  // answer will not be waited for), at most max_writes_per_batch, no reads;
  // nullopt when there is none. Its result goes to on_result as any.
  std::optional<StoreBatch> final_batch(TimeUs now);

  // Whether the last batch's result came back whole; true before any.
  bool store_healthy() const { return healthy_; }
  // True once after each change of store_healthy() (for a log line).
  bool take_health_change() {
    const bool changed = health_changed_;
    health_changed_ = false;
    return changed;
  }
  const std::string& last_error() const { return last_error_; }
  bool in_flight() const { return in_flight_id_ != 0; }
  // Keys waiting to be written (own counters newer than the store's).
  std::size_t dirty_keys() const { return dirty_.size(); }
  // Keys read in rotation (own consumption within retention).
  std::size_t held_keys() const { return held_.size(); }
  // Distinct other origins seen changing lately (the share view's count - 1).
  std::size_t recent_origins() const { return origin_seen_us_.size(); }
  const StoreSyncStats& stats() const { return stats_; }
  const StoreSyncOptions& options() const { return options_; }

  static constexpr TimeUs kOriginWindowUs = 10'000'000;
  // Stand-ins' rates: a mark every step, the rate over the last two.
  static constexpr TimeUs kRateStepUs = 1'000'000;

 private:
  // Moves keys whose own counter changed from the ledger's changed list into
  // dirty_ and held_.
  void collect_changes(TimeUs now);
  // Moves dirty keys, in a deterministic order, into `batch` as writes of
  // this node's counters (at most max_writes_per_batch).
  void add_writes(StoreBatch& batch);
  // Makes `batch` the one in flight, counted.
  void send(const StoreBatch& batch, TimeUs now);
  void add_reads(StoreBatch& batch, std::size_t budget, TimeUs now);
  void update_share_view(TimeUs now);
  // The key's other origins' counters from a result, and their rates.
  void track_others(const StoreKey& key, const std::string& self, TimeUs now);
  // While the store fails: each silent key's stand-in charges.
  void charge_standins(TimeUs now);
  void set_health(bool healthy, const std::string& error);

  StoreSyncOptions options_;
  Limiter& limiter_;
  StoreSyncStats stats_;
  std::uint64_t next_id_ = 1;
  std::uint64_t in_flight_id_ = 0;  // 0: none
  TimeUs in_flight_since_us_ = 0;
  std::vector<std::string> in_flight_writes_;
  TimeUs next_sync_us_ = 0;
  std::unordered_set<std::string> dirty_;
  // Another origin's counter on a held key as the store last said, and its
  // rate (per microsecond) from the older of two marks kRateStepUs apart.
  struct OriginRate {
    std::string origin;
    std::uint64_t incarnation = 0;
    std::uint64_t seen = 0;
    std::uint64_t older = 0;  // the counter at older_us, where the rate's window starts
    TimeUs older_us = 0;
    std::uint64_t newer = 0;  // the counter at newer_us, the next window's start
    TimeUs newer_us = 0;
    double rate_per_us = 0;
  };
  struct Held {
    TimeUs own_us = 0;    // this node's last consumption
    TimeUs news_us = -1;  // the last result that held the key; -1: none yet
    std::vector<OriginRate> others;
  };
  // Keys this node consumed from; read in rotation while within their
  // retention.
  std::unordered_map<std::string, Held> held_;
  std::vector<std::string> read_ring_;  // a snapshot of held_, read from read_cursor_
  std::size_t read_cursor_ = 0;
  // Other origins (by name) and when their counters last rose here.
  std::unordered_map<std::string, TimeUs> origin_seen_us_;
  bool healthy_ = true;
  bool health_changed_ = false;
  std::string last_error_;
};

}  // namespace rlimit::core
