// Division by a divisor known in advance (a rule's limit), as a multiply.
//
// A 64-bit divide takes tens of cycles and was the largest single cost of a
// hot-key check after the key lookup: every verdict says when its bucket is
// full again, `ceil(deficit / limit)`. The rule's limit is fixed when rules
// are compiled, so its reciprocal is computed once there.
//
// With m = floor((2^64 - 1) / d) = ((2^64 - 1) - r) / d for r < d, the high
// word of n * m falls short of n / d by n (1 + r) / (d 2^64) < 1 for every
// 64-bit n: it is floor(n / d) or one less, and one compare corrects it.
// Plain value; safe to share between threads once built.
#pragma once

#include <cassert>
#include <cstdint>

namespace rlimit::core {

class Divider {
 public:
  Divider() = default;  // divides by 1
  explicit Divider(std::uint64_t divisor) : divisor_(divisor) {
    assert(divisor > 0);
    reciprocal_ = UINT64_MAX / divisor;
  }

  std::uint64_t divisor() const { return divisor_; }

  // floor(n / divisor).
  std::uint64_t quotient(std::uint64_t n) const {
    auto q = static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * reciprocal_) >> 64);
    if (n - q * divisor_ >= divisor_) ++q;
    return q;
  }
  // ceil(n / divisor).
  std::uint64_t quotient_rounded_up(std::uint64_t n) const {
    const std::uint64_t q = quotient(n);
    return q + (n - q * divisor_ != 0 ? 1 : 0);
  }

 private:
  std::uint64_t divisor_ = 1;
  std::uint64_t reciprocal_ = UINT64_MAX;  // floor((2^64 - 1) / divisor_)
};

}  // namespace rlimit::core
