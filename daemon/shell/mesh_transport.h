// The mesh transport: a TCP listener on cluster.bind plus one outgoing TCP
// connection per peer address we send to. Frames are sealed envelopes with
// the 4-byte big-endian length of proto/wire/frame.h.
//
// Outgoing: connected lazily on the first send to an address, reconnected
// with capped exponential backoff (reconnect_backoff_min..max) while frames
// wait; each connection queues at most max_peer_queue_bytes, dropping the
// oldest frames past that (peer_queue_overflow: the core's anti-entropy
// repairs what they carried). A connection idle for a minute is closed, and
// so is the queue of a peer unreachable for a minute that nothing was sent to
// meanwhile (peer_unroutable_dropped).
// Incoming: frames are read, opened and handed to the handler; a connection
// that sends garbage (a frame above 64 KiB, an envelope that does not open)
// is counted and closed, and only that one. Frames read on outgoing
// connections are handled the same way, so the protocol is symmetric.
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

// Binds and listens (a bad or busy bind address is an error here) and starts
// accepting. `keyring` and `counters` must outlive the transport; the keyring
// may be replaced in place (a reload) between events.
PeerTransportOpen open_mesh_transport(boost::asio::io_context& io,
                                      const PeerTransportOptions& options, Keyring& keyring,
                                      PeerCounters& counters,
                                      PeerTransport::PayloadHandler handler);

}  // namespace rlimit::shell
