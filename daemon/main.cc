// rlimitd: parses flags, loads and checks the config (and, in a cluster, the
// secret file), then runs the server in the foreground. Exit codes: 0 clean
// stop, 1 runtime failure (socket in use, loop failed), 2 bad flags, an
// invalid config or an unusable secret file.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "shell/envelope.h"
#include "shell/logging.h"
#include "shell/overrides.h"
#include "shell/peer_address.h"
#include "shell/server.h"

namespace {

constexpr int kExitUsage = 2;

// A CLI11 validator for one host:port (config::parse_host_port's rules);
// `allow_port_zero` for a bind address.
CLI::Validator host_port_validator(bool allow_port_zero) {
  return CLI::Validator(
      [allow_port_zero](std::string& text) -> std::string {
        std::string error;
        if (rlimit::shell::split_address(text, allow_port_zero, &error)) return "";
        return error;
      },
      "HOST:PORT");
}

}  // namespace

int main(int argc, char** argv) {
  using rlimit::shell::SettingOverrides;

  CLI::App app{"rlimitd: the rlimit rate-limiter daemon (runs in the foreground)"};
  std::string config_path;
  std::string socket_path;
  std::string node_id;
  std::string log_level;
  std::string log_format;
  std::string socket_mode;
  std::size_t max_keys = 0;
  std::string cluster_mode;
  std::string bind;
  std::string advertise;
  std::string seeds;
  std::string secret_file;
  std::string cluster_name;
  std::int64_t gossip_interval_ms = 0;
  std::uint32_t fanout = 0;
  bool check_config = false;
  bool version = false;
  // A flag given twice (a wrapper adding to a service's command line) takes
  // the last value, as most daemons do.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_path, "TOML config file (default: the built-in config)");
  app.add_option("--socket", socket_path, "Unix socket path (overrides the file)");
  app.add_option("--node-id", node_id, "this node's id (default: the host name)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--log-format", log_format, "text, or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--socket-mode", socket_mode, "socket permissions in octal, e.g. 0660")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return rlimit::shell::parse_socket_mode(text) ? "" : "not an octal mode up to 0777";
          },
          "OCTAL"));
  app.add_option("--max-keys", max_keys, "most buckets held in memory")->check(CLI::PositiveNumber);
  app.add_option("--cluster-mode", cluster_mode,
                 "none, gossip (UDP), mesh (TCP) or redis (through Redis; [redis] in the config)")
      ->check(CLI::IsMember({"none", "gossip", "mesh", "redis"}));
  app.add_option("--bind", bind, "peer socket address HOST:PORT (port 0: any free port)")
      ->check(host_port_validator(/*allow_port_zero=*/true));
  app.add_option("--advertise", advertise, "HOST:PORT peers use to reach this node")
      ->check(host_port_validator(/*allow_port_zero=*/false));
  app.add_option("--seeds", seeds, "comma-separated HOST:PORT of nodes to join through")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            for (const std::string& seed : rlimit::config::split_seed_list(text)) {
              std::string error;
              if (!rlimit::shell::split_address(seed, false, &error)) {
                return "seed \"" + seed + "\": " + error;
              }
            }
            return "";
          },
          "HOST:PORT,..."));
  app.add_option("--secret-file", secret_file,
                 "file of shared secrets authenticating peers (first line signs)");
  app.add_option("--cluster-name", cluster_name, "name every node of the cluster shares")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string { return text.empty() ? "empty name" : ""; },
          "NAME"));
  app.add_option("--gossip-interval-ms", gossip_interval_ms, "milliseconds between gossip rounds")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{60'000}));
  app.add_option("--fanout", fanout, "peers per gossip round (0: every live peer)");
  app.add_flag("--check-config", check_config,
               "load and validate the config, print the result, and exit");
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }

  if (version) {
    std::cout << "rlimitd " << RLIMIT_VERSION << "\n";
    return 0;
  }

  rlimit::config::LoadResult loaded;
  if (config_path.empty()) {
    loaded.config = rlimit::config::default_config();
  } else {
    loaded = rlimit::config::load_config_file(config_path);
  }
  if (!loaded.ok()) {
    for (const rlimit::config::ConfigError& error : loaded.errors) {
      std::cerr << error.to_string() << "\n";
    }
    if (!check_config) std::cerr << "rlimitd: invalid config; not starting\n";
    return kExitUsage;
  }

  SettingOverrides overrides;
  if (app.count("--socket") > 0) overrides.socket_path = socket_path;
  if (app.count("--node-id") > 0) overrides.node_id = node_id;
  if (app.count("--log-level") > 0) overrides.log_level = log_level;
  if (app.count("--log-format") > 0) overrides.log_format = log_format;
  if (app.count("--socket-mode") > 0)
    overrides.socket_mode = rlimit::shell::parse_socket_mode(socket_mode);
  if (app.count("--max-keys") > 0) overrides.max_keys = max_keys;
  if (app.count("--cluster-mode") > 0)
    overrides.cluster_mode = rlimit::shell::parse_cluster_mode(cluster_mode);
  if (app.count("--bind") > 0) overrides.bind = bind;
  if (app.count("--advertise") > 0) overrides.advertise = advertise;
  if (app.count("--seeds") > 0) overrides.seeds = rlimit::config::split_seed_list(seeds);
  if (app.count("--secret-file") > 0) overrides.secret_file = secret_file;
  if (app.count("--cluster-name") > 0) overrides.cluster_name = cluster_name;
  if (app.count("--gossip-interval-ms") > 0)
    overrides.gossip_interval_us = gossip_interval_ms * 1000;
  if (app.count("--fanout") > 0) overrides.fanout = fanout;
  rlimit::shell::apply_overrides(overrides, loaded.config.daemon);
  rlimit::shell::apply_cluster_overrides(overrides, loaded.config.cluster);

  if (!rlimit::shell::is_log_level(loaded.config.daemon.log_level)) {
    std::cerr << "rlimitd: log_level \"" << loaded.config.daemon.log_level
              << "\" is not one of trace, debug, info, warn, error, critical, off\n";
    return kExitUsage;
  }

  const rlimit::config::ClusterSettings& cluster = loaded.config.cluster;
  std::vector<std::string> cluster_problems = rlimit::shell::check_cluster_settings(cluster);
  for (const rlimit::config::ConfigError& error :
       rlimit::config::check_rules_for_cluster(loaded.config.rules, cluster.mode)) {
    cluster_problems.push_back(error.to_string());
  }
  if (!cluster_problems.empty()) {
    for (const std::string& problem : cluster_problems) std::cerr << "rlimitd: " << problem << "\n";
    return kExitUsage;
  }
  // Read before starting (and by --check-config), so a bad secret file is a
  // configuration error, not a runtime one.
  std::optional<rlimit::shell::Keyring> keyring;
  std::vector<std::string> keyring_warnings;
  if (cluster.mode != rlimit::config::ClusterMode::kNone &&
      cluster.mode != rlimit::config::ClusterMode::kRedis) {
    rlimit::shell::KeyringLoad secrets = rlimit::shell::Keyring::load_file(cluster.secret_file);
    if (!secrets.keyring) {
      std::cerr << "rlimitd: " << secrets.error << "\n";
      return kExitUsage;
    }
    keyring = std::move(secrets.keyring);
    keyring_warnings = std::move(secrets.warnings);
  }

  if (check_config) {
    for (const std::string& warning : keyring_warnings) std::cerr << "warning: " << warning << "\n";
    std::cout << "config OK: " << loaded.config.rules.rules.size() << " rules";
    if (keyring) {
      std::cout << "; cluster " << rlimit::config::cluster_mode_name(cluster.mode) << " with "
                << keyring->size() << " secrets";
    } else if (cluster.mode == rlimit::config::ClusterMode::kRedis) {
      std::cout << "; cluster redis with " << loaded.config.redis.addresses.size()
                << (loaded.config.redis.cluster ? " Redis Cluster nodes" : " Redis server");
    }
    std::cout << "\n";
    return 0;
  }

  // The config loader and the flag both accept only text or json.
  rlimit::shell::setup_logging(
      loaded.config.daemon.log_level,
      rlimit::shell::parse_log_format(loaded.config.daemon.log_format).value());
  for (const std::string& warning : keyring_warnings) spdlog::warn("{}", warning);
  // A client that hangs up mid-reply must cost an EPIPE, not the process.
  std::signal(SIGPIPE, SIG_IGN);

  return rlimit::shell::run_server(rlimit::shell::ServerOptions{
      .config = std::move(loaded.config),
      .config_path = std::move(config_path),
      .overrides = std::move(overrides),
      .keyring = std::move(keyring),
  });
}
