// Hashes whose values are the same on every build, host and version (unlike
// std::hash): for what nodes must agree on (a reset's epoch mark, a key's
// owners) or what must replay bit for bit (a share's dither, a rule's
// fingerprint). Not for defence against chosen keys.
#pragma once

#include <cstdint>
#include <string_view>

namespace rlimit::core {

// FNV-1a, 64 bits, continuing from `hash`.
constexpr std::uint64_t fnv1a(std::string_view bytes,
                              std::uint64_t hash = 14695981039346656037ull) {
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

// splitmix64's finaliser: every input bit reaches every output bit.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace rlimit::core
