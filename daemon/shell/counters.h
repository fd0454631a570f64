// The shell's own counters (the core keeps its LimiterStats): what the daemon
// saw on its sockets, which bounds were hit, which inputs were bad. Reported
// by the status request under these snake_case names. Plain data owned by the
// server; single-threaded like the event loop that bumps it.
#pragma once

#include <cstdint>
#include <string_view>

namespace rlimit::shell {

struct ShellCounters {
  // Connections.
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_rejected = 0;  // over max_connections: closed at once
  std::uint64_t connections_open = 0;      // a gauge: sessions alive now
  std::uint64_t accept_errors = 0;
  std::uint64_t read_errors = 0;               // other than a clean close by the peer
  std::uint64_t write_errors = 0;              // peer gone or not reading at shutdown
  std::uint64_t connections_force_closed = 0;  // still busy after shutdown_grace_us
  // Traffic.
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t check_requests = 0;
  std::uint64_t status_requests = 0;
  // Bad input and bounds hit (each also answered with an Error or INVALID).
  std::uint64_t unsupported_version = 0;
  std::uint64_t malformed_frames = 0;
  std::uint64_t frames_too_large = 0;
  std::uint64_t unknown_message_types = 0;
  std::uint64_t too_many_checks = 0;
  std::uint64_t invalid_checks = 0;       // rejected by the shell before the core
  std::uint64_t responses_too_large = 0;  // answer above max_frame_bytes: Error sent
  std::uint64_t truncated_frames = 0;     // peer closed mid-frame
  std::uint64_t session_failures = 0;     // a session ended by an exception
  // Housekeeping.
  std::uint64_t sweeps = 0;
  std::uint64_t reloads = 0;          // SIGHUP reloads that installed new rules
  std::uint64_t reload_failures = 0;  // SIGHUP reloads rejected (old rules kept)
};

// Calls f(name, value) for every counter, in declaration order.
template <typename F>
void for_each_counter(const ShellCounters& c, F&& f) {
  // Adding a field without listing it here would hide it from status.
  static_assert(sizeof(ShellCounters) == 24 * sizeof(std::uint64_t),
                "list every ShellCounters field in for_each_counter");
  f(std::string_view("connections_accepted"), c.connections_accepted);
  f(std::string_view("connections_rejected"), c.connections_rejected);
  f(std::string_view("connections_open"), c.connections_open);
  f(std::string_view("accept_errors"), c.accept_errors);
  f(std::string_view("read_errors"), c.read_errors);
  f(std::string_view("write_errors"), c.write_errors);
  f(std::string_view("connections_force_closed"), c.connections_force_closed);
  f(std::string_view("bytes_received"), c.bytes_received);
  f(std::string_view("bytes_sent"), c.bytes_sent);
  f(std::string_view("frames_received"), c.frames_received);
  f(std::string_view("check_requests"), c.check_requests);
  f(std::string_view("status_requests"), c.status_requests);
  f(std::string_view("unsupported_version"), c.unsupported_version);
  f(std::string_view("malformed_frames"), c.malformed_frames);
  f(std::string_view("frames_too_large"), c.frames_too_large);
  f(std::string_view("unknown_message_types"), c.unknown_message_types);
  f(std::string_view("too_many_checks"), c.too_many_checks);
  f(std::string_view("invalid_checks"), c.invalid_checks);
  f(std::string_view("responses_too_large"), c.responses_too_large);
  f(std::string_view("truncated_frames"), c.truncated_frames);
  f(std::string_view("session_failures"), c.session_failures);
  f(std::string_view("sweeps"), c.sweeps);
  f(std::string_view("reloads"), c.reloads);
  f(std::string_view("reload_failures"), c.reload_failures);
}

}  // namespace rlimit::shell
