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
  std::uint64_t write_timeouts = 0;  // closed: an answer not taken within write_timeout
  std::uint64_t idle_timeouts = 0;   // closed: nothing received within idle_timeout
  // Traffic.
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t check_requests = 0;
  std::uint64_t status_requests = 0;
  std::uint64_t members_requests = 0;
  std::uint64_t release_requests = 0;  // lease release or extend frames
  std::uint64_t reset_requests = 0;    // reset frames, refused ones included
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
  std::uint64_t leases_malformed = 0;     // lease tokens that did not decode
  std::uint64_t leases_forged = 0;        // well-formed tokens this process did not issue
  std::uint64_t resets_refused = 0;       // allow_reset = false: Error NOT_ALLOWED
  // Housekeeping.
  std::uint64_t sweeps = 0;
  std::uint64_t reloads = 0;          // SIGHUP reloads that installed new rules
  std::uint64_t reload_failures = 0;  // SIGHUP reloads rejected (old rules kept)
  // A gauge: the daemon's own CPU use in permille of one core, smoothed,
  // sampled every sweep (load_meter.h); what elastic rules read.
  std::uint64_t load_permille = 0;
  // Busy polling ([daemon] busy_poll, event_loop.h): poll windows that found
  // work (a sleep and a wake-up avoided), windows that ran out (then slept),
  // and the CPU time spent polling, which load_permille leaves out.
  std::uint64_t busy_poll_hits = 0;
  std::uint64_t busy_poll_misses = 0;
  std::uint64_t busy_poll_cpu_us = 0;
  // The HTTP face ([http], http_server.h): connections, requests by route,
  // and what was refused (each answered with its status and a message).
  std::uint64_t http_connections_accepted = 0;
  std::uint64_t http_connections_rejected = 0;  // over [http] max_connections: closed at once
  std::uint64_t http_connections_open = 0;      // a gauge
  std::uint64_t http_requests = 0;              // every request read whole
  std::uint64_t http_checks = 0;                // /v1/check requests decided
  std::uint64_t http_denied = 0;                // of those, answered with the deny status
  std::uint64_t http_bad_requests = 0;          // 400: a check that does not map (message says why)
  std::uint64_t http_not_found = 0;             // 404 and 405
  std::uint64_t http_too_large = 0;             // 413 body or 431 header over its bound
  std::uint64_t http_timeouts = 0;              // closed: request not whole within request_timeout
  std::uint64_t http_malformed = 0;             // bytes that are not HTTP/1.1: 400 and closed
};

// Calls f(name, value) for every counter, in declaration order.
template <typename F>
void for_each_counter(const ShellCounters& c, F&& f) {
  // Adding a field without listing it here would hide it from status.
  static_assert(sizeof(ShellCounters) == 47 * sizeof(std::uint64_t),
                "list every ShellCounters field in for_each_counter");
  f(std::string_view("connections_accepted"), c.connections_accepted);
  f(std::string_view("connections_rejected"), c.connections_rejected);
  f(std::string_view("connections_open"), c.connections_open);
  f(std::string_view("accept_errors"), c.accept_errors);
  f(std::string_view("read_errors"), c.read_errors);
  f(std::string_view("write_errors"), c.write_errors);
  f(std::string_view("connections_force_closed"), c.connections_force_closed);
  f(std::string_view("write_timeouts"), c.write_timeouts);
  f(std::string_view("idle_timeouts"), c.idle_timeouts);
  f(std::string_view("bytes_received"), c.bytes_received);
  f(std::string_view("bytes_sent"), c.bytes_sent);
  f(std::string_view("frames_received"), c.frames_received);
  f(std::string_view("check_requests"), c.check_requests);
  f(std::string_view("status_requests"), c.status_requests);
  f(std::string_view("members_requests"), c.members_requests);
  f(std::string_view("release_requests"), c.release_requests);
  f(std::string_view("reset_requests"), c.reset_requests);
  f(std::string_view("unsupported_version"), c.unsupported_version);
  f(std::string_view("malformed_frames"), c.malformed_frames);
  f(std::string_view("frames_too_large"), c.frames_too_large);
  f(std::string_view("unknown_message_types"), c.unknown_message_types);
  f(std::string_view("too_many_checks"), c.too_many_checks);
  f(std::string_view("invalid_checks"), c.invalid_checks);
  f(std::string_view("responses_too_large"), c.responses_too_large);
  f(std::string_view("truncated_frames"), c.truncated_frames);
  f(std::string_view("session_failures"), c.session_failures);
  f(std::string_view("leases_malformed"), c.leases_malformed);
  f(std::string_view("leases_forged"), c.leases_forged);
  f(std::string_view("resets_refused"), c.resets_refused);
  f(std::string_view("sweeps"), c.sweeps);
  f(std::string_view("reloads"), c.reloads);
  f(std::string_view("reload_failures"), c.reload_failures);
  f(std::string_view("load_permille"), c.load_permille);
  f(std::string_view("busy_poll_hits"), c.busy_poll_hits);
  f(std::string_view("busy_poll_misses"), c.busy_poll_misses);
  f(std::string_view("busy_poll_cpu_us"), c.busy_poll_cpu_us);
  f(std::string_view("http_connections_accepted"), c.http_connections_accepted);
  f(std::string_view("http_connections_rejected"), c.http_connections_rejected);
  f(std::string_view("http_connections_open"), c.http_connections_open);
  f(std::string_view("http_requests"), c.http_requests);
  f(std::string_view("http_checks"), c.http_checks);
  f(std::string_view("http_denied"), c.http_denied);
  f(std::string_view("http_bad_requests"), c.http_bad_requests);
  f(std::string_view("http_not_found"), c.http_not_found);
  f(std::string_view("http_too_large"), c.http_too_large);
  f(std::string_view("http_timeouts"), c.http_timeouts);
  f(std::string_view("http_malformed"), c.http_malformed);
}

// The peer transports' counters (gossip UDP or mesh TCP): what reached the
// peer socket and what was refused before the core saw it. The core's own
// ClusterStats and MembershipStats are reported beside these. Owned by the
// cluster service; single-threaded like the loop.
struct PeerCounters {
  // Traffic: envelopes (datagrams, or frames on mesh connections).
  std::uint64_t peer_packets_received = 0;  // every datagram or frame read
  std::uint64_t peer_bytes_received = 0;
  std::uint64_t peer_packets_sent = 0;  // handed to the kernel
  std::uint64_t peer_bytes_sent = 0;
  // Refused on receipt, and dropped (a mesh connection is also closed).
  std::uint64_t peer_bad_mac = 0;      // MAC mismatch: forged, damaged, or a secret not ours
  std::uint64_t peer_unknown_key = 0;  // signed with a key id this keyring lacks
  std::uint64_t peer_malformed = 0;    // too short or bad magic: not an rlimit envelope
  std::uint64_t peer_oversize = 0;     // datagram above mtu_bytes, or frame above 64 KiB
  // Send side.
  std::uint64_t peer_send_errors = 0;         // the kernel refused a datagram or a write failed
  std::uint64_t peer_send_dropped = 0;        // UDP send buffer full: datagram dropped
  std::uint64_t peer_resolve_failures = 0;    // a peer address did not resolve
  std::uint64_t peer_unroutable_dropped = 0;  // unresolvable address, or a mesh peer given up on
  std::uint64_t peer_queue_overflow = 0;      // mesh: queued frames dropped, oldest first
  std::uint64_t peer_receive_errors = 0;      // socket errors on receive
  // Mesh connections.
  std::uint64_t peer_connects = 0;          // outgoing connections established
  std::uint64_t peer_connect_failures = 0;  // outgoing attempts that failed (then back off)
  std::uint64_t peer_connections_accepted = 0;
  std::uint64_t peer_connections_rejected = 0;  // incoming over the bound: closed at once
  std::uint64_t peer_disconnects_garbage = 0;   // connections we closed for bad input
  std::uint64_t peer_connections_open = 0;      // a gauge: both directions
};

// Calls f(name, value) for every PeerCounters field, in declaration order.
template <typename F>
void for_each_peer_counter(const PeerCounters& c, F&& f) {
  static_assert(sizeof(PeerCounters) == 20 * sizeof(std::uint64_t),
                "list every PeerCounters field in for_each_peer_counter");
  f(std::string_view("peer_packets_received"), c.peer_packets_received);
  f(std::string_view("peer_bytes_received"), c.peer_bytes_received);
  f(std::string_view("peer_packets_sent"), c.peer_packets_sent);
  f(std::string_view("peer_bytes_sent"), c.peer_bytes_sent);
  f(std::string_view("peer_bad_mac"), c.peer_bad_mac);
  f(std::string_view("peer_unknown_key"), c.peer_unknown_key);
  f(std::string_view("peer_malformed"), c.peer_malformed);
  f(std::string_view("peer_oversize"), c.peer_oversize);
  f(std::string_view("peer_send_errors"), c.peer_send_errors);
  f(std::string_view("peer_send_dropped"), c.peer_send_dropped);
  f(std::string_view("peer_resolve_failures"), c.peer_resolve_failures);
  f(std::string_view("peer_unroutable_dropped"), c.peer_unroutable_dropped);
  f(std::string_view("peer_queue_overflow"), c.peer_queue_overflow);
  f(std::string_view("peer_receive_errors"), c.peer_receive_errors);
  f(std::string_view("peer_connects"), c.peer_connects);
  f(std::string_view("peer_connect_failures"), c.peer_connect_failures);
  f(std::string_view("peer_connections_accepted"), c.peer_connections_accepted);
  f(std::string_view("peer_connections_rejected"), c.peer_connections_rejected);
  f(std::string_view("peer_disconnects_garbage"), c.peer_disconnects_garbage);
  f(std::string_view("peer_connections_open"), c.peer_connections_open);
}

}  // namespace rlimit::shell
