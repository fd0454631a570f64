// The digest of a run: FNV-1a (64-bit) over every delivered payload and every
// decision, taken 8 bytes at a time (the tail byte by byte) so hashing keeps
// up with millions of datagrams. Two runs with equal digests delivered the
// same bytes at the same times and decided the same way.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace rlimit::sim {

class Digest {
 public:
  void mix(std::uint64_t word) {
    hash_ ^= word;
    hash_ *= kPrime;
  }
  void mix(std::string_view bytes) {
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      mix(word);
    }
    for (; i < bytes.size(); ++i) mix(static_cast<unsigned char>(bytes[i]));
    mix(bytes.size());
  }
  std::uint64_t value() const { return hash_; }

 private:
  static constexpr std::uint64_t kPrime = 1099511628211ull;
  std::uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace rlimit::sim
