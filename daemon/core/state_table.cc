#include "core/state_table.h"

#include <vector>

#include "core/key_table.h"  // hash_key

namespace rlimit::core {

std::size_t StateTable::Hash::operator()(std::string_view key) const {
  return static_cast<std::size_t>(hash_key(key));
}

RuleState* StateTable::find(std::string_view key) {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

RuleState* StateTable::insert(std::string_view key, RuleState state) {
  auto [it, inserted] = map_.emplace(std::string(key), std::move(state));
  return inserted ? &it->second : nullptr;
}

bool StateTable::erase(std::string_view key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  map_.erase(it);
  return true;
}

std::size_t StateTable::sweep(std::size_t max_visits, const EvictPredicate& evict) {
  if (map_.empty()) return 0;
  std::vector<std::string_view> doomed;
  std::size_t visited = 0;
  std::size_t buckets_seen = 0;
  const std::size_t bucket_count = map_.bucket_count();
  if (sweep_bucket_ >= bucket_count) sweep_bucket_ = 0;
  // Empty buckets count as visits too, so one call's work stays bounded.
  while (visited < max_visits && buckets_seen < bucket_count) {
    for (auto it = map_.begin(sweep_bucket_); it != map_.end(sweep_bucket_); ++it) {
      ++visited;
      if (evict(it->first, it->second)) doomed.push_back(it->first);
    }
    ++visited;
    ++buckets_seen;
    sweep_bucket_ = sweep_bucket_ + 1 == bucket_count ? 0 : sweep_bucket_ + 1;
  }
  // Erasing never rehashes, so the views stay valid until their own erase.
  std::size_t erased = 0;
  for (std::string_view key : doomed) {
    auto it = map_.find(key);
    if (it != map_.end()) {
      map_.erase(it);
      ++erased;
    }
  }
  return erased;
}

}  // namespace rlimit::core
