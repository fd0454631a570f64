// The UDP transport on real loopback sockets (ports picked by the kernel).
// Every wait is bounded by run_until.
#include "shell/gossip_transport.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <string>
#include <vector>

#include "loop.h"
#include "shell/peer_address.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using asio::ip::udp;
using testing::run_for;
using testing::run_until;

constexpr const char* kSecret = "gossip-test-secret-0123456789";
constexpr const char* kOtherSecret = "some-other-cluster-secret-xyz";

Keyring make_keyring(const char* secret) {
  KeyringLoad loaded = Keyring::parse(secret, "test");
  return std::move(*loaded.keyring);
}

struct Node {
  Node(asio::io_context& io, const char* secret = kSecret, std::uint32_t mtu = 1400)
      : keyring(make_keyring(secret)) {
    PeerTransportOptions options;
    options.bind = "127.0.0.1:0";
    options.mtu_bytes = mtu;
    PeerTransportOpen opened =
        open_gossip_transport(io, options, keyring, counters,
                              [this](std::string_view payload) { received.emplace_back(payload); });
    EXPECT_TRUE(opened.transport != nullptr) << opened.error;
    transport = std::move(opened.transport);
  }
  std::string address() const { return transport->local_address(); }
  udp::endpoint endpoint() const {
    const std::optional<HostPort> split = split_address(address(), false, nullptr);
    return udp::endpoint(asio::ip::make_address(split->host), split->port);
  }

  Keyring keyring;
  PeerCounters counters;
  std::vector<std::string> received;
  std::unique_ptr<PeerTransport> transport;
};

TEST(GossipTransportTest, DeliversSealedPayloads) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  ASSERT_NE(b.address().find("127.0.0.1:"), std::string::npos) << b.address();
  EXPECT_NE(b.address(), "127.0.0.1:0");

  a.transport->send(b.address(), "hello");
  a.transport->send(b.address(), std::string(1400 - kEnvelopeOverheadBytes, 'x'));
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 2; }));
  EXPECT_EQ(b.received[0], "hello");
  EXPECT_EQ(b.received[1].size(), 1400 - kEnvelopeOverheadBytes);
  EXPECT_EQ(a.counters.peer_packets_sent, 2u);
  EXPECT_EQ(a.counters.peer_bytes_sent,
            5 + 1400 - kEnvelopeOverheadBytes + 2 * kEnvelopeOverheadBytes);
  EXPECT_EQ(b.counters.peer_packets_received, 2u);
  EXPECT_EQ(a.transport->queued_bytes(), 0u);

  // And back, to show both directions share the one socket.
  b.transport->send(a.address(), "reply");
  ASSERT_TRUE(run_until(io, [&] { return a.received.size() == 1; }));
  EXPECT_EQ(a.received[0], "reply");
}

TEST(GossipTransportTest, ResolvesHostNames) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  const std::optional<HostPort> split = split_address(b.address(), false, nullptr);
  const std::string by_name = "localhost:" + std::to_string(split->port);
  a.transport->send(by_name, "one");
  a.transport->send(by_name, "two");  // waits with the first for the lookup
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 2; }));
  EXPECT_EQ(b.received[0], "one");
  EXPECT_EQ(b.received[1], "two");
  a.transport->send(by_name, "three");  // cached now
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 3; }));
  EXPECT_EQ(a.counters.peer_resolve_failures, 0u);
}

TEST(GossipTransportTest, CountsAndDropsWhatDoesNotOpen) {
  asio::io_context io;
  Node b(io, kSecret, /*mtu=*/300);
  Keyring ours = make_keyring(kSecret);
  Keyring theirs = make_keyring(kOtherSecret);
  udp::socket raw(io, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto send_raw = [&](const std::string& bytes) { raw.send_to(asio::buffer(bytes), b.endpoint()); };

  send_raw("hello");                              // too short
  send_raw(std::string(40, 'z'));                 // bad magic
  send_raw(theirs.seal("from another cluster"));  // unknown key
  std::string tampered = ours.seal("tampered");
  tampered.back() ^= 1;
  send_raw(tampered);                          // bad mac
  send_raw(ours.seal(std::string(300, 'o')));  // above mtu_bytes
  send_raw(ours.seal("fine"));
  ASSERT_TRUE(run_until(io, [&] { return b.counters.peer_packets_received == 6; }));
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 1; }));
  EXPECT_EQ(b.received[0], "fine");
  EXPECT_EQ(b.counters.peer_malformed, 2u);
  EXPECT_EQ(b.counters.peer_unknown_key, 1u);
  EXPECT_EQ(b.counters.peer_bad_mac, 1u);
  EXPECT_EQ(b.counters.peer_oversize, 1u);
}

TEST(GossipTransportTest, RefusesToSendAboveTheMtuAndToBadAddresses) {
  asio::io_context io;
  Node a(io, kSecret, /*mtu=*/300);
  Node b(io);
  a.transport->send(b.address(), std::string(300, 'x'));
  EXPECT_EQ(a.counters.peer_send_errors, 1u);
  a.transport->send("not an address", "x");
  EXPECT_EQ(a.counters.peer_resolve_failures, 1u);
  EXPECT_EQ(a.counters.peer_unroutable_dropped, 1u);
  a.transport->send("not an address", "x");  // remembered as failed: no new lookup
  EXPECT_EQ(a.counters.peer_resolve_failures, 1u);
  EXPECT_EQ(a.counters.peer_unroutable_dropped, 2u);
  run_for(io, std::chrono::milliseconds(50));
  EXPECT_TRUE(b.received.empty());
  EXPECT_EQ(a.counters.peer_packets_sent, 0u);
}

TEST(GossipTransportTest, ReportsABusyBindAddress) {
  asio::io_context io;
  Node a(io);
  Keyring keyring = make_keyring(kSecret);
  PeerCounters counters;
  PeerTransportOptions options;
  options.bind = a.address();
  PeerTransportOpen opened =
      open_gossip_transport(io, options, keyring, counters, [](std::string_view) {});
  EXPECT_EQ(opened.transport, nullptr);
  EXPECT_NE(opened.error.find(a.address()), std::string::npos) << opened.error;

  options.bind = "no-port-here";
  opened = open_gossip_transport(io, options, keyring, counters, [](std::string_view) {});
  EXPECT_EQ(opened.transport, nullptr);
  EXPECT_NE(opened.error.find("no-port-here"), std::string::npos) << opened.error;
}

TEST(GossipTransportTest, NothingIsDeliveredAfterStop) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  b.transport->stop();
  a.transport->send(b.address(), "late");
  run_for(io, std::chrono::milliseconds(50));
  EXPECT_TRUE(b.received.empty());
  b.transport.reset();  // dropping the handle after stop is fine
  a.transport.reset();  // and without stop
  run_for(io, std::chrono::milliseconds(10));
}

TEST(GossipTransportTest, AKeyringReplacedInPlaceTakesEffect) {
  asio::io_context io;
  Node a(io);
  Node b(io);
  a.keyring = make_keyring(kOtherSecret);  // a rotated to a secret b lacks
  a.transport->send(b.address(), "x");
  ASSERT_TRUE(run_until(io, [&] { return b.counters.peer_unknown_key == 1; }));
  b.keyring = make_keyring((std::string(kSecret) + "\n" + kOtherSecret).c_str());
  a.transport->send(b.address(), "y");
  ASSERT_TRUE(run_until(io, [&] { return b.received.size() == 1; }));
  EXPECT_EQ(b.received[0], "y");
}

}  // namespace
}  // namespace rlimit::shell
