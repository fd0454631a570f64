// The daemon's event loop, with optional busy polling.
//
// A request from a client on another CPU normally wakes this one from
// epoll_wait; on a VM whose idle vCPUs halt, that wake-up is most of a
// synchronous round trip (docs/performance.md, "Sync latency by placement").
// With a poll window, once the loop runs out of ready work it keeps asking
// the reactor for more (epoll_wait with no timeout, sched_yield() between
// asks, so a client sharing this CPU still runs at once) for up to the
// window before it sleeps. The window is read at every idle moment, so a
// reload changes it live. Single-threaded: runs on the thread that calls it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>

#include "shell/counters.h"

namespace rlimit::shell {

// Runs `io` until it stops or runs out of work, polling for `busy_poll_us`
// (0: never) whenever it goes idle; the busy_poll_* counters in `counters`
// say what the windows found and cost.
void run_event_loop(boost::asio::io_context& io, std::int64_t busy_poll_us,
                    ShellCounters& counters);

}  // namespace rlimit::shell
