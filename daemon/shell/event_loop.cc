#include "shell/event_loop.h"

#include <sched.h>
#include <time.h>

#include <chrono>

namespace rlimit::shell {
namespace {

// This thread's CPU time in microseconds: what a poll window cost, whether
// or not sched_yield() handed the CPU to someone else meanwhile.
std::int64_t thread_cpu_us() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
}

// Polls `io` for up to `window_us`. True when it found and ran work. Counts
// the CPU the polling took, up to the poll that found work: the handlers
// that poll ran are work, and load_permille must still see them.
bool poll_window(boost::asio::io_context& io, std::int64_t window_us, ShellCounters& counters) {
  using Clock = std::chrono::steady_clock;
  const std::int64_t cpu_start_us = thread_cpu_us();
  const Clock::time_point until = Clock::now() + std::chrono::microseconds(window_us);
  bool found = false;
  std::int64_t cpu_polling_us = cpu_start_us;  // the CPU clock when the last poll began
  while (!io.stopped()) {
    ::sched_yield();
    cpu_polling_us = thread_cpu_us();
    if (io.poll() > 0) {
      found = true;
      break;
    }
    if (Clock::now() >= until) break;
  }
  if (!found) cpu_polling_us = thread_cpu_us();
  if (cpu_polling_us > cpu_start_us) {
    counters.busy_poll_cpu_us += static_cast<std::uint64_t>(cpu_polling_us - cpu_start_us);
  }
  ++(found ? counters.busy_poll_hits : counters.busy_poll_misses);
  return found;
}

}  // namespace

void run_event_loop(boost::asio::io_context& io, std::int64_t busy_poll_us,
                    ShellCounters& counters) {
  if (busy_poll_us <= 0) {
    io.run();
    return;
  }
  for (;;) {
    // Everything ready now, then a window; sleep only if it finds nothing.
    if (io.poll() > 0) continue;
    if (io.stopped()) return;
    if (poll_window(io, busy_poll_us, counters)) continue;
    if (io.run_one() == 0) return;
  }
}

}  // namespace rlimit::shell
