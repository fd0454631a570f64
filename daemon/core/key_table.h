// The bounded table of live buckets, keyed by an opaque byte string built by
// the Limiter (rule id, override, distinct descriptor values). Holds at most
// `max_keys` buckets; the Limiter evicts buckets that have refilled to full
// (indistinguishable from fresh ones) with an incremental sweep. Not
// thread-safe: one owner, one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/token_bucket.h"

namespace rlimit::core {

class KeyTable {
 public:
  explicit KeyTable(std::size_t max_keys) : max_keys_(max_keys) {}

  // The bucket for `key`, or nullptr. Valid until the next insert or erase.
  TokenBucket* find(std::string_view key);

  // Inserts a bucket for `key` (which must be absent). Returns nullptr when
  // the table holds max_keys already.
  TokenBucket* insert(std::string_view key, const TokenBucket& bucket);

  // Visits up to `max_visits` entries, continuing where the last call stopped
  // and wrapping around, and erases those for which `evict(key, bucket)` is
  // true. Returns the number erased.
  using EvictPredicate = std::function<bool(std::string_view key, const TokenBucket& bucket)>;
  std::size_t sweep(std::size_t max_visits, const EvictPredicate& evict);

  std::size_t size() const { return map_.size(); }
  std::size_t max_keys() const { return max_keys_; }
  void set_max_keys(std::size_t max_keys) { max_keys_ = max_keys; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, TokenBucket, Hash, std::equal_to<>> map_;
  std::size_t max_keys_;
  std::size_t sweep_cursor_ = 0;  // bucket index of the hash table
};

}  // namespace rlimit::core
