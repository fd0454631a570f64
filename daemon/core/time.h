// Time as the core sees it: a count of microseconds on a monotonic clock that
// the caller reads and passes in. The core never reads a clock itself.
#pragma once

#include <cstdint>

namespace rlimit::core {

using TimeUs = std::int64_t;

inline constexpr std::int64_t kUsPerMs = 1000;
inline constexpr std::int64_t kUsPerSecond = 1000 * kUsPerMs;

}  // namespace rlimit::core
