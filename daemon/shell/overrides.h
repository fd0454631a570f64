// Settings given on the rlimitd command line, which win over the config
// file's (at start and again on every reload), and the defaults the daemon
// fills in for settings left empty. Plain data and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace rlimit::shell {

struct SettingOverrides {
  std::optional<std::string> socket_path;
  std::optional<std::string> node_id;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  std::optional<std::uint32_t> socket_mode;
  std::optional<std::size_t> max_keys;
  // [cluster]
  std::optional<config::ClusterMode> cluster_mode;
  std::optional<std::string> bind;
  std::optional<std::string> advertise;
  std::optional<std::vector<std::string>> seeds;
  std::optional<std::string> secret_file;
  std::optional<std::string> cluster_name;
  std::optional<std::int64_t> gossip_interval_us;
  std::optional<std::uint32_t> fanout;
};

// Applies the set overrides to `settings`, then fills the empty ones: node_id
// with the host name, socket_path with wire::default_socket_path().
void apply_overrides(const SettingOverrides& overrides, config::DaemonSettings& settings);

// Applies the set [cluster] overrides to `settings`.
void apply_cluster_overrides(const SettingOverrides& overrides, config::ClusterSettings& settings);

// What keeps `settings` (file and flags merged) from running, one message
// each: a cluster mode without a secret file, addresses that are not
// host:port, sizes too small to carry a message. Empty when runnable; always
// empty with mode kNone.
std::vector<std::string> check_cluster_settings(const config::ClusterSettings& settings);

// Parses --cluster-mode: none, gossip or mesh.
std::optional<config::ClusterMode> parse_cluster_mode(std::string_view text);

// Parses an octal permission such as "660" or "0660" (at most 0777).
std::optional<std::uint32_t> parse_socket_mode(std::string_view text);

// The host name, or "localhost" if it cannot be read.
std::string host_name();

}  // namespace rlimit::shell
