#include "support/redis_cluster_process.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <thread>

#include "support/daemon_process.h"
#include "support/redis_inspector.h"

namespace rlimit::testing {
namespace {

// The value of "name:value" in an INFO text, "" when absent.
std::string info_field(const std::string& info, const std::string& name) {
  const std::string label = name + ":";
  const std::size_t at = info.find(label);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + label.size();
  return info.substr(begin, info.find_first_of("\r\n", begin) - begin);
}

// Bounds of the loops below.
constexpr int kMaxMigrateRounds = 1000;  // GETKEYSINSLOT pages of 100 keys
constexpr int kMaxScanRounds = 10'000;

}  // namespace

RedisClusterProcess::RedisClusterProcess(const std::string& dir, int masters,
                                         int replicas_per_master, int node_timeout_ms)
    : dir_(dir), replicas_per_master_(replicas_per_master) {
  const int servers = masters * (1 + replicas_per_master);
  for (int i = 0; i < servers; ++i) {
    const int port = free_port();
    const int bus_port = free_port();
    if (port <= 0 || bus_port <= 0) throw std::runtime_error("no free loopback port");
    ports_.push_back(port);
    servers_.push_back(std::make_unique<RedisProcess>(
        dir, port,
        std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                 "nodes-" + std::to_string(port) + ".conf", "--cluster-port",
                                 std::to_string(bus_port), "--cluster-node-timeout",
                                 std::to_string(node_timeout_ms)}));
  }
}

std::string RedisClusterProcess::start(std::chrono::milliseconds timeout) {
  for (auto& s : servers_) {
    if (!s->wait_ready())
      return "redis-server on port " + std::to_string(s->port()) + " did not start:\n" + s->log();
  }
  std::vector<std::string> create = {kRedisCliPath, "--cluster", "create"};
  for (const int port : ports_) create.push_back("127.0.0.1:" + std::to_string(port));
  create.insert(create.end(),
                {"--cluster-replicas", std::to_string(replicas_per_master_), "--cluster-yes"});
  const RunResult created = run_program(create, timeout);
  if (created.exit_code != 0) return "redis-cli --cluster create failed:\n" + created.output;
  const bool ready = eventually(
      [&] {
        if (!settled()) return false;
        for (const int port : ports_) {
          if (is_master(port)) continue;
          RedisInspector redis(port);
          if (info_field(redis.text({"INFO", "replication"}), "master_link_status") != "up") {
            return false;
          }
        }
        return true;
      },
      timeout);
  return ready ? "" : "the cluster did not settle:\n" + created.output + logs();
}

RedisProcess& RedisClusterProcess::server(int port) {
  for (auto& s : servers_) {
    if (s->port() == port) return *s;
  }
  throw std::invalid_argument("no redis-server on port " + std::to_string(port));
}

std::string RedisClusterProcess::toml_addresses() const {
  std::string out;
  for (const int port : ports_) {
    if (!out.empty()) out += ", ";
    out += "\"127.0.0.1:" + std::to_string(port) + "\"";
  }
  return out;
}

std::string RedisClusterProcess::node_id(int port) {
  return RedisInspector(port).text({"CLUSTER", "MYID"});
}

bool RedisClusterProcess::is_master(int port) {
  return info_field(RedisInspector(port).text({"INFO", "replication"}), "role") == "master";
}

int RedisClusterProcess::master_of(int replica_port) {
  const std::string info = RedisInspector(replica_port).text({"INFO", "replication"});
  if (info_field(info, "role") != "slave") return -1;
  const std::string port = info_field(info, "master_port");
  return port.empty() ? -1 : std::stoi(port);
}

int RedisClusterProcess::replica_of(int master_port) {
  for (const int port : ports_) {
    if (port == master_port || !server(port).running()) continue;
    const std::string info = RedisInspector(port).text({"INFO", "replication"});
    if (info_field(info, "role") == "slave" &&
        info_field(info, "master_port") == std::to_string(master_port) &&
        info_field(info, "master_link_status") == "up") {
      return port;
    }
  }
  return -1;
}

int RedisClusterProcess::owner_of_slot(int slot, int asked_port) {
  Reply slots = RedisInspector(asked_port).command({"CLUSTER", "SLOTS"});
  if (!slots || slots->type != REDIS_REPLY_ARRAY) return -1;
  for (std::size_t i = 0; i < slots->elements; ++i) {
    const redisReply* range = slots->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
    if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
      const redisReply* master = range->element[2];
      if (master->type != REDIS_REPLY_ARRAY || master->elements < 2) return -1;
      return static_cast<int>(master->element[1]->integer);
    }
  }
  return -1;
}

bool RedisClusterProcess::settled(int slot) {
  int owner = -2;
  for (const int port : ports_) {
    if (!server(port).running()) continue;
    RedisInspector redis(port);
    if (info_field(redis.text({"CLUSTER", "INFO"}), "cluster_state") != "ok") return false;
    if (slot < 0) continue;
    const int seen = owner_of_slot(slot, port);
    if (seen < 0 || (owner != -2 && seen != owner)) return false;
    owner = seen;
  }
  return true;
}

std::string RedisClusterProcess::migrate_slot(int slot, int to_port,
                                              std::chrono::milliseconds pause) {
  const int from_port = owner_of_slot(slot, to_port);
  if (from_port < 0) return "no owner of slot " + std::to_string(slot);
  if (from_port == to_port) return "";
  const std::string s = std::to_string(slot);
  const std::string from_id = node_id(from_port);
  const std::string to_id = node_id(to_port);
  RedisInspector from(from_port);
  RedisInspector to(to_port);
  if (std::string r = to.text({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}); r != "OK") {
    return "SETSLOT IMPORTING: " + r;
  }
  if (std::string r = from.text({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}); r != "OK") {
    return "SETSLOT MIGRATING: " + r;
  }
  std::this_thread::sleep_for(pause);
  for (int round = 0;; ++round) {
    if (round == kMaxMigrateRounds) return "slot " + s + " still holds keys";
    Reply keys = from.command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys || keys->type != REDIS_REPLY_ARRAY) return "GETKEYSINSLOT failed";
    if (keys->elements == 0) break;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0",
                                        "5000",    "KEYS"};
    for (std::size_t i = 0; i < keys->elements; ++i) {
      migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
    }
    if (std::string r = from.text(migrate); r != "OK" && r != "NOKEY") return "MIGRATE: " + r;
  }
  std::this_thread::sleep_for(pause);
  // The target first, then the source, then the others (as redis-cli does).
  std::vector<int> order = {to_port, from_port};
  for (const int port : ports_) {
    if (port != to_port && port != from_port && server(port).running() && is_master(port)) {
      order.push_back(port);
    }
  }
  for (const int port : order) {
    if (std::string r = RedisInspector(port).text({"CLUSTER", "SETSLOT", s, "NODE", to_id});
        r != "OK") {
      return "SETSLOT NODE on " + std::to_string(port) + ": " + r;
    }
  }
  return "";
}

std::vector<int> RedisClusterProcess::slots_with_keys(int port, const std::string& prefix) {
  RedisInspector redis(port);
  std::set<int> slots;
  std::string cursor = "0";
  for (int round = 0; round < kMaxScanRounds; ++round) {
    Reply page = redis.command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
    if (!page || page->type != REDIS_REPLY_ARRAY || page->elements != 2) break;
    cursor.assign(page->element[0]->str, page->element[0]->len);
    const redisReply* keys = page->element[1];
    for (std::size_t i = 0; i < keys->elements; ++i) {
      const long long slot = redis.integer(
          {"CLUSTER", "KEYSLOT", std::string(keys->element[i]->str, keys->element[i]->len)});
      if (slot >= 0) slots.insert(static_cast<int>(slot));
    }
    if (cursor == "0") break;
  }
  return {slots.begin(), slots.end()};
}

std::string RedisClusterProcess::logs() const {
  std::string out;
  for (const auto& s : servers_) {
    out += "---- redis-server " + std::to_string(s->port()) + "\n" + s->log();
  }
  return out;
}

}  // namespace rlimit::testing
