// What the cluster service needs from a peer transport (UDP gossip or TCP
// mesh): bind the peer socket, hand every authenticated payload received to a
// handler, and send payloads to peers named by "host:port". The transport
// seals and opens the envelope (shell/envelope.h) and counts what it refuses
// (PeerCounters); it knows nothing of what the payloads mean.
//
// Transports run on one io_context thread and are not thread-safe. They keep
// themselves alive while their coroutines run, so destroying the handle is
// safe at any time; it stops the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/time.h"

namespace rlimit::shell {

// Mesh frames above this are garbage (an envelope holds one PeerMessage of at
// most mtu_bytes); the connection that sent one is closed.
inline constexpr std::uint32_t kMaxPeerFrameBytes = 64 * 1024;

struct PeerTransportOptions {
  std::string bind;  // host:port; port 0 picks a free one (see local_address)
  // Gossip: datagrams above this are refused on receipt (and never sent).
  std::uint32_t mtu_bytes = 1400;
  // Mesh.
  core::TimeUs reconnect_backoff_min_us = 50'000;
  core::TimeUs reconnect_backoff_max_us = 5'000'000;
  std::uint32_t max_peer_queue_bytes = 4 * 1024 * 1024;  // per outgoing connection
  std::uint32_t max_incoming_connections = 4096 + 64;
};

class PeerTransport {
 public:
  // Called with each payload that passed the envelope; the view is valid only
  // during the call. Never called after stop().
  using PayloadHandler = std::function<void(std::string_view payload)>;

  virtual ~PeerTransport() = default;

  // Seals `payload` and sends it to `address` (host:port). Never blocks: what
  // cannot be sent now is queued (bounded) or dropped, and counted.
  virtual void send(const std::string& address, std::string_view payload) = 0;

  // Bytes accepted by send() but not yet handed to the kernel.
  virtual std::size_t queued_bytes() const = 0;

  // The address the socket is bound to, "ip:port" (the real port when the
  // bind asked for port 0).
  virtual std::string local_address() const = 0;

  // Closes every socket; pending work ends soon after. Idempotent.
  virtual void stop() = 0;
};

// What opening a transport gives: a running transport, or why not.
struct PeerTransportOpen {
  std::unique_ptr<PeerTransport> transport;
  std::string error;
};

}  // namespace rlimit::shell
