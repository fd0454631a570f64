#include "shell/mesh_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "shell/clock.h"
#include "shell/peer_io.h"
#include "wire/frame.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

// An outgoing connection nothing was sent on for this long is closed and its
// peer forgotten (members come and go; their connections should not pile up).
// A peer that cannot be reached and that nothing was sent to for as long has
// its queue dropped too: the core stopped talking to it (dead or gone).
constexpr std::chrono::seconds kIdleClose{60};
constexpr core::TimeUs kIdleCloseUs =
    std::chrono::duration_cast<std::chrono::microseconds>(kIdleClose).count();
// A connect that has not completed by then is abandoned (and retried after
// the backoff) rather than left to the kernel's minutes of SYN retries.
constexpr std::chrono::seconds kConnectTimeout{3};
// Frames are gathered into writes of about this size.
constexpr std::size_t kWriteBatchBytes = std::size_t{64} * 1024;
// Read buffers start at this and grow to one whole frame only when needed.
constexpr std::size_t kReadChunkBytes = std::size_t{16} * 1024;
// After an accept error (EMFILE and the like) the connection stays queued;
// retrying at once would spin.
constexpr std::chrono::milliseconds kAcceptBackoff{50};

class Mesh : public std::enable_shared_from_this<Mesh> {
 public:
  Mesh(asio::io_context& io, const PeerTransportOptions& options, Keyring& keyring,
       PeerCounters& counters, PeerTransport::PayloadHandler handler)
      : io_(io),
        options_(options),
        keyring_(keyring),
        counters_(counters),
        handler_(std::move(handler)),
        acceptor_(io) {}

  bool open(std::string& error);
  void start();
  void send(const std::string& address, std::string_view payload);
  std::size_t queued_bytes() const { return queued_total_; }
  std::string local_address() const;
  void stop();

 private:
  // One TCP connection, accepted or dialed.
  struct Stream {
    explicit Stream(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::string peer;  // for logs: the address dialed, or the remote endpoint
    std::uint64_t id = 0;
    bool incoming = false;
    bool counted = false;  // included in peer_connections_open
  };

  // The sending side towards one peer address.
  struct Peer {
    explicit Peer(asio::io_context& io) : resolver(io), wake(io), retry(io) {}
    std::string address;
    std::shared_ptr<Stream> stream;  // null or closed: not connected
    std::deque<std::string> queue;   // framed envelopes, oldest first
    std::size_t queued_bytes = 0;    // in `queue`
    core::TimeUs last_send_us = 0;   // when send() last queued a frame
    tcp::resolver resolver;
    asio::steady_timer wake;   // send() cancels it to wake an idle writer
    asio::steady_timer retry;  // reconnect backoff
    bool waiting = false;      // the writer waits on `wake`
  };

  void spawn(std::string_view what, asio::awaitable<void> task);
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> read_loop(std::shared_ptr<Stream> stream);
  asio::awaitable<void> write_loop(std::shared_ptr<Peer> peer);
  asio::awaitable<bool> connect(Peer& peer);
  std::shared_ptr<Stream> add_stream(tcp::socket socket, std::string peer, bool incoming);
  void close_stream(Stream& stream);
  // Closes a stream that sent garbage, counting and logging why.
  void refuse(Stream& stream, const std::string& why);

  asio::io_context& io_;
  const PeerTransportOptions options_;
  Keyring& keyring_;
  PeerCounters& counters_;
  PeerTransport::PayloadHandler handler_;
  tcp::acceptor acceptor_;
  std::unordered_map<std::string, std::shared_ptr<Peer>> peers_;
  std::unordered_map<std::uint64_t, std::weak_ptr<Stream>> streams_;
  std::uint64_t next_stream_id_ = 1;
  std::size_t incoming_open_ = 0;
  std::size_t queued_total_ = 0;  // queued plus being written, every peer
  std::string sealed_;            // scratch for send
  bool stopped_ = false;
  peer_io::ThrottledWarning refused_warning_;
  peer_io::ThrottledWarning connect_warning_;
};

bool Mesh::open(std::string& error) {
  const std::optional<tcp::endpoint> endpoint =
      peer_io::resolve_bind<tcp>(io_, options_.bind, error);
  if (!endpoint) return false;
  boost::system::error_code code;
  acceptor_.open(endpoint->protocol(), code);
  // A restarted daemon must not wait out its predecessor's TIME_WAITs.
  if (!code) acceptor_.set_option(tcp::acceptor::reuse_address(true), code);
  if (!code) acceptor_.bind(*endpoint, code);
  if (!code) acceptor_.listen(asio::socket_base::max_listen_connections, code);
  if (code) {
    error = "cannot listen on TCP " + options_.bind + ": " + code.message();
    return false;
  }
  return true;
}

void Mesh::start() { spawn("mesh accept loop", accept_loop()); }

void Mesh::spawn(std::string_view what, asio::awaitable<void> task) {
  // The completion handler owns `self`, so the transport outlives every
  // coroutine it started, even after its handle is gone.
  auto self = shared_from_this();
  asio::co_spawn(io_, std::move(task), [self, what](const std::exception_ptr& failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      spdlog::error("{} failed: {}", what, e.what());
    }
  });
}

std::string Mesh::local_address() const {
  boost::system::error_code code;
  const tcp::endpoint local = acceptor_.local_endpoint(code);
  if (code) return options_.bind;
  return peer_io::format_endpoint(local.address(), local.port());
}

void Mesh::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  // Copies: closing may erase.
  std::vector<std::shared_ptr<Stream>> streams;
  for (const auto& [id, weak] : streams_) {
    if (auto stream = weak.lock()) streams.push_back(std::move(stream));
  }
  for (const auto& stream : streams) close_stream(*stream);
  for (const auto& [address, peer] : peers_) {
    peer->resolver.cancel();
    peer->wake.cancel();
    peer->retry.cancel();
  }
}

void Mesh::send(const std::string& address, std::string_view payload) {
  if (stopped_) return;
  sealed_.clear();
  wire::append_frame_header(sealed_,
                            static_cast<std::uint32_t>(payload.size() + kEnvelopeOverheadBytes));
  keyring_.seal_into(payload, sealed_);
  if (sealed_.size() > options_.max_peer_queue_bytes ||
      sealed_.size() > wire::kFrameHeaderBytes + kMaxPeerFrameBytes) {
    ++counters_.peer_queue_overflow;
    return;
  }

  auto it = peers_.find(address);
  if (it == peers_.end()) {
    if (peers_.size() >= options_.max_incoming_connections) {
      // As many peers as members allowed, plus slack: addresses come only
      // from authenticated peers, so this is a bound, not a defense.
      ++counters_.peer_unroutable_dropped;
      return;
    }
    auto peer = std::make_shared<Peer>(io_);
    peer->address = address;
    it = peers_.emplace(address, peer).first;
    spawn("mesh writer", write_loop(std::move(peer)));
  }
  Peer& peer = *it->second;
  // Newest news matters most: the core's counters are absolute, so a later
  // frame supersedes what an older one said, and anti-entropy repairs the rest.
  while (!peer.queue.empty() &&
         peer.queued_bytes + sealed_.size() > options_.max_peer_queue_bytes) {
    peer.queued_bytes -= peer.queue.front().size();
    queued_total_ -= peer.queue.front().size();
    peer.queue.pop_front();
    ++counters_.peer_queue_overflow;
  }
  peer.queued_bytes += sealed_.size();
  queued_total_ += sealed_.size();
  peer.queue.push_back(sealed_);
  peer.last_send_us = steady_now_us();
  if (peer.waiting) peer.wake.cancel();
}

asio::awaitable<void> Mesh::accept_loop() {
  asio::steady_timer backoff(io_);
  while (!stopped_) {
    auto [error, socket] = co_await acceptor_.async_accept(as_tuple(use_awaitable));
    if (stopped_ || error == asio::error::operation_aborted) break;
    if (error) {
      ++counters_.peer_receive_errors;
      connect_warning_.log(steady_now_us(), "mesh: accept failed: " + error.message());
      backoff.expires_after(kAcceptBackoff);
      co_await backoff.async_wait(as_tuple(use_awaitable));
      continue;
    }
    if (incoming_open_ >= options_.max_incoming_connections) {
      ++counters_.peer_connections_rejected;
      connect_warning_.log(steady_now_us(),
                           "mesh: refused a peer connection: " + std::to_string(incoming_open_) +
                               " open, the most allowed");
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    boost::system::error_code code;
    const tcp::endpoint remote = socket.remote_endpoint(code);
    std::string name =
        code ? std::string("?") : peer_io::format_endpoint(remote.address(), remote.port());
    ++counters_.peer_connections_accepted;
    spdlog::debug("mesh: accepted a peer connection from {}", name);
    spawn("mesh reader", read_loop(add_stream(std::move(socket), std::move(name), true)));
  }
}

std::shared_ptr<Mesh::Stream> Mesh::add_stream(tcp::socket socket, std::string peer,
                                               bool incoming) {
  auto stream = std::make_shared<Stream>(std::move(socket));
  stream->peer = std::move(peer);
  stream->id = next_stream_id_++;
  stream->incoming = incoming;
  stream->counted = true;
  ++counters_.peer_connections_open;
  if (incoming) ++incoming_open_;
  streams_.emplace(stream->id, stream);
  return stream;
}

void Mesh::close_stream(Stream& stream) {
  boost::system::error_code ignored;
  stream.socket.close(ignored);
  if (!stream.counted) return;
  stream.counted = false;
  --counters_.peer_connections_open;
  if (stream.incoming) --incoming_open_;
  streams_.erase(stream.id);
}

void Mesh::refuse(Stream& stream, const std::string& why) {
  ++counters_.peer_disconnects_garbage;
  refused_warning_.log(steady_now_us(),
                       "mesh: closed the connection with " + stream.peer + ": " + why);
  close_stream(stream);
}

asio::awaitable<void> Mesh::read_loop(std::shared_ptr<Stream> stream) {
  std::string in(kReadChunkBytes, '\0');
  std::size_t begin = 0;  // unconsumed bytes are in[begin, end)
  std::size_t end = 0;
  while (!stopped_ && stream->socket.is_open()) {
    // Everything complete first: a frame's handler may send, never read.
    std::uint32_t declared = 0;
    for (;;) {
      const wire::FrameView frame =
          wire::next_frame(std::string_view(in.data() + begin, end - begin), kMaxPeerFrameBytes);
      if (frame.status == wire::FrameStatus::kNeedMore) {
        declared = frame.declared_bytes;
        break;
      }
      if (frame.status == wire::FrameStatus::kTooLarge) {
        ++counters_.peer_oversize;
        refuse(*stream, "a frame declares " + std::to_string(frame.declared_bytes) +
                            " bytes (at most " + std::to_string(kMaxPeerFrameBytes) + ")");
        co_return;
      }
      ++counters_.peer_packets_received;
      begin += frame.consumed;
      EnvelopeError refusal{};
      const std::optional<std::string_view> payload = keyring_.open(frame.payload, refusal);
      if (!payload) {
        peer_io::count_refusal(refusal, counters_);
        refuse(*stream, envelope_error_name(refusal));
        co_return;
      }
      try {
        handler_(*payload);
      } catch (const std::exception& e) {
        spdlog::error("mesh: handling a message from {} failed: {}", stream->peer, e.what());
      }
      if (stopped_ || !stream->socket.is_open()) co_return;
    }

    // Move the partial frame to the front and make room for all of it.
    const std::size_t pending = end - begin;
    if (begin > 0) {
      std::memmove(in.data(), in.data() + begin, pending);
      begin = 0;
      end = pending;
    }
    const std::size_t want =
        std::max(kReadChunkBytes, declared == 0 ? 0 : wire::kFrameHeaderBytes + declared);
    if (in.size() < want || (pending == 0 && in.size() > kReadChunkBytes)) in.resize(want);

    auto [error, bytes] = co_await stream->socket.async_read_some(
        asio::buffer(in.data() + end, in.size() - end), as_tuple(use_awaitable));
    if (error) {
      if (error != asio::error::eof && error != asio::error::operation_aborted &&
          error != asio::error::bad_descriptor && !stopped_) {
        ++counters_.peer_receive_errors;
        spdlog::debug("mesh: read from {} failed: {}", stream->peer, error.message());
      }
      break;
    }
    counters_.peer_bytes_received += bytes;
    end += bytes;
  }
  spdlog::debug("mesh: connection with {} closed", stream->peer);
  close_stream(*stream);
}

asio::awaitable<bool> Mesh::connect(Peer& peer) {
  std::string error;
  const std::optional<HostPort> split =
      split_address(peer.address, /*allow_port_zero=*/false, &error);
  if (!split) {
    ++counters_.peer_resolve_failures;
    connect_warning_.log(steady_now_us(), "mesh: peer address \"" + peer.address + "\": " + error);
    co_return false;
  }
  auto [resolve_error, results] =
      co_await peer.resolver.async_resolve(split->host, std::to_string(split->port),
                                           tcp::resolver::numeric_service, as_tuple(use_awaitable));
  if (stopped_) co_return false;
  if (resolve_error || results.empty()) {
    ++counters_.peer_resolve_failures;
    connect_warning_.log(steady_now_us(),
                         "mesh: peer address \"" + peer.address + "\" does not resolve: " +
                             (resolve_error ? resolve_error.message() : std::string("no address")));
    co_return false;
  }

  auto stream = add_stream(tcp::socket(io_), peer.address, /*incoming=*/false);
  asio::steady_timer deadline(io_);
  deadline.expires_after(kConnectTimeout);
  deadline.async_wait([stream](const boost::system::error_code& code) {
    if (code) return;  // cancelled: the connect finished first
    boost::system::error_code ignored;
    stream->socket.close(ignored);
  });
  auto [connect_error, endpoint] =
      co_await asio::async_connect(stream->socket, results, as_tuple(use_awaitable));
  deadline.cancel();
  if (stopped_ || connect_error || !stream->socket.is_open()) {
    close_stream(*stream);
    if (stopped_) co_return false;
    ++counters_.peer_connect_failures;
    connect_warning_.log(steady_now_us(),
                         "mesh: cannot connect to " + peer.address + ": " +
                             (connect_error ? connect_error.message() : std::string("timed out")));
    co_return false;
  }
  boost::system::error_code ignored;
  // Frames are small and latency is the point of sending them.
  stream->socket.set_option(tcp::no_delay(true), ignored);
  ++counters_.peer_connects;
  spdlog::debug("mesh: connected to {}", peer.address);
  peer.stream = stream;
  // Reads what the peer may send back, and notices when it hangs up.
  spawn("mesh reader", read_loop(std::move(stream)));
  co_return true;
}

asio::awaitable<void> Mesh::write_loop(std::shared_ptr<Peer> peer) {
  core::TimeUs backoff_us = std::max<core::TimeUs>(1, options_.reconnect_backoff_min_us);
  std::string batch;
  while (!stopped_) {
    if (peer->queue.empty()) {
      peer->waiting = true;
      peer->wake.expires_after(kIdleClose);
      auto [error] = co_await peer->wake.async_wait(as_tuple(use_awaitable));
      peer->waiting = false;
      if (stopped_) break;
      if (!error && peer->queue.empty()) break;  // idle: forget this peer
      continue;
    }
    if (peer->stream == nullptr || !peer->stream->socket.is_open()) {
      peer->stream.reset();
      if (!co_await connect(*peer)) {
        if (stopped_) break;
        if (steady_now_us() - peer->last_send_us > kIdleCloseUs) {
          counters_.peer_unroutable_dropped += peer->queue.size();
          spdlog::debug("mesh: gave up on {}: unreachable and unused", peer->address);
          break;
        }
        peer->retry.expires_after(std::chrono::microseconds(backoff_us));
        co_await peer->retry.async_wait(as_tuple(use_awaitable));
        backoff_us =
            std::min(backoff_us * 2, std::max(backoff_us, options_.reconnect_backoff_max_us));
        continue;
      }
      backoff_us = std::max<core::TimeUs>(1, options_.reconnect_backoff_min_us);
    }

    batch.clear();
    std::uint64_t frames = 0;
    while (!peer->queue.empty() && batch.size() < kWriteBatchBytes) {
      batch += peer->queue.front();
      peer->queued_bytes -= peer->queue.front().size();
      peer->queue.pop_front();
      ++frames;
    }
    const std::shared_ptr<Stream> stream = peer->stream;
    auto [error, bytes] =
        co_await asio::async_write(stream->socket, asio::buffer(batch), as_tuple(use_awaitable));
    queued_total_ -= batch.size();
    if (error) {
      // The frames are lost; the core's retransmissions and anti-entropy
      // cover them. The next frame reconnects.
      if (!stopped_) {
        ++counters_.peer_send_errors;
        connect_warning_.log(steady_now_us(),
                             "mesh: write to " + peer->address + " failed: " + error.message());
      }
      close_stream(*stream);
      continue;
    }
    counters_.peer_packets_sent += frames;
    counters_.peer_bytes_sent += bytes;
  }
  queued_total_ -= peer->queued_bytes;
  peer->queued_bytes = 0;
  peer->queue.clear();
  if (peer->stream != nullptr) close_stream(*peer->stream);
  if (auto it = peers_.find(peer->address); it != peers_.end() && it->second == peer) {
    peers_.erase(it);
  }
}

}  // namespace

PeerTransportOpen open_mesh_transport(asio::io_context& io, const PeerTransportOptions& options,
                                      Keyring& keyring, PeerCounters& counters,
                                      PeerTransport::PayloadHandler handler) {
  PeerTransportOpen result;
  auto mesh = std::make_shared<Mesh>(io, options, keyring, counters, std::move(handler));
  if (!mesh->open(result.error)) return result;
  mesh->start();
  result.transport = std::make_unique<peer_io::TransportHandle<Mesh>>(std::move(mesh));
  return result;
}

}  // namespace rlimit::shell
