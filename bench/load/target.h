// What the load generator drives: one connection to one system under test
// (rlimitd through libclient, Redis through hiredis, or a raw socket echo),
// owned by one client thread. A request carries one check, or a batch of
// checks answered together in one round trip.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace rlimit::bench {

// What a request's checks came back as.
struct Tally {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t failed = 0;  // no decision (unreachable, timeout, error)
  Tally& operator+=(const Tally& o) {
    allowed += o.allowed;
    denied += o.denied;
    failed += o.failed;
    return *this;
  }
};

// The limit every system enforces, so they do the same work: `limit` per
// `period_ms`, holding at most `burst`.
struct LimitSpec {
  std::uint64_t limit = 1'000'000'000;
  std::uint64_t period_ms = 1000;
  std::uint64_t burst = 1'000'000'000;
};

class Target {
 public:
  virtual ~Target() = default;

  // Connects (and anything else to do before the clock starts). Returns an
  // empty string, or why it cannot run.
  virtual std::string open() = 0;

  // One synchronous request for the checks of `keys`, as an application
  // calls it (the default sends and waits).
  virtual Tally call(std::span<const std::uint64_t> keys) {
    send(keys);
    return receive();
  }

  // Pipelining: queue a request (sent at the latest by the next receive()),
  // and wait for the oldest request's answer.
  virtual void send(std::span<const std::uint64_t> keys) = 0;
  virtual Tally receive() = 0;
};

// Makes client `index`'s target (each client thread has its own).
using TargetFactory = std::function<std::unique_ptr<Target>(int index)>;

}  // namespace rlimit::bench
