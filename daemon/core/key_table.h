// The bounded table of live keys, keyed by an opaque byte string built by the
// Limiter (rule id, override, distinct descriptor values), each holding a
// 24-byte StateCell (a token bucket, or another algorithm's compact state).
// Holds at most `max_keys` keys; the Limiter evicts buckets that have refilled to full
// (indistinguishable from fresh ones) with an incremental sweep. Not
// thread-safe: one owner, one thread.
//
// Layout (why: a lookup among a million keys should cost one cache miss, not
// the three of a node-based map with heap strings): open addressing with
// linear probing over two arrays of the same capacity,
//  - slots: one 64-byte cache line each, holding the bucket, 32 bits of the
//    hash (to re-home entries on growth and deletion without rehashing keys)
//    and the key itself when it is at most 32 bytes (else a heap copy);
//  - tags: 2 bytes per slot, 0 for empty, else 15 bits of the key's hash, so
//    a probe run is scanned 32 slots per cache line without touching slots.
// A lookup fetches the key's home slot while it scans the tags; most keys sit
// in their home slot, so most lookups cost one miss into the slot array.
// A key's home slot is its 32-bit hash scaled to the capacity (multiply and
// shift, so any capacity works). The load stays at most 7/8; past it the
// capacity grows by half (so the load after growing is 7/12). Erasing shifts
// the following entries of the probe run back (no tombstones), and the sweep
// erases across the whole table rather than region by region, so the table
// does not degrade however keys come and go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "core/state_cell.h"

namespace rlimit::core {

class KeyTable {
 public:
  explicit KeyTable(std::size_t max_keys) : max_keys_(max_keys) {}
  ~KeyTable();
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // The state for `key`, or nullptr. Valid until the next insert or erase
  // (sweep): entries move.
  StateCell* find(std::string_view key);

  // Inserts a state for `key`. Returns nullptr when the table holds max_keys
  // already, `key` is present, or `key` is empty. Invalidates pointers from find() when it
  // returns true from will_grow(1).
  StateCell* insert(std::string_view key, const StateCell& cell);

  // Starts fetching the memory a find(key) will touch (the key's home tag
  // and slot), so a caller that knows its next keys can overlap their cache
  // misses. Changes nothing; a hint only.
  void prefetch(std::string_view key) const;

  // Erases the state for `key`; false when there is none. Invalidates
  // pointers from find().
  bool erase(std::string_view key);

  // True if inserting `more` keys would reallocate (and so invalidate every
  // pointer find() returned).
  bool will_grow(std::size_t more) const { return size_ + more > max_load(capacity_); }
  // Makes room for `more` inserts now, so none of them reallocates.
  void reserve(std::size_t more);

  // Visits up to `max_visits` entries (and a bounded number of empty slots),
  // continuing where the last call stopped, and erases those for which
  // `evict(key, cell)` is true. Returns the number erased. The predicate
  // must not modify the table. One pass visits every slot once, in an order
  // that strides across the table: erasing in slot order would empty one
  // region while another stays dense, and linear probing degrades with the
  // densest region, not the average. (An entry that erasing moves back into a
  // slot already visited waits for the next pass.)
  using EvictPredicate = std::function<bool(std::string_view key, const StateCell& cell)>;
  std::size_t sweep(std::size_t max_visits, const EvictPredicate& evict);

  std::size_t size() const { return size_; }
  std::size_t max_keys() const { return max_keys_; }
  void set_max_keys(std::size_t max_keys) { max_keys_ = max_keys; }

  // The longest run of occupied slots (what a miss may have to scan), for
  // tests and diagnostics: O(capacity).
  std::size_t longest_run() const;

  // Slots allocated (0, or 16 and more) and the bytes the table holds:
  // both arrays plus the heap copies of long keys.
  std::size_t capacity() const { return capacity_; }
  std::size_t memory_bytes() const;

  // Keys up to this long live in the slot itself.
  static constexpr std::size_t kInlineKeyBytes = 32;

 private:
  struct Slot {
    StateCell cell;
    std::uint32_t hash = 0;       // low 32 bits of the key's hash (the home slot)
    std::uint32_t key_bytes = 0;  // 0: the slot is empty (keys are never empty)
    // The key when key_bytes <= kInlineKeyBytes, else a char* to a heap copy.
    alignas(8) char key[kInlineKeyBytes];
  };
  static_assert(sizeof(Slot) == 64, "one slot, one cache line");

  // Zeroed memory for the two arrays, aligned to a cache line. Arrays of
  // 2 MiB and more are aligned to 2 MiB and advised to use transparent huge
  // pages: a random lookup among a million keys then misses the TLB far less
  // (measured: 20 % fewer ns per check across 1M keys). A hint to the
  // allocator, not I/O: nothing the table computes depends on it.
  struct Block {
    void* base = nullptr;  // what free() takes
    void* data = nullptr;  // the aligned, zeroed bytes
  };
  static Block allocate_zeroed(std::size_t bytes);

  static std::size_t max_load(std::size_t capacity) { return capacity - capacity / 8; }
  static std::uint16_t tag_of(std::uint64_t hash) {
    return static_cast<std::uint16_t>((hash >> 48) | 1);
  }
  static std::size_t home_of(std::uint32_t hash32, std::size_t capacity) {
    return static_cast<std::size_t>((std::uint64_t{hash32} * capacity) >> 32);
  }
  std::size_t home_of(std::uint32_t hash32) const { return home_of(hash32, capacity_); }
  std::size_t next(std::size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }
  static std::string_view key_of(const Slot& slot);
  // Grows (or first allocates) to `capacity` slots, re-homing every entry.
  void rehash(std::size_t capacity);
  // Erases the entry at `index`, shifting back the rest of its probe run.
  void erase_at(std::size_t index);

  Block tags_block_;
  Block slots_block_;
  std::uint16_t* tags_ = nullptr;
  Slot* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::size_t heap_key_bytes_ = 0;
  std::size_t max_keys_;
  std::size_t sweep_cursor_ = 0;  // slot index
  std::size_t sweep_stride_ = 1;  // coprime to capacity_
};

// The hash the table uses: fast on short keys, stable across builds.
std::uint64_t hash_key(std::string_view key);

}  // namespace rlimit::core
