// rlimitd: parses flags, loads and checks the config, then runs the server in
// the foreground. Exit codes: 0 clean stop, 1 runtime failure (socket in use,
// loop failed), 2 bad flags or an invalid config.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstddef>
#include <iostream>
#include <string>
#include <utility>

#include "config/config.h"
#include "shell/logging.h"
#include "shell/overrides.h"
#include "shell/server.h"

namespace {

constexpr int kExitUsage = 2;

}  // namespace

int main(int argc, char** argv) {
  using rlimit::shell::SettingOverrides;

  CLI::App app{"rlimitd: the rlimit rate-limiter daemon (runs in the foreground)"};
  std::string config_path;
  std::string socket_path;
  std::string node_id;
  std::string log_level;
  std::string socket_mode;
  std::size_t max_keys = 0;
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
  app.add_option("--socket-mode", socket_mode, "socket permissions in octal, e.g. 0660")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return rlimit::shell::parse_socket_mode(text) ? "" : "not an octal mode up to 0777";
          },
          "OCTAL"));
  app.add_option("--max-keys", max_keys, "most buckets held in memory")->check(CLI::PositiveNumber);
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
  if (app.count("--socket-mode") > 0)
    overrides.socket_mode = rlimit::shell::parse_socket_mode(socket_mode);
  if (app.count("--max-keys") > 0) overrides.max_keys = max_keys;
  rlimit::shell::apply_overrides(overrides, loaded.config.daemon);

  if (!rlimit::shell::is_log_level(loaded.config.daemon.log_level)) {
    std::cerr << "rlimitd: log_level \"" << loaded.config.daemon.log_level
              << "\" is not one of trace, debug, info, warn, error, critical, off\n";
    return kExitUsage;
  }

  if (check_config) {
    std::cout << "config OK: " << loaded.config.rules.rules.size() << " rules\n";
    return 0;
  }

  rlimit::shell::setup_logging(loaded.config.daemon.log_level);
  // A client that hangs up mid-reply must cost an EPIPE, not the process.
  std::signal(SIGPIPE, SIG_IGN);

  return rlimit::shell::run_server(rlimit::shell::ServerOptions{
      .config = std::move(loaded.config),
      .config_path = std::move(config_path),
      .overrides = std::move(overrides),
  });
}
