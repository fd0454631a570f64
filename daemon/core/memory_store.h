// A shared store in memory, with the semantics Redis mode asks of Redis
// (shell/redis_store.h): per key, one counter per (origin, incarnation),
// raised by max and never lowered; a write keeps its key for its ttl_ms; a
// key not written for that long is gone. The simulator's Redis and the
// tests' store: apply() is what one round trip to a healthy store does.
//
// Sizes in the result (bytes_out, bytes_in) are the RESP bytes the same
// commands and replies would take (EVALSHA with 40-hex sha, HGETALL), so the
// simulator reports what a real node would send.
//
// Pure and deterministic; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/store.h"
#include "core/time.h"

namespace rlimit::core {

class MemoryStore {
 public:
  StoreResult apply(const StoreBatch& batch, TimeUs now);
  // Keys not expired at `now` (drops the expired ones).
  std::size_t live_keys(TimeUs now);
  // The counter of (key, origin, incarnation), 0 if none or expired.
  std::uint64_t counter(const std::string& key, const std::string& origin,
                        std::uint64_t incarnation, TimeUs now) const;

 private:
  struct Key {
    std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> counters;
    TimeUs expires_us = 0;
  };
  // The key's entries as a StoreKey, and their reply size.
  static StoreKey read(const std::string& key, const Key& state, std::uint64_t& bytes_in);

  std::unordered_map<std::string, Key> keys_;
};

}  // namespace rlimit::core
