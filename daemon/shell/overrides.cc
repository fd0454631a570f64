#include "shell/overrides.h"

#include <unistd.h>

#include <array>
#include <climits>

#include "shell/envelope.h"
#include "shell/peer_address.h"
#include "wire/frame.h"

namespace rlimit::shell {

void apply_overrides(const SettingOverrides& overrides, config::DaemonSettings& settings) {
  if (overrides.socket_path) settings.socket_path = *overrides.socket_path;
  if (overrides.node_id) settings.node_id = *overrides.node_id;
  if (overrides.log_level) settings.log_level = *overrides.log_level;
  if (overrides.log_format) settings.log_format = *overrides.log_format;
  if (overrides.socket_mode) settings.socket_mode = *overrides.socket_mode;
  if (overrides.max_keys) settings.limiter.max_keys = *overrides.max_keys;
  if (settings.node_id.empty()) settings.node_id = host_name();
  if (settings.socket_path.empty()) settings.socket_path = wire::default_socket_path();
}

void apply_cluster_overrides(const SettingOverrides& overrides, config::ClusterSettings& settings) {
  if (overrides.cluster_mode) settings.mode = *overrides.cluster_mode;
  if (overrides.bind) settings.bind = *overrides.bind;
  if (overrides.advertise) settings.advertise = *overrides.advertise;
  if (overrides.seeds) settings.seeds = *overrides.seeds;
  if (overrides.secret_file) settings.secret_file = *overrides.secret_file;
  if (overrides.cluster_name) settings.name = *overrides.cluster_name;
  if (overrides.gossip_interval_us) settings.gossip_interval_us = *overrides.gossip_interval_us;
  if (overrides.fanout) settings.fanout = *overrides.fanout;
}

std::vector<std::string> check_cluster_settings(const config::ClusterSettings& settings) {
  std::vector<std::string> problems;
  // Redis mode has no peers: [redis] is checked by the config loader.
  if (settings.mode == config::ClusterMode::kNone || settings.mode == config::ClusterMode::kRedis) {
    return problems;
  }
  const std::string mode(config::cluster_mode_name(settings.mode));
  if (settings.secret_file.empty()) {
    problems.push_back("cluster mode " + mode +
                       " needs a secret file to authenticate peers: set [cluster] secret_file "
                       "or --secret-file");
  }
  if (settings.name.empty()) problems.push_back("the cluster name is empty");
  std::string error;
  if (!split_address(settings.bind, /*allow_port_zero=*/true, &error)) {
    problems.push_back("bind \"" + settings.bind + "\": " + error);
  }
  if (!settings.advertise.empty() &&
      !split_address(settings.advertise, /*allow_port_zero=*/false, &error)) {
    problems.push_back("advertise \"" + settings.advertise + "\": " + error);
  }
  for (const std::string& seed : settings.seeds) {
    if (!split_address(seed, /*allow_port_zero=*/false, &error)) {
      problems.push_back("seed \"" + seed + "\": " + error);
    }
  }
  // A peer message needs room beyond the envelope; 256 bytes is far below
  // any real path MTU and still fits a few counters.
  constexpr std::uint32_t kMinMtuBytes = kEnvelopeOverheadBytes + 219;
  if (settings.mtu_bytes < kMinMtuBytes) {
    problems.push_back("mtu_bytes " + std::to_string(settings.mtu_bytes) + " is below " +
                       std::to_string(kMinMtuBytes));
  }
  if (settings.gossip_interval_us <= 0) {
    problems.push_back("the gossip interval must be above 0");
  }
  return problems;
}

std::optional<config::ClusterMode> parse_cluster_mode(std::string_view text) {
  if (text == "none") return config::ClusterMode::kNone;
  if (text == "gossip") return config::ClusterMode::kGossip;
  if (text == "mesh") return config::ClusterMode::kMesh;
  if (text == "redis") return config::ClusterMode::kRedis;
  return std::nullopt;
}

std::optional<std::uint32_t> parse_socket_mode(std::string_view text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  std::uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (mode > 0777) return std::nullopt;
  return mode;
}

std::string host_name() {
  std::array<char, HOST_NAME_MAX + 1> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return std::string(name.data());
}

}  // namespace rlimit::shell
