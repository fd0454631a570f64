// The daemon's one clock for the core: the steady clock (monotonic, never
// steps), shifted once, at first use, so that it reads Unix time in
// microseconds. Only differences matter to most of the core, but the window
// algorithms (fixed_window, sliding_window) align their windows to this
// epoch: nodes whose wall clocks agree (NTP) then share window edges, and a
// window of "1m" starts on the minute. A wall clock stepped after start does
// not move it (restart the daemon to pick a step up). Thread-safe.
#pragma once

#include <chrono>

#include "core/time.h"

namespace rlimit::shell {

// The same for a steady-clock reading taken by the caller (who times
// something from it too: one clock read serves both).
inline core::TimeUs steady_now_us(std::chrono::steady_clock::time_point at) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  static const core::TimeUs offset_us =
      duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
      duration_cast<microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return duration_cast<microseconds>(at.time_since_epoch()).count() + offset_us;
}

inline core::TimeUs steady_now_us() { return steady_now_us(std::chrono::steady_clock::now()); }

// The system (wall) clock now, in microseconds since the Unix epoch: it
// follows steps, unlike steady_now_us. Only replay protection reads it (a
// peer message's sent_at_us is compared with the receiver's wall clock, so a
// node whose clock NTP corrected after start is judged by the corrected one).
inline core::TimeUs system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace rlimit::shell
