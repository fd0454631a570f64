// The daemon's side of a cluster: owns the core::ClusterNode, the keyring,
// the peer transport (gossip or mesh) and the tick timer, and drives them:
// every payload received goes to node.on_payload, a timer calls node.tick
// every few milliseconds, and after each the node's outbox is sealed and
// sent. Member state changes are logged at info. The node is the only thing
// here that decides anything; this class only moves bytes and time.
//
// Runs on the server's single io_context thread; not thread-safe. Keeps Asio
// out of its header (server.cc and tests include it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "core/cluster_node.h"
#include "core/limiter.h"
#include "core/time.h"
#include "shell/counters.h"
#include "shell/envelope.h"

namespace boost::asio {
class io_context;
}

namespace rlimit::shell {

struct ClusterServiceOptions {
  config::ClusterSettings settings;  // mode must not be kNone
  std::string node_id;
  // Larger on every restart of this node: the shell passes the wall clock in
  // microseconds at start (see server.cc).
  std::uint64_t incarnation = 0;
  std::uint64_t seed = 0;  // drives the node's random choices
  // The rule set in force at start (advertised from the first message), and
  // what to do with a newer one received whole from a peer (the server checks
  // and applies it, then calls set_rules or refuse_rules).
  core::RulesVersion rules;
  std::string rules_text;
  std::function<void(core::RulesSync::Received received)> on_rules;
};

// What peers (or, in Redis mode, the store) may make the ledger hold:
// [cluster] max_origins, max_ledger_keys, max_entries_per_key.
core::Ledger::Bounds make_ledger_bounds(const config::ClusterSettings& settings);

// The core's options for `settings` once the peer socket is bound at
// `bound_address` (the real port when the bind asked for port 0). Pure.
core::ClusterOptions make_cluster_options(const ClusterServiceOptions& options,
                                          const std::string& bound_address);

// How often the node is ticked: min(gossip_interval, 5 ms), at least 1 ms.
core::TimeUs tick_interval_us(const config::ClusterSettings& settings);

class ClusterService {
 public:
  // Binds the peer socket, builds the node and starts it (Join to the
  // seeds). `limiter` must be built with LimiterOptions::replicated and
  // outlive the service. On failure returns null and sets `error`.
  static std::unique_ptr<ClusterService> start(boost::asio::io_context& io,
                                               ClusterServiceOptions options, Keyring keyring,
                                               core::Limiter& limiter, std::string& error);

  ~ClusterService();
  ClusterService(const ClusterService&) = delete;
  ClusterService& operator=(const ClusterService&) = delete;

  // Graceful stop: announces the leave, sends it (waiting up to
  // kLeaveFlushUs for a mesh's queued frames), then stops the transport and
  // the timer and calls `done` once. Idempotent (only the first `done` runs).
  static constexpr core::TimeUs kLeaveFlushUs = 50'000;
  void leave(std::function<void()> done);

  // Installs a re-read keyring (SIGHUP): takes effect for the next datagram.
  void replace_keyring(Keyring keyring);

  // The rule set now in force here (advertised from the next message on).
  void set_rules(const core::RulesVersion& version, std::string text);
  // A received rule set this node cannot use: not fetched again.
  void refuse_rules(const core::RulesVersion& version);
  // A received rule set this node could not keep now (its state file could
  // not be written): fetched again after the sync's retry backoff.
  void retry_rules_later(const core::RulesVersion& version);

  const core::ClusterNode& node() const;
  const PeerCounters& counters() const;
  // "gossip" or "mesh".
  const char* mode_name() const;
  // The peer socket's bound address ("ip:port").
  std::string local_address() const;
  bool stopped() const;

 private:
  struct State;
  explicit ClusterService(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace rlimit::shell
