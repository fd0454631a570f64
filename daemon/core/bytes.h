// Byte-string equality and copy for the short strings of the hot path
// (descriptor values, bucket keys of 20-40 bytes), inlined: a call to memcmp
// or memcpy costs more than the work itself at these lengths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace rlimit::core {

inline bool equal_bytes(const char* a, const char* b, std::size_t n) {
  const auto load64 = [](const char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  const auto load32 = [](const char* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  if (n >= 8) {
    // Whole words, then the last (possibly overlapping) word.
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (load64(a + i) != load64(b + i)) return false;
    }
    return load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Copies `n` bytes from `from` to `to` (which do not overlap).
inline void copy_bytes(char* to, const char* from, std::size_t n) {
  if (n > 16) {
    std::memcpy(to, from, n);
  } else if (n >= 8) {
    // Two (possibly overlapping) words.
    std::uint64_t head, tail;
    std::memcpy(&head, from, 8);
    std::memcpy(&tail, from + n - 8, 8);
    std::memcpy(to, &head, 8);
    std::memcpy(to + n - 8, &tail, 8);
  } else if (n >= 4) {
    std::uint32_t head, tail;
    std::memcpy(&head, from, 4);
    std::memcpy(&tail, from + n - 4, 4);
    std::memcpy(to, &head, 4);
    std::memcpy(to + n - 4, &tail, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) to[i] = from[i];
  }
}

inline bool equal_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && equal_bytes(a.data(), b.data(), a.size());
}

}  // namespace rlimit::core
