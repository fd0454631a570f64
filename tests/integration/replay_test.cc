// Replay protection on real rlimitd processes (docs/cluster.md, "Replay
// protection"): datagrams captured between real nodes by a UDP relay in the
// test, sent again later, change nothing and are counted; and nothing on the
// peer port answers a sender that did not authenticate.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "rlimit/client.h"
#include "rlimit/v1/peer.pb.h"
#include "shell/envelope.h"
#include "support/daemon_process.h"

namespace rlimit::testing {
namespace {

// The peer message a captured datagram carries after its envelope (magic,
// key id and MAC). False when there is none.
bool parse_captured(const std::string& datagram, peer::v1::PeerMessage& m) {
  constexpr std::size_t kEnvelopeBytes = shell::kEnvelopeOverheadBytes;
  return datagram.size() > kEnvelopeBytes &&
         m.ParseFromArray(datagram.data() + kEnvelopeBytes,
                          static_cast<int>(datagram.size() - kEnvelopeBytes));
}

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// A UDP relay: one socket per node, bound to the address the node advertises;
// every datagram that arrives is recorded and forwarded to the node's real
// peer port. What passes is what an attacker on the path sees.
class Relay {
 public:
  static constexpr std::size_t kMaxRecorded = 50'000;

  // Binds one relay socket per target port; false if a bind failed.
  bool open(const std::vector<int>& target_ports) {
    for (const int target : target_ports) {
      const int port = free_port();
      if (port <= 0) return false;
      const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
      const sockaddr_in addr = loopback(port);
      if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
        if (fd >= 0) ::close(fd);
        return false;
      }
      hops_.push_back({fd, port, target});
    }
    thread_ = std::thread([this] { run(); });
    return true;
  }
  ~Relay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (const Hop& hop : hops_) ::close(hop.fd);
  }

  int port(std::size_t node) const { return hops_[node].port; }
  // Datagrams that were on their way to `node`, in order.
  std::vector<std::string> captured_to(std::size_t node) {
    std::lock_guard lock(mutex_);
    return captured_[node];
  }

 private:
  struct Hop {
    int fd;
    int port;
    int target;
  };

  void run() {
    std::vector<pollfd> fds;
    for (const Hop& hop : hops_) fds.push_back({hop.fd, POLLIN, 0});
    std::string buffer(65536, '\0');
    while (!stop_) {
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (std::size_t i = 0; i < hops_.size(); ++i) {
        for (int burst = 0; burst < 256; ++burst) {  // bounded per wake-up
          const ssize_t n = ::recv(hops_[i].fd, buffer.data(), buffer.size(), 0);
          if (n <= 0) break;
          const sockaddr_in to = loopback(hops_[i].target);
          ::sendto(hops_[i].fd, buffer.data(), static_cast<std::size_t>(n), 0,
                   reinterpret_cast<const sockaddr*>(&to), sizeof(to));
          std::lock_guard lock(mutex_);
          auto& captured = captured_[i];
          if (captured.size() < kMaxRecorded) captured.emplace_back(buffer.data(), n);
        }
      }
    }
  }

  std::vector<Hop> hops_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::size_t, std::vector<std::string>> captured_;
};

// 10 per user per hour: nothing refills during a test, so a balance read
// twice is the same unless something charged or raised it.
const std::string kHourlyRule = R"(
[[rule]]
name = "hourly"
match = { user = { each = true } }
limit = 10
period = "1h"
)";

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = write_cluster_secret(dir_);
    // Members that left are forgotten after 2 s here (1 min by default), so
    // a test can see whether an old message brings one back.
    rules_ = dir_.write("rules.toml", "[cluster]\ndead_retention = \"2s\"\n" + kHourlyRule);
  }

  void TearDown() override {
    for (auto& d : daemons_) {
      if (d && d->running()) d->stop(SIGTERM, std::chrono::seconds(5));
    }
  }

  // `n` gossip nodes that reach each other only through `relay_`.
  void start_cluster(int n) {
    for (int i = 0; i < n; ++i) {
      ports_.push_back(free_port());
      ASSERT_GT(ports_.back(), 0);
      sockets_.push_back(dir_.file("node" + std::to_string(i) + ".sock"));
    }
    ASSERT_TRUE(relay_.open(ports_));
    daemons_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) start_node(i);
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          daemons_[static_cast<std::size_t>(i)]->wait_ready(sockets_[static_cast<std::size_t>(i)]))
          << logs();
    }
  }

  void start_node(int i) {
    const auto at = static_cast<std::size_t>(i);
    const std::string seeds = "127.0.0.1:" + std::to_string(relay_.port(0)) +
                              ",127.0.0.1:" + std::to_string(relay_.port(1));
    daemons_[at] = std::make_unique<DaemonProcess>(
        dir_,
        std::vector<std::string>{"--config", rules_, "--socket", sockets_[at], "--node-id",
                                 "node" + std::to_string(i), "--cluster-mode", "gossip", "--bind",
                                 "127.0.0.1:" + std::to_string(ports_[at]), "--advertise",
                                 "127.0.0.1:" + std::to_string(relay_.port(at)), "--seeds", seeds,
                                 "--secret-file", secret_, "--log-level", "info"},
        "node" + std::to_string(i) + "-" + std::to_string(starts_++) + ".log");
  }

  Client client(int i) {
    ClientOptions options;
    options.socket_path = sockets_[static_cast<std::size_t>(i)];
    options.timeout_ms = 2000;
    options.reconnect_backoff_min_ms = 1;
    return Client(options);
  }

  // (state, incarnation) node `observer` reports for node `subject`.
  std::pair<std::string, std::uint64_t> member(int observer, int subject) {
    auto members = client(observer).members();
    if (!members) return {"", 0};
    for (const auto& m : members->members) {
      if (m.node_id == "node" + std::to_string(subject)) return {m.state, m.incarnation};
    }
    return {"", 0};
  }
  bool all_alive(int n) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (member(a, b).first != "alive") return false;
      }
    }
    return true;
  }

  std::int64_t remaining(int node, const char* user) {
    const Decision d = client(node).check({{"user", user}}, 0);
    return d.rules.empty() ? -1 : static_cast<std::int64_t>(d.rules[0].remaining);
  }

  std::map<std::string, std::uint64_t> counters(int node) {
    std::map<std::string, std::uint64_t> out;
    auto status = client(node).status();
    if (status) {
      for (const auto& [name, value] : status->counters) out[name] = value;
    }
    return out;
  }
  static std::uint64_t replays_refused(const std::map<std::string, std::uint64_t>& c) {
    std::uint64_t sum = 0;
    for (const char* name :
         {"peer_replay_duplicates", "peer_replay_below_window", "peer_replay_old_incarnation",
          "peer_replay_stale", "peer_replay_future"}) {
      const auto it = c.find(name);
      if (it != c.end()) sum += it->second;
    }
    return sum;
  }

  // Dead reports about `id` among the datagrams captured on their way to `node`.
  int dead_reports_to(std::size_t node, const std::string& id) {
    int reports = 0;
    for (const std::string& datagram : relay_.captured_to(node)) {
      peer::v1::PeerMessage m;
      if (!parse_captured(datagram, m)) continue;
      for (const auto& update : m.members()) {
        reports += update.node_id() == id && update.state() == peer::v1::MemberUpdate::DEAD;
      }
    }
    return reports;
  }

  std::string logs() {
    std::string all;
    for (auto& d : daemons_) {
      if (d) all += d->log() + "\n----\n";
    }
    return all;
  }

  TempDir dir_;
  std::string secret_;
  std::string rules_;
  std::vector<int> ports_;
  std::vector<std::string> sockets_;
  Relay relay_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  int starts_ = 0;
};

// Sends `datagrams` to 127.0.0.1:`port` from a socket of its own (the
// attacker), paced so the receiver's buffer never overflows. Returns how many
// bytes came back to that socket within `listen_ms` afterwards.
std::size_t send_from_elsewhere(const std::vector<std::string>& datagrams, int port,
                                int listen_ms) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  const sockaddr_in to = loopback(port);
  for (std::size_t i = 0; i < datagrams.size(); ++i) {
    ::sendto(fd, datagrams[i].data(), datagrams[i].size(), 0,
             reinterpret_cast<const sockaddr*>(&to), sizeof(to));
    if (i % 16 == 15) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::size_t received = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(listen_ms);
  std::string buffer(65536, '\0');
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) received += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return received;
}

// Node 0 consumes, is killed (reported dead), comes back, and node 2 leaves
// and comes back; everything that was sent to node 1 meanwhile (joins,
// pings, dead reports, the leave, counters of both lives) is sent to node 1
// again: its view of the cluster and its balance stay as they were, every
// copy is counted as a replay, and the sender of the copies gets no answer.
// Then node 2 leaves for good and is forgotten, and the copies are sent
// again: node 2 does not come back (without replay protection it would, as
// a ghost member, until probed dead again).
TEST_F(ReplayTest, CapturedDatagramsSentAgainChangeNothingAndAreCounted) {
  constexpr int kNodes = 3;
  start_cluster(kNodes);
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(20))) << logs();

  {  // 4 of carol's 10 on node 0 (a new key is probed at a third of its
     // balance: spent as the probe allows).
    Client c = client(0);
    int spent = 0;
    ASSERT_TRUE(eventually([&] {
      if (spent < 4 && c.check({{"user", "carol"}}).allowed) ++spent;
      return spent == 4;
    }));
  }
  ASSERT_TRUE(eventually([&] { return remaining(1, "carol") == 6; })) << logs();

  daemons_[0]->stop(SIGKILL);
  ASSERT_TRUE(
      eventually([&] { return member(1, 0).first == "dead" && member(2, 0).first == "dead"; },
                 std::chrono::seconds(20)))
      << logs();
  // And node 1 has been told so: when node 1 saw the death first, node 2
  // learns it from node 1 and passes it back with its next message; a node 0
  // back before that message would leave the capture without a dead report
  // (node 2 sends a member's record as it is when it sends).
  ASSERT_TRUE(eventually([&] { return dead_reports_to(1, "node0") > 0; }, std::chrono::seconds(20)))
      << logs();
  start_node(0);
  ASSERT_TRUE(daemons_[0]->wait_ready(sockets_[0])) << logs();
  ASSERT_EQ(daemons_[2]->stop(SIGTERM), 0);
  ASSERT_TRUE(eventually([&] { return member(1, 2).first == "left"; })) << logs();
  start_node(2);
  ASSERT_TRUE(daemons_[2]->wait_ready(sockets_[2])) << logs();
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(20))) << logs();
  ASSERT_EQ(remaining(1, "carol"), 6);

  const std::vector<std::string> captured = relay_.captured_to(1);
  // The capture holds what matters: joins, a leave, dead reports, counters.
  int joins = 0, leaves = 0, dead_reports = 0, counters_messages = 0;
  for (const std::string& datagram : captured) {
    peer::v1::PeerMessage m;
    ASSERT_TRUE(parse_captured(datagram, m)) << datagram.size() << " bytes";
    joins += m.has_join() ? 1 : 0;
    leaves += m.has_leave() ? 1 : 0;
    counters_messages += m.has_counters() ? 1 : 0;
    for (const auto& update : m.members()) {
      dead_reports += update.state() == peer::v1::MemberUpdate::DEAD ? 1 : 0;
    }
  }
  std::printf(
      "[replay] captured %zu datagrams to node1: %d joins, %d leaves, %d dead reports, "
      "%d counters\n",
      captured.size(), joins, leaves, dead_reports, counters_messages);
  EXPECT_GE(joins, 1);
  EXPECT_GE(leaves, 1);
  EXPECT_GE(dead_reports, 1);
  EXPECT_GE(counters_messages, 1);
  const auto before = counters(1);
  const auto node0 = member(1, 0);
  const auto node2 = member(1, 2);

  // Straight to node 1's real port: the relay no longer forwards them.
  const std::size_t answered = send_from_elsewhere(captured, ports_[1], 500);
  EXPECT_EQ(answered, 0u) << "a replayed datagram was answered to its sender";

  // Every copy arrived and was refused as a replay (not taken as news).
  std::map<std::string, std::uint64_t> after;
  EXPECT_TRUE(eventually(
      [&] {
        after = counters(1);
        return replays_refused(after) - replays_refused(before) == captured.size();
      },
      std::chrono::seconds(5)))
      << "replayed " << captured.size() << ", refused as replays "
      << replays_refused(after) - replays_refused(before);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // anything they started would show now
  EXPECT_EQ(member(1, 0), node0);
  EXPECT_EQ(member(1, 2), node2);
  EXPECT_TRUE(all_alive(kNodes)) << logs();
  EXPECT_EQ(remaining(1, "carol"), 6);
  after = counters(1);
  EXPECT_EQ(after["remote_tokens_charged"], before.at("remote_tokens_charged"));
  EXPECT_EQ(after["cluster_entries_applied"], before.at("cluster_entries_applied"));
  EXPECT_EQ(after["members_deaths"], before.at("members_deaths"));
  EXPECT_EQ(after["peer_unsequenced_accepted"], 0u);

  // Node 2 leaves for good and node 1 forgets it (dead_retention): its old
  // joins and pings, sent again, must not bring it back as a ghost member.
  ASSERT_EQ(daemons_[2]->stop(SIGTERM), 0);
  ASSERT_TRUE(eventually([&] { return member(1, 2).first.empty(); }, std::chrono::seconds(15)))
      << logs();
  const std::vector<std::string> all = relay_.captured_to(1);
  const auto before_ghost = counters(1);
  EXPECT_EQ(send_from_elsewhere(all, ports_[1], 200), 0u);
  // Looked at at once: a ghost would be probed, suspected and dead again
  // within a few seconds.
  EXPECT_EQ(member(1, 2).first, "") << "a replayed message brought back a node that left";
  EXPECT_TRUE(eventually(
      [&] {
        after = counters(1);
        return replays_refused(after) - replays_refused(before_ghost) == all.size();
      },
      std::chrono::seconds(5)))
      << "replayed " << all.size() << ", refused as replays "
      << replays_refused(after) - replays_refused(before_ghost);
  EXPECT_EQ(member(1, 2).first, "");
  EXPECT_EQ(member(1, 0), node0);
  EXPECT_EQ(remaining(1, "carol"), 6);
  EXPECT_TRUE(daemons_[1]->running()) << logs();
}

// No reply larger than the request to an unauthenticated sender: none at all.
// Junk, forged envelopes and envelopes signed with another secret, sent to a
// gossip node's UDP port, get nothing back; on a mesh node's TCP port the
// connection is closed without a byte written.
TEST_F(ReplayTest, NothingAnswersASenderThatDidNotAuthenticate) {
  constexpr int kNodes = 2;
  start_cluster(kNodes);
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(20))) << logs();

  // Real envelopes under the cluster's secret, captured: with one byte of
  // the MAC flipped they no longer authenticate.
  std::vector<std::string> requests = relay_.captured_to(1);
  ASSERT_FALSE(requests.empty());
  if (requests.size() > 200) requests.resize(200);
  for (std::string& r : requests) r[10] = static_cast<char>(r[10] ^ 0x5a);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + rng() % 1400, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 2 == 0 && junk.size() >= 5) std::memcpy(junk.data(), "RLP1", 4);  // right magic
    requests.push_back(std::move(junk));
  }
  const auto before = counters(1);
  EXPECT_EQ(send_from_elsewhere(requests, ports_[1], 500), 0u);
  EXPECT_TRUE(eventually(
      [&] {
        const auto after = counters(1);
        const auto refused = [](const std::map<std::string, std::uint64_t>& c) {
          std::uint64_t sum = 0;
          for (const char* name : {"peer_bad_mac", "peer_unknown_key", "peer_malformed"}) {
            const auto it = c.find(name);
            if (it != c.end()) sum += it->second;
          }
          return sum;
        };
        // Counted as refused, each at most once. Not all of them need
        // arrive: 400 datagrams sent at once may overflow the node's
        // receive buffer on a loaded (or sanitized) machine, and the kernel
        // drops the rest uncounted.
        const std::uint64_t counted = refused(after) - refused(before);
        return counted >= requests.size() / 4 && counted <= requests.size();
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(all_alive(kNodes)) << logs();

  // A mesh node: connect, send frames that do not authenticate, read.
  const int mesh_port = free_port();
  ASSERT_GT(mesh_port, 0);
  DaemonProcess mesh(dir_,
                     {"--config", rules_, "--socket", dir_.file("mesh.sock"), "--node-id", "mesh",
                      "--cluster-mode", "mesh", "--bind", "127.0.0.1:" + std::to_string(mesh_port),
                      "--secret-file", secret_},
                     "mesh.log");
  ASSERT_TRUE(mesh.wait_ready(dir_.file("mesh.sock"))) << mesh.log();
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Readiness is the client socket's; on a loaded (or sanitized) machine
    // the peer listener may open a moment later: retry, bounded (5 s).
    const sockaddr_in to = loopback(mesh_port);
    int fd = -1;
    const bool connected = eventually(
        [&] {
          fd = ::socket(AF_INET, SOCK_STREAM, 0);
          if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) {
            return true;
          }
          if (fd >= 0) ::close(fd);
          fd = -1;
          return false;
        },
        std::chrono::seconds(5));
    ASSERT_TRUE(connected) << "the mesh node's peer port did not accept a connection\n"
                           << mesh.log();
    const std::string& body = requests[static_cast<std::size_t>(attempt)];
    const std::uint32_t length = htonl(static_cast<std::uint32_t>(body.size()));
    std::string frame(reinterpret_cast<const char*>(&length), 4);
    frame += body;
    ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame.size()));
    std::size_t received = 0;
    bool closed = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    char buffer[4096];
    while (!closed && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) received += static_cast<std::size_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN)) closed = true;
    }
    ::close(fd);
    EXPECT_EQ(received, 0u);
    EXPECT_TRUE(closed) << "the mesh node kept a connection that sent a forged frame";
  }
  EXPECT_TRUE(mesh.running()) << mesh.log();
}

}  // namespace
}  // namespace rlimit::testing
