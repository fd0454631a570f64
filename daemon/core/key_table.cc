#include "core/key_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include "core/bytes.h"

namespace rlimit::core {
namespace {

constexpr std::size_t kFirstCapacity = 16;

// Growth by half again (not doubling) keeps the load between 7/12 and 7/8:
// about 25 % fewer bytes per key on average.
std::size_t grown(std::size_t capacity) {
  const std::size_t next = std::max(kFirstCapacity, capacity + capacity / 2);
  return (next + 15) / 16 * 16;
}
constexpr std::uintptr_t kSlotAlignment = 64;

std::uint64_t load64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::uint64_t load32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 64x64 -> 128-bit multiply, folded: the mixing step of wyhash.
std::uint64_t mum(std::uint64_t a, std::uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

constexpr std::uint64_t kSecret0 = 0xa0761d6478bd642full;
constexpr std::uint64_t kSecret1 = 0xe7037ed1a0b428dbull;

char* heap_key(const char (&key)[KeyTable::kInlineKeyBytes]) {
  char* p;
  std::memcpy(&p, key, sizeof(p));
  return p;
}

// wyhash's structure (public domain, Wang Yi): a couple of multiplies for a
// bucket key of 20-40 bytes. Not seeded: the key bound and the sweep keep a
// table of colliding keys from growing without limit. Inlined into the
// table's own lookups, where the call was a tenth of the lookup.
[[gnu::always_inline]] inline std::uint64_t hash_bytes(std::string_view key) {
  const char* p = key.data();
  const std::size_t n = key.size();
  std::uint64_t seed = kSecret0 ^ n;
  std::uint64_t a, b;
  if (n <= 16) {
    if (n >= 4) {
      const std::size_t mid = (n >> 3) << 2;
      a = (load32(p) << 32) | load32(p + mid);
      b = (load32(p + n - 4) << 32) | load32(p + n - 4 - mid);
    } else if (n > 0) {
      a = (std::uint64_t{static_cast<unsigned char>(p[0])} << 16) |
          (std::uint64_t{static_cast<unsigned char>(p[n >> 1])} << 8) |
          std::uint64_t{static_cast<unsigned char>(p[n - 1])};
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    std::size_t left = n;
    while (left > 16) {
      seed = mum(load64(p) ^ kSecret1, load64(p + 8) ^ seed);
      p += 16;
      left -= 16;
    }
    a = load64(p + left - 16);
    b = load64(p + left - 8);
  }
  return mum(kSecret1 ^ n, mum(a ^ kSecret1, b ^ seed));
}

}  // namespace

std::uint64_t hash_key(std::string_view key) { return hash_bytes(key); }

KeyTable::Block KeyTable::allocate_zeroed(std::size_t bytes) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  Block block;
  if (bytes >= kHugePage) {
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    block.base = std::aligned_alloc(kHugePage, rounded);
    if (block.base == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(block.base, rounded, MADV_HUGEPAGE);  // best effort: failure changes nothing
#endif
    std::memset(block.base, 0, rounded);
    block.data = block.base;
    return block;
  }
  // calloc: large zeroed blocks are fresh pages, not written until used.
  block.base = std::calloc(bytes + kSlotAlignment, 1);
  if (block.base == nullptr) throw std::bad_alloc();
  const auto at = reinterpret_cast<std::uintptr_t>(block.base);
  block.data = reinterpret_cast<void*>((at + kSlotAlignment - 1) & ~(kSlotAlignment - 1));
  return block;
}

KeyTable::~KeyTable() {
  for (std::size_t i = 0; i < capacity_; ++i) {
    if (tags_[i] != 0 && slots_[i].key_bytes > kInlineKeyBytes) delete[] heap_key(slots_[i].key);
  }
  std::free(tags_block_.base);
  std::free(slots_block_.base);
}

std::string_view KeyTable::key_of(const Slot& slot) {
  if (slot.key_bytes <= kInlineKeyBytes) return {slot.key, slot.key_bytes};
  return {heap_key(slot.key), slot.key_bytes};
}

StateCell* KeyTable::find(std::string_view key) {
  if (size_ == 0) return nullptr;
  const std::uint64_t hash = hash_bytes(key);
  std::size_t i = home_of(static_cast<std::uint32_t>(hash));
  // The slot line is fetched while the tags are scanned: most keys sit in
  // their home slot. (Reading the home slot first, tags only on a mismatch,
  // measured slower: the tag scan then waits for the slot.)
  __builtin_prefetch(&slots_[i]);
  const std::uint16_t tag = tag_of(hash);
  const auto hash32 = static_cast<std::uint32_t>(hash);
  for (;;) {
    const std::uint16_t t = tags_[i];
    if (t == 0) return nullptr;
    if (t == tag) {
      Slot& slot = slots_[i];
      if (slot.hash == hash32 && equal_bytes(key_of(slot), key)) return &slot.cell;
    }
    i = next(i);
  }
}

void KeyTable::prefetch(std::string_view key) const {
  if (size_ == 0) return;
  const std::size_t i = home_of(static_cast<std::uint32_t>(hash_bytes(key)));
  __builtin_prefetch(&tags_[i]);
  __builtin_prefetch(&slots_[i]);
}

bool KeyTable::erase(std::string_view key) {
  StateCell* cell = find(key);
  if (cell == nullptr) return false;
  // The cell is the slot's first member.
  static_assert(offsetof(Slot, cell) == 0);
  const auto* slot = reinterpret_cast<const Slot*>(cell);
  erase_at(static_cast<std::size_t>(slot - slots_));
  return true;
}

StateCell* KeyTable::insert(std::string_view key, const StateCell& cell) {
  if (size_ >= max_keys_ || key.empty() || key.size() > UINT32_MAX) return nullptr;
  if (will_grow(1)) rehash(grown(capacity_));
  const std::uint64_t hash = hash_bytes(key);
  const std::uint16_t tag = tag_of(hash);
  const auto hash32 = static_cast<std::uint32_t>(hash);
  std::size_t i = home_of(hash32);
  for (; tags_[i] != 0; i = next(i)) {
    if (tags_[i] == tag && slots_[i].hash == hash32 && equal_bytes(key_of(slots_[i]), key)) {
      return nullptr;
    }
  }
  Slot* slot = &slots_[i];
  slot->cell = cell;
  slot->hash = hash32;
  slot->key_bytes = static_cast<std::uint32_t>(key.size());
  if (key.size() <= kInlineKeyBytes) {
    std::memcpy(slot->key, key.data(), key.size());
  } else {
    char* copy = new char[key.size()];
    std::memcpy(copy, key.data(), key.size());
    std::memcpy(slot->key, &copy, sizeof(copy));
    heap_key_bytes_ += key.size();
  }
  tags_[i] = tag;
  ++size_;
  return &slot->cell;
}

void KeyTable::reserve(std::size_t more) {
  if (!will_grow(more)) return;
  std::size_t capacity = grown(capacity_);
  while (size_ + more > max_load(capacity)) capacity = grown(capacity);
  rehash(capacity);
}

void KeyTable::rehash(std::size_t capacity) {
  assert(capacity >= kFirstCapacity && capacity > size_);
  // Zeroed memory is all empty tags and a valid array of empty slots.
  const Block tags_block = allocate_zeroed(capacity * sizeof(std::uint16_t));
  Block slots_block;
  try {
    slots_block = allocate_zeroed(capacity * sizeof(Slot));
  } catch (...) {
    std::free(tags_block.base);
    throw;
  }
  auto* tags = static_cast<std::uint16_t*>(tags_block.data);
  auto* slots = static_cast<Slot*>(slots_block.data);
  for (std::size_t from = 0; from < capacity_; ++from) {
    if (tags_[from] == 0) continue;
    std::size_t to = home_of(slots_[from].hash, capacity);
    while (tags[to] != 0) to = to + 1 == capacity ? 0 : to + 1;
    // Slots are trivially copyable (the heap key pointer moves with them).
    std::memcpy(static_cast<void*>(&slots[to]), &slots_[from], sizeof(Slot));
    tags[to] = tags_[from];
  }
  std::free(tags_block_.base);
  std::free(slots_block_.base);
  tags_block_ = tags_block;
  slots_block_ = slots_block;
  tags_ = tags;
  slots_ = slots;
  capacity_ = capacity;
  sweep_cursor_ = 0;
  // A stride coprime to the capacity visits every slot once per pass; near
  // capacity / golden ratio, consecutive visits land far apart.
  sweep_stride_ = static_cast<std::size_t>(static_cast<double>(capacity) * 0.6180339887) | 1;
  while (std::gcd(sweep_stride_, capacity) != 1) sweep_stride_ += 2;
}

void KeyTable::erase_at(std::size_t hole) {
  if (slots_[hole].key_bytes > kInlineKeyBytes) {
    delete[] heap_key(slots_[hole].key);
    heap_key_bytes_ -= slots_[hole].key_bytes;
  }
  // Backward-shift deletion: move each later entry of the run into the hole
  // unless its home lies cyclically in (hole, j], where it must stay.
  for (std::size_t j = next(hole); tags_[j] != 0; j = next(j)) {
    const std::size_t home = home_of(slots_[j].hash);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    std::memcpy(static_cast<void*>(&slots_[hole]), &slots_[j], sizeof(Slot));
    tags_[hole] = tags_[j];
    hole = j;
  }
  tags_[hole] = 0;
  slots_[hole].key_bytes = 0;
  slots_[hole].hash = 0;
  --size_;
}

std::size_t KeyTable::sweep(std::size_t max_visits, const EvictPredicate& evict) {
  if (size_ == 0) return 0;
  std::size_t visited = 0;
  std::size_t erased = 0;
  // Empty slots count too, a little, so a sparse table costs no more per call.
  const std::size_t max_walk = std::min(capacity_, 4 * max_visits + 64);
  for (std::size_t walked = 0; walked < max_walk && visited < max_visits; ++walked) {
    const std::size_t i = sweep_cursor_;
    if (tags_[i] != 0) {
      ++visited;
      const Slot& slot = slots_[i];
      if (evict(key_of(slot), slot.cell)) {
        erase_at(i);
        ++erased;
        // A later entry may have moved into slot i: look at it again.
        if (tags_[i] != 0) continue;
      }
    }
    sweep_cursor_ = i + sweep_stride_;
    if (sweep_cursor_ >= capacity_) sweep_cursor_ -= capacity_;
  }
  return erased;
}

std::size_t KeyTable::longest_run() const {
  if (size_ == 0) return 0;
  if (size_ == capacity_) return capacity_;
  // Start just after an empty slot so no run is split by the wrap.
  std::size_t start = 0;
  while (tags_[start] != 0) ++start;
  std::size_t longest = 0, run = 0;
  for (std::size_t k = 1; k <= capacity_; ++k) {
    const std::size_t i = (start + k) % capacity_;
    run = tags_[i] != 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

std::size_t KeyTable::memory_bytes() const {
  return capacity_ * (sizeof(Slot) + sizeof(std::uint16_t)) + heap_key_bytes_;
}

}  // namespace rlimit::core
