#include "core/key_table.h"

#include <algorithm>
#include <vector>

namespace rlimit::core {

TokenBucket* KeyTable::find(std::string_view key) {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

TokenBucket* KeyTable::insert(std::string_view key, const TokenBucket& bucket) {
  if (map_.size() >= max_keys_) return nullptr;
  auto [it, inserted] = map_.emplace(std::string(key), bucket);
  return inserted ? &it->second : nullptr;
}

std::size_t KeyTable::sweep(std::size_t max_visits, const EvictPredicate& evict) {
  if (map_.empty()) return 0;
  std::size_t visited = 0;
  std::size_t erased = 0;
  const std::size_t bucket_count = map_.bucket_count();
  // Walk hash buckets from the cursor. A rehash between calls only moves the
  // walk; the sweep is a background chore, not an exact scan.
  std::vector<std::string> doomed;
  std::size_t buckets_walked = 0;
  // Empty hash buckets count too, so a sparse table costs no more per call.
  const std::size_t max_walk = std::min(bucket_count, 2 * max_visits);
  while (visited < max_visits && buckets_walked < max_walk) {
    const std::size_t b = sweep_cursor_ % bucket_count;
    for (auto it = map_.begin(b); it != map_.end(b); ++it) {
      ++visited;
      if (evict(it->first, it->second)) doomed.push_back(it->first);
    }
    for (const std::string& key : doomed) erased += map_.erase(key);
    doomed.clear();
    sweep_cursor_ = b + 1;
    ++buckets_walked;
  }
  return erased;
}

}  // namespace rlimit::core
