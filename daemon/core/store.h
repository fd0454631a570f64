// What a node exchanges with a shared store (Redis mode, docs/cluster.md
// "Redis mode"): its own per-origin counters for keys that changed, and the
// store's counters (every origin's) for keys it holds. The same absolute
// per-origin values the gossip modes exchange: the store merges them by max,
// so a write retried, duplicated or reordered changes nothing, and the node
// merges what it reads through the same Ledger code as a peer's news.
//
// Plain values: the pure core (store_sync.h) builds batches and takes
// results; the shell (shell/redis_store.h) or the simulator carries them to
// a store and back. Keys here are the core's bucket keys, without the
// store's key prefix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlimit::core {

// One origin's counter of one key (Ledger::Entry with the origin's name).
struct StoreEntry {
  std::string origin;  // node id
  std::uint64_t incarnation = 0;
  std::uint64_t consumed = 0;

  friend bool operator==(const StoreEntry&, const StoreEntry&) = default;
};

// Raise the store's counters of `key` to at least these values and keep the
// key for `ttl_ms` from now.
struct StoreWrite {
  std::string key;
  std::int64_t ttl_ms = 0;  // > 0
  std::vector<StoreEntry> entries;
};

// One sync: every write and read is independent (no ordering between keys).
struct StoreBatch {
  std::uint64_t id = 0;
  std::vector<StoreWrite> writes;
  std::vector<std::string> reads;  // keys to read only (not also written)
};

// What the store holds for one key after the batch's write of it (if any).
struct StoreKey {
  std::string key;
  std::vector<StoreEntry> entries;
};

struct StoreResult {
  std::uint64_t id = 0;  // the batch's
  // Every written and read key that succeeded, with what the store holds.
  std::vector<StoreKey> keys;
  // Written keys whose write did not succeed (or whose outcome is unknown):
  // the node writes them again. Reads that failed are simply absent.
  std::vector<std::string> failed_writes;
  bool ok = true;     // every operation succeeded
  std::string error;  // the first failure, for logs ("" when ok)
  // Cost of the batch, for counters.
  std::uint64_t commands = 0;     // store commands sent
  std::uint64_t round_trips = 0;  // pipelines sent (one per store node per batch when healthy)
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
};

}  // namespace rlimit::core
