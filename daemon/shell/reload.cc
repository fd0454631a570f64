#include "shell/reload.h"

#include <string_view>
#include <type_traits>

namespace rlimit::shell {
namespace {

template <typename T>
std::string show(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return "\"" + std::string(value) + "\"";
  } else {
    return std::to_string(value);
  }
}

}  // namespace

SettingsChange merge_reloaded_settings(const config::DaemonSettings& running,
                                       const config::DaemonSettings& loaded) {
  SettingsChange change;
  change.settings = running;
  config::DaemonSettings& next = change.settings;

  auto live = [&](std::string_view name, auto& field, const auto& value) {
    if (field == value) return;
    change.applied.push_back(std::string(name) + " " + show(field) + " -> " + show(value));
    field = value;
  };
  auto restart = [&](std::string_view name, const auto& field, const auto& value) {
    if (field == value) return;
    change.ignored.push_back(std::string(name));
  };

  live("log_level", next.log_level, loaded.log_level);
  live("max_frame_bytes", next.max_frame_bytes, loaded.max_frame_bytes);
  live("max_response_bytes", next.max_response_bytes, loaded.max_response_bytes);
  live("max_checks_per_frame", next.max_checks_per_frame, loaded.max_checks_per_frame);
  live("max_connections", next.max_connections, loaded.max_connections);
  live("sweep_interval_us", next.sweep_interval_us, loaded.sweep_interval_us);
  live("sweep_batch", next.sweep_batch, loaded.sweep_batch);
  live("shutdown_grace_us", next.shutdown_grace_us, loaded.shutdown_grace_us);
  live("max_keys", next.limiter.max_keys, loaded.limiter.max_keys);
  live("allow_reset", next.allow_reset, loaded.allow_reset);
  live("write_timeout_us", next.write_timeout_us, loaded.write_timeout_us);
  live("idle_timeout_us", next.idle_timeout_us, loaded.idle_timeout_us);

  restart("node_id", next.node_id, loaded.node_id);
  restart("socket_path", next.socket_path, loaded.socket_path);
  restart("socket_mode", next.socket_mode, loaded.socket_mode);
  restart("log_format", next.log_format, loaded.log_format);
  restart("busy_poll_us", next.busy_poll_us, loaded.busy_poll_us);
  restart("key_table_full", next.limiter.key_table_full, loaded.limiter.key_table_full);
  restart("allow_inline_limits", next.limiter.allow_inline_limits,
          loaded.limiter.allow_inline_limits);
  restart("max_descriptors_per_check", next.limiter.max_descriptors_per_check,
          loaded.limiter.max_descriptors_per_check);
  return change;
}

std::vector<std::string> changed_cluster_settings(const config::ClusterSettings& running,
                                                  const config::ClusterSettings& loaded) {
  std::vector<std::string> changed;
  auto check = [&](std::string_view name, const auto& a, const auto& b) {
    if (!(a == b)) changed.push_back("cluster." + std::string(name));
  };
  check("mode", running.mode, loaded.mode);
  check("name", running.name, loaded.name);
  check("bind", running.bind, loaded.bind);
  check("advertise", running.advertise, loaded.advertise);
  check("seeds", running.seeds, loaded.seeds);
  check("secret_file", running.secret_file, loaded.secret_file);
  check("gossip_interval_us", running.gossip_interval_us, loaded.gossip_interval_us);
  check("fanout", running.fanout, loaded.fanout);
  check("mtu_bytes", running.mtu_bytes, loaded.mtu_bytes);
  check("anti_entropy_interval_us", running.anti_entropy_interval_us,
        loaded.anti_entropy_interval_us);
  check("probe_interval_us", running.probe_interval_us, loaded.probe_interval_us);
  check("probe_timeout_us", running.probe_timeout_us, loaded.probe_timeout_us);
  check("indirect_probes", running.indirect_probes, loaded.indirect_probes);
  check("suspicion_timeout_us", running.suspicion_timeout_us, loaded.suspicion_timeout_us);
  check("dead_retention_us", running.dead_retention_us, loaded.dead_retention_us);
  check("max_members", running.max_members, loaded.max_members);
  check("reconnect_backoff_min_us", running.reconnect_backoff_min_us,
        loaded.reconnect_backoff_min_us);
  check("reconnect_backoff_max_us", running.reconnect_backoff_max_us,
        loaded.reconnect_backoff_max_us);
  check("max_peer_queue_bytes", running.max_peer_queue_bytes, loaded.max_peer_queue_bytes);
  check("max_packets_per_round", running.max_packets_per_round, loaded.max_packets_per_round);
  check("counter_retention_us", running.counter_retention_us, loaded.counter_retention_us);
  check("fair_share", running.fair_share, loaded.fair_share);
  check("replay_max_age_us", running.replay_max_age_us, loaded.replay_max_age_us);
  check("accept_unsequenced", running.accept_unsequenced, loaded.accept_unsequenced);
  check("max_origins", running.max_origins, loaded.max_origins);
  check("max_ledger_keys", running.max_ledger_keys, loaded.max_ledger_keys);
  check("max_entries_per_key", running.max_entries_per_key, loaded.max_entries_per_key);
  check("owners_per_key", running.owners_per_key, loaded.owners_per_key);
  check("routed_max_origins", running.routed_max_origins, loaded.routed_max_origins);
  return changed;
}

}  // namespace rlimit::shell
