// Test support: a real Redis Cluster on loopback ports (Debian's
// redis-server with --cluster-enabled yes, joined by redis-cli --cluster
// create), with the operations a test needs to move it under a client's
// feet: a slot migrated key by key (the MIGRATING/IMPORTING dance that makes
// clients see ASK, then MOVED), a replica promoted by CLUSTER FAILOVER, a
// master killed so that its replica takes over. Every wait is bounded; the
// destructor kills every server. Not thread-safe; one owner.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_process.h"

namespace rlimit::testing {

class RedisClusterProcess {
 public:
  // `masters` masters with `replicas_per_master` replicas each, files in
  // `dir`; `node_timeout_ms` is cluster-node-timeout: how long a master may
  // be unreachable before its replica takes over.
  RedisClusterProcess(const std::string& dir, int masters, int replicas_per_master,
                      int node_timeout_ms = 15'000);

  // Starts the servers, creates the cluster and waits until every node says
  // cluster_state:ok and every replica's link to its master is up. "" on
  // success, else what failed (with the servers' output).
  std::string start(std::chrono::milliseconds timeout = std::chrono::seconds(40));

  // Every server's port, masters first as created (roles change later).
  const std::vector<int>& ports() const { return ports_; }
  RedisProcess& server(int port);
  // "\"127.0.0.1:p1\", \"127.0.0.1:p2\", ...": every server, for a TOML array.
  std::string toml_addresses() const;

  std::string node_id(int port);
  bool is_master(int port);
  // The port of the master `replica_port` replicates, -1 if it does not.
  int master_of(int replica_port);
  // A replica of `master_port` whose link is up, -1 if none.
  int replica_of(int master_port);
  // The master serving `slot`, as the live node `asked_port` sees it; -1 if
  // unknown.
  int owner_of_slot(int slot, int asked_port);
  // True when every live server says cluster_state:ok and agrees on the
  // owner of `slot` (pass -1 to skip that).
  bool settled(int slot = -1);

  // Moves `slot` from its master to the master `to_port` while clients keep
  // working: IMPORTING on the target, MIGRATING on the source, `pause`, each
  // key moved with MIGRATE, `pause`, then SETSLOT NODE on every live master.
  // "" on success, else the step that failed.
  std::string migrate_slot(int slot, int to_port, std::chrono::milliseconds pause);
  // The slots (ascending) holding keys starting with `prefix` on `port`
  // (a SCAN of that server).
  std::vector<int> slots_with_keys(int port, const std::string& prefix);

  std::string logs() const;

 private:
  std::string dir_;
  int replicas_per_master_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<RedisProcess>> servers_;
};

}  // namespace rlimit::testing
