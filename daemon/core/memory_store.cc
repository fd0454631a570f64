#include "core/memory_store.h"

#include <string_view>

namespace rlimit::core {
namespace {

std::uint64_t digits(std::uint64_t v) {
  std::uint64_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// A RESP bulk string of `len` bytes: "$<len>\r\n<bytes>\r\n".
std::uint64_t bulk_bytes(std::uint64_t len) { return 1 + digits(len) + 2 + len + 2; }
// An array header of `n` elements: "*<n>\r\n".
std::uint64_t array_bytes(std::uint64_t n) { return 1 + digits(n) + 2; }
// A field as the shell encodes it: 16 hex digits of incarnation + origin.
std::uint64_t field_bytes(const std::string& origin) { return 16 + origin.size(); }

}  // namespace

StoreKey MemoryStore::read(const std::string& key, const Key& state, std::uint64_t& bytes_in) {
  StoreKey out;
  out.key = key;
  bytes_in += array_bytes(2 * state.counters.size());
  for (const auto& [id, consumed] : state.counters) {
    out.entries.push_back({id.first, id.second, consumed});
    bytes_in += bulk_bytes(field_bytes(id.first)) + bulk_bytes(digits(consumed));
  }
  return out;
}

StoreResult MemoryStore::apply(const StoreBatch& batch, TimeUs now) {
  StoreResult result;
  result.id = batch.id;
  result.round_trips = 1;
  static const Key kEmpty;
  for (const StoreWrite& write : batch.writes) {
    ++result.commands;
    // EVALSHA sha 1 key ttl field value ...
    result.bytes_out += array_bytes(5 + 2 * write.entries.size()) + bulk_bytes(7) + bulk_bytes(40) +
                        bulk_bytes(1) + bulk_bytes(write.key.size()) +
                        bulk_bytes(digits(static_cast<std::uint64_t>(write.ttl_ms)));
    Key& state = keys_[write.key];
    if (state.expires_us <= now) state.counters.clear();
    for (const StoreEntry& e : write.entries) {
      result.bytes_out += bulk_bytes(field_bytes(e.origin)) + bulk_bytes(digits(e.consumed));
      std::uint64_t& value = state.counters[{e.origin, e.incarnation}];
      if (e.consumed > value) value = e.consumed;
    }
    state.expires_us = now + write.ttl_ms * 1000;
    result.keys.push_back(read(write.key, state, result.bytes_in));
  }
  for (const std::string& key : batch.reads) {
    ++result.commands;
    result.bytes_out += array_bytes(2) + bulk_bytes(7) + bulk_bytes(key.size());  // HGETALL key
    const auto it = keys_.find(key);
    const bool live = it != keys_.end() && it->second.expires_us > now;
    result.keys.push_back(read(key, live ? it->second : kEmpty, result.bytes_in));
  }
  return result;
}

std::size_t MemoryStore::live_keys(TimeUs now) {
  for (auto it = keys_.begin(); it != keys_.end();) {
    it = it->second.expires_us <= now ? keys_.erase(it) : std::next(it);
  }
  return keys_.size();
}

std::uint64_t MemoryStore::counter(const std::string& key, const std::string& origin,
                                   std::uint64_t incarnation, TimeUs now) const {
  const auto it = keys_.find(key);
  if (it == keys_.end() || it->second.expires_us <= now) return 0;
  const auto c = it->second.counters.find({origin, incarnation});
  return c == it->second.counters.end() ? 0 : c->second;
}

}  // namespace rlimit::core
