// The daemon's one clock for the core: microseconds on std::chrono's steady
// clock (monotonic; its epoch is arbitrary, so only differences mean
// anything). Thread-safe.
#pragma once

#include <chrono>

#include "core/time.h"

namespace rlimit::shell {

inline core::TimeUs steady_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace rlimit::shell
