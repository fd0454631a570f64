// Test helper: runs an io_context until a condition holds or a deadline
// passes, so no socket test can hang.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace rlimit::shell::testing {

// Runs handlers until `done()` is true; false if `limit` passed first.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Runs handlers for `duration` (to show that something does NOT happen).
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds duration) {
  run_until(
      io, [] { return false; }, duration);
}

}  // namespace rlimit::shell::testing
