// Redis mode with the real things: several rlimitd ([cluster] mode = "redis")
// sharing consumption through a real redis-server, or a real three-master
// Redis Cluster, all on loopback ports the test picks. Counters are absolute
// and merged by max, so what each node was charged for the others is exact:
// the sum of what the others admitted, however the syncs interleaved, and
// after an outage too (nothing lost, nothing twice).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/client.h"
#include "support/daemon_process.h"
#include "support/redis_cluster_process.h"
#include "support/redis_inspector.h"
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

# 50 per second: for stand-ins, which estimate rates.
[[rule]]
name = "per-second"
match = { svc = { each = true } }
limit = 50
period = "1s"
burst = 50

# Never binding in a test: every check changes the counters.
[[rule]]
name = "bulk"
match = { tenant = { each = true } }
limit = 100000000
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
  // `more_redis` adds lines to [redis]. Stand-ins are off unless it says
  // otherwise: they charge the others' estimated use while Redis fails,
  // which a real counter below the estimate does not undo (by design), so
  // the exact accounting these tests check holds only without them.
  void start_nodes(int n, const std::string& addresses, bool cluster,
                   const std::string& sync_interval = "20ms",
                   const std::string& more_redis = "standin_max = \"0s\"\n") {
    const std::string config =
        dir_.write("rlimitd.toml", "[cluster]\nmode = \"redis\"\n\n[redis]\naddresses = [" +
                                       addresses + "]\ncluster = " + (cluster ? "true" : "false") +
                                       "\nsync_interval = \"" + sync_interval + "\"\nconnect_timeout = \"200ms\"\n"
                                       "command_timeout = \"300ms\"\nkey_prefix = \"t:\"\n" + more_redis +
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
  RedisClusterProcess cluster(dir_.path(), 3, 0);
  ASSERT_EQ(cluster.start(), "");
  start_nodes(3, cluster.toml_addresses(), true);
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

// Stand-ins: three nodes spend on one key limited to 50/s, each demanding
// about 100/s; while Redis is down each charges the others at their earlier
// rates, so the three together stay near the limit (alone: 50/s each).
TEST_F(RedisModeTest, WhileRedisIsDownEachNodeChargesTheOthersAtTheirEarlierRates) {
  auto redis = std::make_unique<RedisProcess>(dir_.path(), free_port());
  ASSERT_TRUE(redis->wait_ready()) << redis->log();
  start_nodes(3, "\"" + redis->address() + "\"", false, "50ms", "standin_max = \"60s\"\n");
  std::vector<Client> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(client(i));
  // Rounds of one check per node every 10 ms for `seconds`; admitted in all.
  auto run = [&](double seconds) {
    std::int64_t admitted = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      for (Client& c : clients) admitted += c.check({{"svc", "s"}}).allowed ? 1 : 0;
      std::this_thread::sleep_for(10ms);
    }
    return admitted;
  };
  run(4.5);  // the rates: over the last 1-2 s of the store's answers, past the burst
  redis->kill();
  const std::int64_t during = run(3);
  std::printf("[stand-ins] admitted %lld in 3 s with Redis down (limit 50/s)\n",
              static_cast<long long>(during));
  EXPECT_LE(during, 260) << logs();  // alone: up to 450 (and the burst)
  EXPECT_GE(during, 60) << logs();   // and no silence
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(counter(i, "store_tokens_charged_standin"), 0) << logs();
    EXPECT_EQ(counter(i, "store_healthy"), 0);
  }
}

// A graceful stop writes what the store lacks: with a sync interval of a
// minute (the most), nothing reaches Redis while the node runs, and
// everything does when it stops (SIGTERM).
TEST_F(RedisModeTest, AGracefulStopWritesTheLastInterval) {
  RedisProcess redis(dir_.path(), free_port());
  ASSERT_TRUE(redis.wait_ready()) << redis.log();
  start_nodes(1, "\"" + redis.address() + "\"", false, "1m");
  std::vector<std::int64_t> admitted;
  drive("flushed", 7, admitted);
  ASSERT_EQ(admitted[0], 7);
  auto stored = [&] {  // the sum of every counter under the test's prefix
    RedisInspector inspector(redis.port());
    long long sum = 0;
    Reply keys = inspector.command({"KEYS", "t:*"});
    for (std::size_t i = 0; keys && i < keys->elements; ++i) {
      Reply hash = inspector.command(
          {"HGETALL", std::string(keys->element[i]->str, keys->element[i]->len)});
      for (std::size_t f = 1; hash && f < hash->elements; f += 2) {
        sum += std::stoll(std::string(hash->element[f]->str, hash->element[f]->len));
      }
    }
    return sum;
  };
  // At most what the first tick found, before the checks or among them.
  EXPECT_LT(stored(), 7);
  ASSERT_EQ(daemons_[0]->stop(SIGTERM, 10s), 0) << logs();
  EXPECT_EQ(stored(), 7) << logs();
  EXPECT_NE(daemons_[0]->log().find("wrote the last 1 keys on stop"), std::string::npos) << logs();
}

// A Redis Cluster of three masters with a replica each moves under the
// daemons while they run traffic on 24 keys: a replica is promoted by
// CLUSTER FAILOVER, every slot holding a key on another master is migrated
// key by key (ASK during, MOVED after), and a third master is SIGKILLed so
// that its replica takes over. No check waits for any of it, and afterwards
// each node's charge for the others is exact. A write the killed master had
// acknowledged but not yet replicated is lost with it; the traffic that goes
// on writes every key again with its latest absolute value, which restores
// it (max-merge): this is why the test keeps the traffic running after the
// failover.
TEST_F(RedisModeTest, ClusterFailoverAndReshardingWhileTrafficRuns) {
  RedisClusterProcess cluster(dir_.path(), 3, 1, /*node_timeout_ms=*/2000);
  ASSERT_EQ(cluster.start(), "");
  start_nodes(3, cluster.toml_addresses(), true);

  constexpr int kKeys = 24;
  std::atomic<bool> stop{false};
  std::vector<std::atomic<std::int64_t>> admitted(3);
  std::atomic<std::int64_t> unavailable{0};
  std::thread traffic([&] {
    std::vector<Client> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(client(i));
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    for (int round = 0; !stop.load() && std::chrono::steady_clock::now() < deadline; ++round) {
      for (int i = 0; i < 3; ++i) {
        const std::string key = "t" + std::to_string((round + i) % kKeys);
        const Decision d = clients[static_cast<std::size_t>(i)].check({{"tenant", key}});
        if (d.status == DecisionStatus::kUnavailable) ++unavailable;
        if (d.allowed) ++admitted[static_cast<std::size_t>(i)];
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Join() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } join{stop, traffic};
  std::this_thread::sleep_for(500ms);
  std::vector<int> masters;
  for (const int port : cluster.ports()) {
    if (cluster.is_master(port)) masters.push_back(port);
  }
  ASSERT_EQ(masters.size(), 3u) << cluster.logs();

  // 1. A replica takes over from its master on request (no write lost).
  const int promoted = cluster.replica_of(masters[0]);
  ASSERT_GT(promoted, 0) << cluster.logs();
  EXPECT_EQ(RedisInspector(promoted).text({"CLUSTER", "FAILOVER"}), "OK");
  ASSERT_TRUE(eventually(
      [&] {
        return cluster.is_master(promoted) && cluster.master_of(masters[0]) == promoted &&
               cluster.settled();
      },
      30s))
      << cluster.logs();
  std::this_thread::sleep_for(300ms);

  // 2. Resharding: every slot holding a key on masters[1] moves to the
  // promoted replica, one key at a time.
  const std::vector<int> slots = cluster.slots_with_keys(masters[1], "t:");
  ASSERT_FALSE(slots.empty());
  for (const int slot : slots) ASSERT_EQ(cluster.migrate_slot(slot, promoted, 50ms), "");
  ASSERT_TRUE(eventually([&] { return cluster.settled(slots.front()); }, 20s)) << cluster.logs();
  EXPECT_TRUE(cluster.slots_with_keys(masters[1], "t:").empty());
  std::this_thread::sleep_for(300ms);

  // 3. A master dies; its replica is elected after cluster-node-timeout.
  const int survivor = cluster.replica_of(masters[2]);
  ASSERT_GT(survivor, 0) << cluster.logs();
  cluster.server(masters[2]).kill();
  ASSERT_TRUE(eventually([&] { return cluster.is_master(survivor) && cluster.settled(); }, 30s))
      << cluster.logs();
  std::this_thread::sleep_for(1s);  // traffic writes every key again
  stop = true;
  traffic.join();

  std::vector<std::int64_t> per_node;
  for (const auto& a : admitted) per_node.push_back(a.load());
  std::printf("[redis cluster moves] admitted %lld + %lld + %lld; %zu slots migrated\n",
              static_cast<long long>(per_node[0]), static_cast<long long>(per_node[1]),
              static_cast<long long>(per_node[2]), slots.size());
  EXPECT_EQ(unavailable.load(), 0);
  EXPECT_TRUE(eventually([&] { return charged_for_the_others(per_node); }, 20s)) << logs();
  std::int64_t redirects = 0;
  std::int64_t lost = 0;
  for (int i = 0; i < 3; ++i) {
    redirects += counter(i, "redis_moved") + counter(i, "redis_ask");
    lost += counter(i, "redis_connections_lost") + counter(i, "redis_connect_failures");
    EXPECT_EQ(counter(i, "store_healthy"), 1) << logs();
  }
  std::printf("[redis cluster moves] MOVED + ASK %lld, connections lost or refused %lld\n",
              static_cast<long long>(redirects), static_cast<long long>(lost));
  EXPECT_GT(redirects, 0);  // the nodes met the moves
  EXPECT_GT(lost, 0);       // and the dead master
}

}  // namespace
}  // namespace rlimit::testing
