// The event loop with and without busy polling, on real Asio timers. Every
// wait is bounded: the longest timer is 2 s, and a loop that failed to stop
// would show as a run that took that long.
#include "shell/event_loop.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

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
  asio::steady_timer timer(io, milliseconds(30));
  bool fired = false;
  timer.async_wait([&](auto) { fired = true; });
  ShellCounters counters;
  run_event_loop(io, 1'000, counters);  // a 1 ms window, the timer 30 ms away
  EXPECT_TRUE(fired);
  EXPECT_EQ(counters.busy_poll_hits, 0u);
  EXPECT_EQ(counters.busy_poll_misses, 1u);
  EXPECT_GT(counters.busy_poll_cpu_us, 0u);  // the window polled, and that is counted
}

TEST(EventLoopTest, AWindowThatFindsWorkRunsItWithoutSleeping) {
  asio::io_context io;
  asio::steady_timer timer(io, milliseconds(1));
  bool fired = false;
  timer.async_wait([&](auto) { fired = true; });
  ShellCounters counters;
  run_event_loop(io, 10'000, counters);  // the timer is due inside the window
  EXPECT_TRUE(fired);
  EXPECT_EQ(counters.busy_poll_hits, 1u);
  EXPECT_EQ(counters.busy_poll_misses, 0u);
}

TEST(EventLoopTest, StopEndsTheLoopWhileWorkIsStillPending) {
  asio::io_context io;
  asio::steady_timer stopper(io, milliseconds(1));
  asio::steady_timer later(io, milliseconds(2'000));
  stopper.async_wait([&](auto) { io.stop(); });
  bool later_fired = false;
  later.async_wait([&](auto) { later_fired = true; });
  ShellCounters counters;
  const Clock::time_point start = Clock::now();
  run_event_loop(io, 10'000, counters);
  EXPECT_LT(Clock::now() - start, milliseconds(1'000));
  EXPECT_FALSE(later_fired);
}

}  // namespace
}  // namespace rlimit::shell
