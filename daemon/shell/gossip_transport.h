// The gossip transport: one UDP socket bound to cluster.bind, one sealed
// PeerMessage per datagram. Receiving: a datagram above mtu_bytes, or one
// whose envelope does not open, is counted by reason (peer_oversize,
// peer_malformed, peer_unknown_key, peer_bad_mac) and dropped; the rest go to
// the handler. Sending is synchronous and non-blocking: UDP is lossy anyway,
// so a full kernel buffer drops the datagram (peer_send_dropped) instead of
// queueing it; the core's retransmissions and anti-entropy repair the loss.
// Peer addresses are resolved once and cached (names for 30 s, failures for
// 5 s); IP literals never touch the resolver.
//
// Single-threaded (the io_context's thread); see peer_transport.h.
#pragma once

#include "shell/counters.h"
#include "shell/envelope.h"
#include "shell/peer_transport.h"

namespace boost::asio {
class io_context;
}

namespace rlimit::shell {

// Binds the socket (a bad or busy bind address is an error here) and starts
// receiving. `keyring` and `counters` must outlive the transport; the keyring
// may be replaced in place (a reload) between events.
PeerTransportOpen open_gossip_transport(boost::asio::io_context& io,
                                        const PeerTransportOptions& options, Keyring& keyring,
                                        PeerCounters& counters,
                                        PeerTransport::PayloadHandler handler);

}  // namespace rlimit::shell
