// The TCP mesh transport on real loopback sockets (ports picked by the
// kernel). Every wait is bounded by run_until.
#include "shell/mesh_transport.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <string>
#include <vector>

#include "loop.h"
#include "shell/peer_address.h"
#include "wire/frame.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using testing::run_for;
using testing::run_until;

constexpr const char* kSecret = "mesh-test-secret-0123456789";
constexpr const char* kOtherSecret = "some-other-cluster-secret-xyz";

Keyring make_keyring(const char* secret) {
  KeyringLoad loaded = Keyring::parse(secret, "test");
  return std::move(*loaded.keyring);
}

PeerTransportOptions fast_options(const std::string& bind = "127.0.0.1:0") {
  PeerTransportOptions options;
  options.bind = bind;
  options.reconnect_backoff_min_us = 5'000;
  options.reconnect_backoff_max_us = 40'000;
  return options;
}

struct Node {
  explicit Node(asio::io_context& io, PeerTransportOptions options = fast_options())
      : keyring(make_keyring(kSecret)) {
    PeerTransportOpen opened =
        open_mesh_transport(io, options, keyring, counters,
                            [this](std::string_view payload) { received.emplace_back(payload); });
    EXPECT_TRUE(opened.transport != nullptr) << opened.error;
    transport = std::move(opened.transport);
  }
  std::string address() const { return transport->local_address(); }
  tcp::endpoint endpoint() const {
    const std::optional<HostPort> split = split_address(address(), false, nullptr);
    return tcp::endpoint(asio::ip::make_address(split->host), split->port);
  }

  Keyring keyring;
  PeerCounters counters;
  std::vector<std::string> received;
  std::unique_ptr<PeerTransport> transport;
};

// A port nothing listens on (bound, then released).
std::string free_address(asio::io_context& io) {
  tcp::acceptor probe(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::string address = "127.0.0.1:" + std::to_string(probe.local_endpoint().port());
  probe.close();
  return address;
}

std::string frame(const std::string& envelope) {
  std::string out;
  wire::append_frame_header(out, static_cast<std::uint32_t>(envelope.size()));
  return out + envelope;
}

// True once the peer has closed `socket` (a read returns EOF or an error).
bool closed_by_peer(asio::io_context& io, tcp::socket& socket) {
  bool closed = false;
  char byte = 0;
  socket.async_read_some(asio::buffer(&byte, 1),
                         [&](const boost::system::error_code& error, std::size_t) {
                           closed = static_cast<bool>(error);
                         });
  return run_until(io, [&] { return closed; });
}

TEST(MeshTransportTest, DeliversFramesInOrder) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  for (int i = 0; i < 100; ++i) a.transport->send(b.address(), "message " + std::to_string(i));
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 100; }));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(b.received[i], "message " + std::to_string(i));
  EXPECT_EQ(a.counters.peer_connects, 1u);
  EXPECT_EQ(a.counters.peer_packets_sent, 100u);
  EXPECT_EQ(b.counters.peer_connections_accepted, 1u);
  EXPECT_EQ(b.counters.peer_packets_received, 100u);
  ASSERT_TRUE(run_until(io, [&] { return a.transport->queued_bytes() == 0; }));

  // The other way opens b's own connection to a.
  b.transport->send(a.address(), "back");
  ASSERT_TRUE(run_until(io, [&] { return a.received.size() == 1; }));
  EXPECT_EQ(b.counters.peer_connects, 1u);
}

TEST(MeshTransportTest, GarbageClosesOnlyThatConnection) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  a.transport->send(b.address(), "before");
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 1; }));

  Keyring ours = make_keyring(kSecret);
  Keyring theirs = make_keyring(kOtherSecret);
  std::string tampered = ours.seal("tampered");
  tampered.back() ^= 1;
  std::string huge;
  wire::append_frame_header(huge, 100 * 1024);
  const struct {
    std::string bytes;
    std::uint64_t PeerCounters::*counter;
  } cases[] = {
      {frame(tampered), &PeerCounters::peer_bad_mac},
      {frame(theirs.seal("x")), &PeerCounters::peer_unknown_key},
      {frame("short"), &PeerCounters::peer_malformed},
      {huge, &PeerCounters::peer_oversize},
  };
  std::uint64_t disconnects = 0;
  for (const auto& c : cases) {
    tcp::socket raw(io);
    raw.connect(b.endpoint());
    // A good frame first: garbage later in a stream still closes it.
    asio::write(raw, asio::buffer(frame(ours.seal("good")) + c.bytes));
    EXPECT_TRUE(closed_by_peer(io, raw));
    EXPECT_EQ(b.counters.*c.counter, 1u);
    EXPECT_EQ(b.counters.peer_disconnects_garbage, ++disconnects);
  }

  // a's connection was not touched.
  a.transport->send(b.address(), "after");
  ASSERT_TRUE(run_until(io, [&] { return b.received.back() == "after"; }));
  EXPECT_EQ(a.counters.peer_connects, 1u);
  EXPECT_EQ(b.counters.peer_connections_accepted, 1u + 4u);
  ASSERT_TRUE(run_until(io, [&] { return b.counters.peer_connections_open == 1; }));
}

TEST(MeshTransportTest, ReconnectsWithBackoffAndDeliversWhatWaited) {
  asio::io_context io;
  Node a(io);
  const std::string address = free_address(io);
  a.transport->send(address, "queued 1");
  a.transport->send(address, "queued 2");
  ASSERT_TRUE(run_until(io, [&] { return a.counters.peer_connect_failures >= 3; }));
  EXPECT_GT(a.transport->queued_bytes(), 0u);
  EXPECT_EQ(a.counters.peer_connects, 0u);

  Node b(io, fast_options(address));  // the peer comes up at that address
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 2; }));
  EXPECT_EQ(b.received[0], "queued 1");
  EXPECT_EQ(b.received[1], "queued 2");
  EXPECT_EQ(a.counters.peer_connects, 1u);
  EXPECT_EQ(a.transport->queued_bytes(), 0u);

  // The peer restarts: a notices the close and connects to the new one.
  b.transport.reset();
  ASSERT_TRUE(run_until(io, [&] { return a.counters.peer_connections_open == 0; }));
  Node b2(io, fast_options(address));
  a.transport->send(address, "after restart");
  ASSERT_TRUE(run_until(io, [&] { return b2.received.size() == 1; }));
  EXPECT_EQ(b2.received[0], "after restart");
  EXPECT_EQ(a.counters.peer_connects, 2u);
}

TEST(MeshTransportTest, BoundsTheQueueDroppingTheOldest) {
  asio::io_context io;
  PeerTransportOptions options = fast_options();
  options.max_peer_queue_bytes = 300;
  Node a(io, options);
  const std::string address = free_address(io);
  const std::string payload(100 - wire::kFrameHeaderBytes - kEnvelopeOverheadBytes, 'q');
  for (int i = 0; i < 10; ++i) a.transport->send(address, payload);  // 100-byte frames
  EXPECT_EQ(a.transport->queued_bytes(), 300u);
  EXPECT_EQ(a.counters.peer_queue_overflow, 7u);

  // Three newer frames of the same size push the three oldest out.
  for (int i = 0; i < 3; ++i) {
    std::string newer = "new " + std::to_string(i);
    newer.resize(payload.size(), '.');
    a.transport->send(address, newer);
  }
  EXPECT_EQ(a.counters.peer_queue_overflow, 10u);
  EXPECT_EQ(a.transport->queued_bytes(), 300u);
  Node b(io, fast_options(address));
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 3; }));
  EXPECT_EQ(b.received[0].substr(0, 5), "new 0");
  EXPECT_EQ(b.received[2].substr(0, 5), "new 2");
}

TEST(MeshTransportTest, StopEndsEverythingPromptly) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  a.transport->send(b.address(), "x");
  a.transport->send(free_address(io), "to nobody");
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 1; }));
  a.transport.reset();
  b.transport.reset();
  // Every coroutine ends: the loop runs dry.
  io.restart();
  const auto start = std::chrono::steady_clock::now();
  io.run_for(std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(a.counters.peer_connections_open, 0u);
  EXPECT_EQ(b.counters.peer_connections_open, 0u);
}

TEST(MeshTransportTest, ReportsABusyBindAddress) {
  asio::io_context io;
  Node a(io);
  Keyring keyring = make_keyring(kSecret);
  PeerCounters counters;
  PeerTransportOpen opened = open_mesh_transport(io, fast_options(a.address()), keyring, counters,
                                                 [](std::string_view) {});
  EXPECT_EQ(opened.transport, nullptr);
  EXPECT_NE(opened.error.find(a.address()), std::string::npos) << opened.error;
}

}  // namespace
}  // namespace rlimit::shell
