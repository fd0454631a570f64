// The daemon's event loop, with optional busy polling.
//
// A request from a client on another CPU normally wakes this one from
// epoll_wait; on a VM whose idle vCPUs halt, that wake-up is most of a
// synchronous round trip (docs/performance.md, "Sync latency by placement").
// With a poll window, once the loop runs out of ready work it keeps asking
// the reactor for more (sched_yield(), then epoll_wait with a zero timeout)
// for up to the window before it sleeps. The yield lets a client that shares
// this CPU run, but polling still slows such a client down: a window is for
// a daemon with a CPU of its own. Without a window this is io.run(),
// unchanged. Single-threaded: runs on the thread that calls it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>

#include "shell/counters.h"

namespace rlimit::shell {

// Runs `io` until it stops or runs out of work, polling for `busy_poll_us`
// (0: never; read once, so a change needs a restart) whenever it goes idle.
// The busy_poll_* counters in `counters` say what the windows found and what
// the polling itself cost in CPU (the handlers a window finds not included).
void run_event_loop(boost::asio::io_context& io, std::int64_t busy_poll_us,
                    ShellCounters& counters);

}  // namespace rlimit::shell
