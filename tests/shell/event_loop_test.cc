// The event loop with and without busy polling, on real Asio timers. Every
// wait is bounded (the longest timer is 2 s, and a loop that failed to stop
// would show as a run that took that long), and the margins are wide: a
// timer due inside a window is due 50 ms into a 500 ms one, and one due
// after a window is 300 ms away from a 10 ms one.
#include "shell/event_loop.h"

#include <gtest/gtest.h>
#include <time.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kLongWindowUs = 500'000;

TEST(EventLoopTest, WithoutAWindowItRunsAndNeverPolls) {
  asio::io_context io;
  asio::steady_timer timer(io, milliseconds(2));
  bool fired = false;
  timer.async_wait([&](auto) { fired = true; });
  ShellCounters counters;
  run_event_loop(io, 0, counters);
  EXPECT_TRUE(fired);
  EXPECT_EQ(counters.busy_poll_hits, 0u);
  EXPECT_EQ(counters.busy_poll_misses, 0u);
  EXPECT_EQ(counters.busy_poll_cpu_us, 0u);
}

TEST(EventLoopTest, AWindowThatFindsNothingSleepsUntilTheNextEvent) {
  asio::io_context io;
  asio::steady_timer timer(io, milliseconds(300));
  bool fired = false;
  timer.async_wait([&](auto) { fired = true; });
  ShellCounters counters;
  run_event_loop(io, 10'000, counters);
  EXPECT_TRUE(fired);
  EXPECT_EQ(counters.busy_poll_hits, 0u);
  EXPECT_EQ(counters.busy_poll_misses, 1u);
  EXPECT_GT(counters.busy_poll_cpu_us, 0u);  // the window polled, and that is counted
}

TEST(EventLoopTest, AWindowThatFindsWorkRunsItWithoutSleeping) {
  asio::io_context io;
  asio::steady_timer timer(io, milliseconds(50));
  bool fired = false;
  timer.async_wait([&](auto) { fired = true; });
  ShellCounters counters;
  run_event_loop(io, kLongWindowUs, counters);
  EXPECT_TRUE(fired);
  EXPECT_EQ(counters.busy_poll_hits, 1u);
  EXPECT_EQ(counters.busy_poll_misses, 0u);
}

// The work a window finds is not polling: load_permille must still see it.
TEST(EventLoopTest, TheWorkAWindowFindsIsNotCountedAsPolling) {
  asio::io_context io;
  asio::steady_timer timer(io, milliseconds(50));
  constexpr std::int64_t kBurnUs = 200'000;
  timer.async_wait([&](auto) {
    timespec start{}, now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do {  // burn CPU: a handler with real work to do
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1'000'000 + (now.tv_nsec - start.tv_nsec) / 1'000 <
             kBurnUs);
  });
  ShellCounters counters;
  run_event_loop(io, kLongWindowUs, counters);
  EXPECT_EQ(counters.busy_poll_hits, 1u);
  // At most the 50 ms of polling before the timer was due, never the 200 ms
  // the handler burned.
  EXPECT_LT(counters.busy_poll_cpu_us, static_cast<std::uint64_t>(kBurnUs / 2));
}

TEST(EventLoopTest, StopEndsTheLoopWhileWorkIsStillPending) {
  asio::io_context io;
  asio::steady_timer stopper(io, milliseconds(50));
  asio::steady_timer later(io, milliseconds(2'000));
  stopper.async_wait([&](auto) { io.stop(); });
  bool later_fired = false;
  later.async_wait([&](auto) { later_fired = true; });
  ShellCounters counters;
  const Clock::time_point start = Clock::now();
  run_event_loop(io, kLongWindowUs, counters);
  EXPECT_LT(Clock::now() - start, milliseconds(1'000));
  EXPECT_FALSE(later_fired);
}

}  // namespace
}  // namespace rlimit::shell
