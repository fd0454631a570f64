// The table of live keys whose state does not fit the KeyTable's 24-byte
// cells because it owns memory (the sliding log, concurrency leases), keyed
// by the same key bytes. A node-based map: such keys are few and their
// states large. The Limiter bounds the two tables' sizes together. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/rule_state.h"

namespace rlimit::core {

class StateTable {
 public:
  // The state for `key`, or nullptr. Valid until the next insert or erase.
  RuleState* find(std::string_view key);
  // Inserts `state` for a new `key`; returns where it lives (valid as above).
  RuleState* insert(std::string_view key, RuleState state);
  bool erase(std::string_view key);

  // Visits up to `max_visits` entries, continuing where the last call
  // stopped, and erases those for which `evict(key, state)` is true. Returns
  // the number erased. One pass over every bucket of the map visits each
  // entry once (entries inserted meanwhile may wait for the next pass).
  using EvictPredicate = std::function<bool(std::string_view key, const RuleState& state)>;
  std::size_t sweep(std::size_t max_visits, const EvictPredicate& evict);

  std::size_t size() const { return map_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const;
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  std::unordered_map<std::string, RuleState, Hash, Equal> map_;
  std::size_t sweep_bucket_ = 0;  // the map bucket the next sweep starts at
};

}  // namespace rlimit::core
