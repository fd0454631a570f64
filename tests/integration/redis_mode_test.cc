// Redis mode with the real things: several rlimitd ([cluster] mode = "redis")
// sharing consumption through a real redis-server, or a real three-master
// Redis Cluster, all on loopback ports the test picks. Counters are absolute
// and merged by max, so what each node was charged for the others is exact:
// the sum of what the others admitted, however the syncs interleaved, and
// after an outage too (nothing lost, nothing twice).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/client.h"
#include "support/daemon_process.h"
#include "support/redis_process.h"

namespace rlimit::testing {
namespace {

using namespace std::chrono_literals;

// 30 per key per hour: nothing refills during a test.
constexpr std::int64_t kLimit = 30;

std::string rules_toml() {
  return R"(
[[rule]]
name = "hourly"
match = { api = { each = true } }
limit = 30
period = "1h"
)";
}

class RedisModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_available()) GTEST_SKIP() << "redis-server not installed";
  }

  void TearDown() override {
    for (auto& d : daemons_) {
      if (d && d->running()) d->stop(SIGTERM, 5s);
    }
  }

  // Starts `n` daemons in Redis mode against `addresses`.
  void start_nodes(int n, const std::string& addresses, bool cluster) {
    const std::string config =
        dir_.write("rlimitd.toml", "[cluster]\nmode = \"redis\"\n\n[redis]\naddresses = [" +
                                       addresses + "]\ncluster = " + (cluster ? "true" : "false") +
                                       "\nsync_interval = \"20ms\"\nconnect_timeout = \"200ms\"\n"
                                       "command_timeout = \"300ms\"\nkey_prefix = \"t:\"\n" +
                                       rules_toml());
    for (int i = 0; i < n; ++i) {
      sockets_.push_back(dir_.file("node" + std::to_string(i) + ".sock"));
      daemons_.push_back(std::make_unique<DaemonProcess>(
          dir_,
          std::vector<std::string>{"--config", config, "--socket", sockets_.back(), "--node-id",
                                   "node" + std::to_string(i), "--log-level", "info"},
          "node" + std::to_string(i) + ".log"));
    }
    for (int i = 0; i < n; ++i) ASSERT_TRUE(daemons_[i]->wait_ready(sockets_[i])) << logs();
  }

  Client client(int i) {
    ClientOptions options;
    options.socket_path = sockets_[static_cast<std::size_t>(i)];
    options.timeout_ms = 2000;
    return Client(options);
  }

  std::int64_t counter(int i, const std::string& name) {
    Client c = client(i);
    const auto status = c.status();
    if (!status) return -1;
    for (const auto& [n, v] : status->counters) {
      if (n == name) return static_cast<std::int64_t>(v);
    }
    return -1;
  }

  std::string logs() {
    std::string all;
    for (auto& d : daemons_) all += d->log() + "\n----\n";
    return all;
  }

  // Each node's store_tokens_charged_remote equals what the others admitted.
  bool charged_for_the_others(const std::vector<std::int64_t>& admitted) {
    std::int64_t total = 0;
    for (std::int64_t a : admitted) total += a;
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      if (counter(static_cast<int>(i), "store_tokens_charged_remote") != total - admitted[i]) {
        return false;
      }
    }
    return true;
  }

  // Round-robin checks of `key` over the nodes, `rounds` each, 5 ms apart;
  // adds what each node admitted to `admitted`.
  void drive(const std::string& key, int rounds, std::vector<std::int64_t>& admitted) {
    std::vector<Client> clients;
    for (std::size_t i = 0; i < daemons_.size(); ++i)
      clients.push_back(client(static_cast<int>(i)));
    admitted.resize(daemons_.size(), 0);
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t i = 0; i < clients.size(); ++i) {
        const Decision d = clients[i].check({{"api", key}});
        ASSERT_NE(d.status, DecisionStatus::kUnavailable) << logs();
        admitted[i] += d.allowed ? 1 : 0;
      }
      std::this_thread::sleep_for(5ms);
    }
  }

  TempDir dir_;
  std::vector<std::string> sockets_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

TEST_F(RedisModeTest, ThreeNodesHoldOneLimitThroughOneRedis) {
  RedisProcess redis(dir_.path(), free_port());
  ASSERT_TRUE(redis.wait_ready()) << redis.log();
  start_nodes(3, "\"" + redis.address() + "\"", false);
  std::vector<std::int64_t> admitted;
  drive("search", 40, admitted);
  const std::int64_t total = admitted[0] + admitted[1] + admitted[2];
  std::printf("[redis mode] admitted %lld + %lld + %lld = %lld of a limit of %lld\n",
              static_cast<long long>(admitted[0]), static_cast<long long>(admitted[1]),
              static_cast<long long>(admitted[2]), static_cast<long long>(total),
              static_cast<long long>(kLimit));
  // A new key is spent on by every node before any hears of the others (no
  // fair share yet: no other origin seen), then news arrives each 20 ms sync.
  EXPECT_GE(total, kLimit);
  EXPECT_LE(total, kLimit + 12) << logs();
  EXPECT_TRUE(eventually([&] { return charged_for_the_others(admitted); }, 10s)) << logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(counter(i, "store_down"), 0) << logs();
    EXPECT_GT(counter(i, "redis_round_trips"), 0);
  }
}

TEST_F(RedisModeTest, RedisDownMeansFailLocalAndNothingIsLostOrChargedTwice) {
  const int port = free_port();
  auto redis = std::make_unique<RedisProcess>(dir_.path(), port);
  ASSERT_TRUE(redis->wait_ready()) << redis->log();
  start_nodes(3, "\"" + redis->address() + "\"", false);
  std::vector<std::int64_t> admitted;
  drive("before", 5, admitted);
  ASSERT_TRUE(eventually([&] { return charged_for_the_others(admitted); }, 10s)) << logs();

  // Redis dies: every node keeps deciding from its own state, says so once.
  redis->kill();
  std::vector<std::int64_t> during;
  drive("during", 4, during);
  ASSERT_TRUE(eventually(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (counter(i, "store_down") < 1 || counter(i, "store_healthy") != 0) return false;
        }
        return true;
      },
      10s))
      << logs();
  // Each node admitted its own 4: alone, it knows of no other spender.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(during[static_cast<std::size_t>(i)], 4);

  // Redis returns (empty: no persistence): what changed while it was away
  // is written, with its latest values, and every node learns it once.
  redis = std::make_unique<RedisProcess>(dir_.path(), port);
  ASSERT_TRUE(redis->wait_ready()) << redis->log();
  std::vector<std::int64_t> all = admitted;
  for (std::size_t i = 0; i < all.size(); ++i) all[i] += during[i];
  EXPECT_TRUE(eventually([&] { return charged_for_the_others(all); }, 15s)) << logs();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(counter(i, "store_healthy"), 1) << logs();
  EXPECT_NE(daemons_[0]->log().find("deciding from this node's state alone"), std::string::npos);
  EXPECT_NE(daemons_[0]->log().find("the store answers again"), std::string::npos);
}

TEST_F(RedisModeTest, ThreeNodesShareManyKeysThroughARedisCluster) {
  std::vector<std::unique_ptr<RedisProcess>> masters;
  std::vector<std::string> create = {kRedisCliPath, "--cluster", "create"};
  std::string addresses;
  for (int i = 0; i < 3; ++i) {
    const int port = free_port();
    const int bus_port = free_port();
    ASSERT_GT(port, 0);
    masters.push_back(std::make_unique<RedisProcess>(
        dir_.path(), port,
        std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                 "nodes-" + std::to_string(port) + ".conf", "--cluster-port",
                                 std::to_string(bus_port)}));
    create.push_back("127.0.0.1:" + std::to_string(port));
    if (i == 0) addresses = "\"127.0.0.1:" + std::to_string(port) + "\"";
  }
  for (auto& m : masters) ASSERT_TRUE(m->wait_ready()) << m->log();
  create.push_back("--cluster-yes");
  const RunResult created = run_program(create, 30s);
  ASSERT_EQ(created.exit_code, 0) << created.output;
  ASSERT_TRUE(eventually(
      [&] {
        const RunResult info = run_program(
            {kRedisCliPath, "-p", std::to_string(masters[0]->port()), "cluster", "info"}, 5s);
        return info.output.find("cluster_state:ok") != std::string::npos;
      },
      20s));
  start_nodes(3, addresses, true);
  // 12 keys spread over the three masters' slots.
  std::vector<std::vector<std::int64_t>> admitted(12);
  for (int k = 0; k < 12; ++k) drive("user" + std::to_string(k), 3, admitted[k]);
  std::vector<std::int64_t> per_node(3, 0);
  for (const auto& a : admitted) {
    for (int i = 0; i < 3; ++i)
      per_node[static_cast<std::size_t>(i)] += a[static_cast<std::size_t>(i)];
  }
  EXPECT_TRUE(eventually([&] { return charged_for_the_others(per_node); }, 15s)) << logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(counter(i, "store_down"), 0) << logs();
    EXPECT_GT(counter(i, "redis_slot_refreshes"), 0);
  }
}

}  // namespace
}  // namespace rlimit::testing
