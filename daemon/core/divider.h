// Division by a divisor known in advance (a rule's limit), as a multiply.
//
// A 64-bit divide takes tens of cycles and was the largest single cost of a
// hot-key check after the key lookup: every verdict says when its bucket is
// full again, `ceil(deficit / limit)`. The rule's limit is fixed when rules
// are compiled, so its reciprocal is computed once there.
//
// With m = floor((2^64 - 1) / d), the high word of n * m is floor(n / d) or
// one less for every n < 2^63 (the error n(1 + d) / (d 2^64) is below 1), and
// one compare corrects it. Plain value; thread-safe to share once built.
#pragma once

#include <cassert>
#include <cstdint>

namespace rlimit::core {

class Divider {
 public:
  Divider() = default;  // divides by 1
  explicit Divider(std::uint64_t divisor) : divisor_(divisor), magic_(UINT64_MAX / divisor) {
    assert(divisor > 0);
  }

  std::uint64_t divisor() const { return divisor_; }

  // floor(n / divisor) for n < 2^63.
  std::uint64_t quotient(std::uint64_t n) const {
    assert(n < (std::uint64_t{1} << 63));
    auto q = static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * magic_) >> 64);
    if (n - q * divisor_ >= divisor_) ++q;
    return q;
  }
  // ceil(n / divisor) for n < 2^63.
  std::uint64_t quotient_rounded_up(std::uint64_t n) const {
    const std::uint64_t q = quotient(n);
    return q + (n - q * divisor_ != 0 ? 1 : 0);
  }

 private:
  std::uint64_t divisor_ = 1;
  std::uint64_t magic_ = UINT64_MAX;
};

}  // namespace rlimit::core
