// Real rlimitd clusters on loopback: several processes, one global limit.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "rlimit/client.h"
#include "support/daemon_process.h"

namespace rlimit::testing {
namespace {


struct NodeSpec {
  std::string id;
  int port = 0;
  std::string socket;
};

class ClusterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    secret_ = write_cluster_secret(dir_);
  }

  // Writes the shared rules and starts `n` nodes; every node lists node 0
  // and node 1 as seeds.
  void start_cluster(int n, const std::string& rules) {
    rules_ = dir_.write("rules.toml", rules);
    for (int i = 0; i < n; ++i) {
      NodeSpec spec;
      spec.id = "node" + std::to_string(i);
      spec.port = free_port();
      ASSERT_GT(spec.port, 0);
      spec.socket = dir_.file(spec.id + ".sock");
      specs_.push_back(spec);
    }
    for (int i = 0; i < n; ++i) start_node(i);
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(daemons_[static_cast<std::size_t>(i)]->wait_ready(specs_[static_cast<std::size_t>(i)].socket))
          << daemons_[static_cast<std::size_t>(i)]->log();
    }
  }

  void start_node(int i) {
    const NodeSpec& spec = specs_[static_cast<std::size_t>(i)];
    std::string seeds;
    for (int s = 0; s < std::min<int>(2, static_cast<int>(specs_.size())); ++s) {
      if (!seeds.empty()) seeds += ",";
      seeds += "127.0.0.1:" + std::to_string(specs_[static_cast<std::size_t>(s)].port);
    }
    std::vector<std::string> args = {"--config", rules_, "--socket", spec.socket, "--node-id", spec.id,
                                     "--cluster-mode", GetParam(), "--bind",
                                     "127.0.0.1:" + std::to_string(spec.port), "--seeds", seeds,
                                     "--secret-file", secret_, "--log-level", "info"};
    auto daemon = std::make_unique<DaemonProcess>(dir_, args, spec.id + "-" + std::to_string(restarts_++) + ".log");
    if (static_cast<std::size_t>(i) < daemons_.size()) {
      daemons_[static_cast<std::size_t>(i)] = std::move(daemon);
    } else {
      daemons_.push_back(std::move(daemon));
    }
  }

  Client client(int i, std::uint32_t timeout_ms = 2000) {
    ClientOptions options;
    options.socket_path = specs_[static_cast<std::size_t>(i)].socket;
    options.timeout_ms = timeout_ms;
    options.reconnect_backoff_min_ms = 1;
    return Client(options);
  }

  // The state node `observer` reports for `subject`, or "" if unknown.
  std::string member_state(int observer, int subject) {
    Client c = client(observer);
    auto members = c.members();
    if (!members) return "";
    for (const auto& m : members->members) {
      if (m.node_id == specs_[static_cast<std::size_t>(subject)].id) return m.state;
    }
    return "";
  }

  bool all_alive(int n) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (member_state(a, b) != "alive") return false;
      }
    }
    return true;
  }

  std::string logs() {
    std::string all;
    for (auto& d : daemons_) all += d->log() + "\n----\n";
    return all;
  }

  void TearDown() override {
    for (auto& d : daemons_) {
      if (d->running()) d->stop(SIGTERM, std::chrono::seconds(5));
    }
  }

  TempDir dir_;
  std::string secret_;
  std::string rules_;
  std::vector<NodeSpec> specs_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  int restarts_ = 0;
};

constexpr std::int64_t kLimitPerSecond = 100;
constexpr std::int64_t kBurst = 100;

const std::string kGlobalRule = R"(
[[rule]]
name = "global"
match = { api = { each = true } }
limit = 100
period = "1s"
burst = 100
)";

TEST_P(ClusterTest, NodesFindEachOtherThroughSeeds) {
  start_cluster(4, kGlobalRule);
  EXPECT_TRUE(eventually([&] { return all_alive(4); }, std::chrono::seconds(15))) << logs();
}

TEST_P(ClusterTest, OneKeyDrivenFromEveryNodeHoldsTheGlobalLimit) {
  constexpr int kNodes = 3;
  start_cluster(kNodes, kGlobalRule);
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(15))) << logs();

  constexpr double kSeconds = 4.0;
  std::atomic<std::int64_t> admitted{0}, checks{0}, unavailable{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back([&, i] {
      Client c = client(i);
      while (!go.load()) std::this_thread::yield();
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(kSeconds);
      while (std::chrono::steady_clock::now() < end) {
        const Decision d = c.check({{"api", "search"}});
        ++checks;
        admitted += d.allowed;
        unavailable += d.status == DecisionStatus::kUnavailable;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // A single perfect limiter admits burst + limit * elapsed. The cluster may
  // exceed it by each other node's burst at cold start plus what the other
  // nodes admit while their news is in flight (docs/cluster.md); 250 ms of
  // staleness is generous on loopback.
  const double ideal = kBurst + kLimitPerSecond * elapsed;
  const double bound = ideal + (kNodes - 1) * kBurst + (kNodes - 1) * kLimitPerSecond * 0.25;
  std::printf("[cluster %s] checks %lld admitted %lld ideal %.0f bound %.0f over-admission %.1f%%\n",
              GetParam().c_str(), static_cast<long long>(checks.load()),
              static_cast<long long>(admitted.load()), ideal, bound,
              100.0 * (static_cast<double>(admitted.load()) - ideal) / ideal);
  EXPECT_EQ(unavailable.load(), 0);
  EXPECT_LE(static_cast<double>(admitted.load()), bound) << logs();
  // And not starved: far more than one node's share.
  EXPECT_GE(static_cast<double>(admitted.load()), 0.8 * ideal) << logs();
}

// 10 per user per hour: nothing refills during a test.
const std::string kHourlyRule = R"(
[[rule]]
name = "hourly"
match = { user = { each = true } }
limit = 10
period = "1h"
)";

TEST_P(ClusterTest, KilledNodeIsMarkedDeadAndRejoinsWithoutForgetting) {
  constexpr int kNodes = 3;
  start_cluster(kNodes, kHourlyRule);
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(15))) << logs();
  {
    // A key new to the cluster is probed for one news horizon at a third of
    // its balance on 3 nodes (docs/cluster.md, "Fair shares"): node 2 spends
    // its 6 as the probe ends.
    Client c = client(2);
    int spent = 0;
    ASSERT_TRUE(eventually([&] {
      if (spent < 6 && c.check({{"user", "carol"}}).allowed) ++spent;
      return spent == 6;
    }));
  }
  // The others learn node 2's consumption.
  ASSERT_TRUE(eventually([&] {
    Client c = client(0);
    const Decision d = c.check({{"user", "carol"}}, 0);
    return !d.rules.empty() && d.rules[0].remaining == 4;
  }, std::chrono::seconds(10))) << logs();

  daemons_[2]->stop(SIGKILL);
  EXPECT_TRUE(eventually([&] { return member_state(0, 2) == "dead" && member_state(1, 2) == "dead"; },
                         std::chrono::seconds(20)))
      << logs();
  // The survivors keep serving, with node 2's consumption still in force.
  {
    Client c = client(1);
    const Decision d = c.check({{"user", "carol"}});
    EXPECT_TRUE(d.allowed);
    ASSERT_FALSE(d.rules.empty());
    EXPECT_EQ(d.rules[0].remaining, 3u);
  }

  // Node 2 comes back with empty memory and learns what it consumed before.
  start_node(2);
  ASSERT_TRUE(daemons_[2]->wait_ready(specs_[2].socket)) << daemons_[2]->log();
  EXPECT_TRUE(eventually([&] { return member_state(0, 2) == "alive"; }, std::chrono::seconds(15)))
      << logs();
  EXPECT_TRUE(eventually([&] {
    Client c = client(2);
    const Decision d = c.check({{"user", "carol"}}, 0);
    return !d.rules.empty() && d.rules[0].remaining == 3;
  }, std::chrono::seconds(15))) << logs();
}

// Owner routing ([cluster] owners_per_key; docs/cluster.md, "Owner
// routing"): per-user keys, each used on three of five nodes, go to their
// owners and back to their users, not by gossip. Every user's nodes converge
// on its whole consumption, and status counts what went to owners.
TEST_P(ClusterTest, RoutedPerUserKeysReachTheirNodesThroughOwners) {
  constexpr int kNodes = 5;
  constexpr int kUsers = 10;
  start_cluster(kNodes,
                kHourlyRule + "\n[cluster]\nowners_per_key = 2\nrouted_min_members = 1\n");
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(20))) << logs();
  const auto nodes_of = [](int user) {
    return std::vector<int>{user % kNodes, (user + 1) % kNodes, (user + 3) % kNodes};
  };
  std::vector<std::int64_t> admitted(kUsers, 0);
  for (int round = 0; round < 3; ++round) {
    for (int user = 0; user < kUsers; ++user) {
      for (const int node : nodes_of(user)) {
        Client c = client(node);
        admitted[static_cast<std::size_t>(user)] +=
            c.check({{"user", "u" + std::to_string(user)}}).allowed ? 1 : 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int user = 0; user < kUsers; ++user) {
    ASSERT_GT(admitted[static_cast<std::size_t>(user)], 0) << user;
    const std::int64_t expected = 10 - admitted[static_cast<std::size_t>(user)];
    for (const int node : nodes_of(user)) {
      EXPECT_TRUE(eventually(
          [&] {
            Client c = client(node);
            const Decision d = c.check({{"user", "u" + std::to_string(user)}}, 0);
            return !d.rules.empty() && static_cast<std::int64_t>(d.rules[0].remaining) == expected;
          },
          std::chrono::seconds(10)))
          << "user " << user << " node " << node << "\n"
          << logs();
    }
  }
  std::uint64_t to_owners = 0;
  std::uint64_t forwarded = 0;
  std::uint64_t gossiped = 0;
  for (int node = 0; node < kNodes; ++node) {
    auto status = client(node).status();
    ASSERT_TRUE(status.has_value());
    for (const auto& [name, value] : status->counters) {
      if (name == "cluster_routed_entries_to_owners") to_owners += value;
      if (name == "cluster_routed_entries_forwarded") forwarded += value;
      if (name == "cluster_entries_gossiped") gossiped += value;
    }
  }
  std::printf("[cluster %s] routed: %llu entries to owners, %llu forwarded, %llu gossiped\n",
              GetParam().c_str(), static_cast<unsigned long long>(to_owners),
              static_cast<unsigned long long>(forwarded),
              static_cast<unsigned long long>(gossiped));
  EXPECT_GT(to_owners, 0u);
  EXPECT_GT(forwarded, 0u);
  EXPECT_EQ(gossiped, 0u);
}

// rlimitctl reset on one node resets the key on every node, and a node that
// restarts afterwards (its memory lost) learns the reset with the counters
// instead of charging the forgiven consumption again.
TEST_P(ClusterTest, AResetOnOneNodeResetsTheKeyEverywhereAndSurvivesARestart) {
  constexpr int kNodes = 3;
  start_cluster(kNodes, kHourlyRule);
  ASSERT_TRUE(eventually([&] { return all_alive(kNodes); }, std::chrono::seconds(15))) << logs();
  const auto remaining_on = [&](int node) -> std::int64_t {
    Client c = client(node);
    const Decision d = c.check({{"user", "dave"}}, 0);
    return d.rules.empty() ? -1 : static_cast<std::int64_t>(d.rules[0].remaining);
  };
  const auto everywhere = [&](std::int64_t remaining) {
    for (int i = 0; i < kNodes; ++i) {
      if (remaining_on(i) != remaining) return false;
    }
    return true;
  };
  {
    Client c = client(2);  // 6, spent as the probe allows (as above)
    int spent = 0;
    ASSERT_TRUE(eventually([&] {
      if (spent < 6 && c.check({{"user", "dave"}}).allowed) ++spent;
      return spent == 6;
    }));
  }
  ASSERT_TRUE(eventually([&] { return everywhere(4); }, std::chrono::seconds(10))) << logs();

  {
    Client c = client(0);
    std::string error;
    const std::vector<Descriptor> dave = {{"user", "dave"}};
    const auto reset = c.reset(dave, &error);
    ASSERT_TRUE(reset) << error;
  }
  EXPECT_TRUE(eventually([&] { return everywhere(10); }, std::chrono::seconds(10))) << logs();

  // Consumption after the reset counts, once.
  {
    Client c = client(1);
    ASSERT_TRUE(c.check({{"user", "dave"}}, 3).allowed);
  }
  EXPECT_TRUE(eventually([&] { return everywhere(7); }, std::chrono::seconds(10))) << logs();

  // Node 2 restarts with empty memory: it learns the counters and the reset.
  daemons_[2]->stop(SIGKILL);
  start_node(2);
  ASSERT_TRUE(daemons_[2]->wait_ready(specs_[2].socket)) << daemons_[2]->log();
  EXPECT_TRUE(eventually([&] { return member_state(0, 2) == "alive"; }, std::chrono::seconds(15)))
      << logs();
  EXPECT_TRUE(eventually([&] { return remaining_on(2) == 7; }, std::chrono::seconds(15))) << logs();
  EXPECT_TRUE(everywhere(7)) << logs();
}

TEST_P(ClusterTest, GracefulLeaveIsAnnounced) {
  start_cluster(3, kGlobalRule);
  ASSERT_TRUE(eventually([&] { return all_alive(3); }, std::chrono::seconds(15))) << logs();
  EXPECT_EQ(daemons_[2]->stop(SIGTERM), 0);
  EXPECT_TRUE(eventually([&] { return member_state(0, 2) == "left" && member_state(1, 2) == "left"; },
                         std::chrono::seconds(10)))
      << logs();
}

TEST_P(ClusterTest, GarbageAtThePeerPortChangesNothing) {
  start_cluster(2, kGlobalRule);
  ASSERT_TRUE(eventually([&] { return all_alive(2); }, std::chrono::seconds(15))) << logs();
  // Node 0 consumes; node 1 is charged for it. Waited for on node 1's
  // counter, not on its balance: the rule refills 100/s, so a balance shows
  // the charge only for a fraction of a second, which a loaded machine's
  // scheduling (or 30 checks spread over more than 10 ms) easily misses.
  Client c0 = client(0);
  std::int64_t consumed = 0;
  for (int i = 0; i < 30; ++i) consumed += c0.check({{"api", "x"}}).allowed ? 1 : 0;
  ASSERT_GT(consumed, 0);
  // What node 1 was charged for its peer: junk must add nothing to it.
  auto charged_for_peers = [&] {
    Client c = client(1);
    const auto status = c.status();
    if (!status) return std::int64_t{-1};
    for (const auto& [name, value] : status->counters) {
      if (name == "remote_tokens_charged") return static_cast<std::int64_t>(value);
    }
    return std::int64_t{-1};
  };
  ASSERT_TRUE(eventually([&] { return charged_for_peers() == consumed; }, std::chrono::seconds(10)))
      << "node 0 consumed " << consumed << ", node 1 was charged " << charged_for_peers() << "\n"
      << logs();

  // Random bytes, truncated headers and forged envelopes, over UDP and TCP.
  std::mt19937_64 rng(42);
  const int port = specs_[1].port;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng() % 1500, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 3 == 0 && junk.size() >= 4) std::memcpy(junk.data(), "RLP1", 4);  // forged magic
    ::sendto(udp, junk.data(), junk.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ::close(udp);
  for (int i = 0; i < 5; ++i) {
    const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(tcp, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      std::string junk(1000, '\0');
      for (char& ch : junk) ch = static_cast<char>(rng());
      (void)::send(tcp, junk.data(), junk.size(), MSG_NOSIGNAL);
    }
    ::close(tcp);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(daemons_[1]->running()) << daemons_[1]->log();
  // Nothing changed: the same consumption (counted, not read off balances,
  // which refill between two reads), still a healthy cluster.
  EXPECT_EQ(charged_for_peers(), consumed);
  EXPECT_TRUE(all_alive(2)) << logs();
  // The junk was counted.
  Client c1 = client(1);
  auto status = c1.status();
  ASSERT_TRUE(status.has_value());
  std::uint64_t rejected = 0;
  for (const auto& [name, value] : status->counters) {
    if (name.rfind("peer_", 0) == 0 &&
        (name.find("bad") != std::string::npos || name.find("malformed") != std::string::npos ||
         name.find("short") != std::string::npos || name.find("oversize") != std::string::npos ||
         name.find("unknown") != std::string::npos || name.find("magic") != std::string::npos)) {
      rejected += value;
    }
  }
  EXPECT_GE(rejected, 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, ClusterTest, ::testing::Values("gossip", "mesh"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rlimit::testing
