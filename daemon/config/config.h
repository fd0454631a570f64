// The daemon's configuration: settings of the process plus the rule set, as
// loaded from a TOML file (see README.md, "Configuration") or built in.
// Loading is pure: text in, a Config or located errors out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/limiter.h"
#include "core/rule.h"

namespace rlimit::config {

struct DaemonSettings {
  std::string node_id;           // default: the host name (filled by the daemon)
  std::string socket_path;       // default: wire::default_socket_path()
  std::uint32_t socket_mode = 0660;
  std::string log_level = "info";  // trace, debug, info, warn, error, critical, off
  std::uint32_t max_frame_bytes = 64 * 1024;       // requests
  std::uint32_t max_response_bytes = 16 * 1024 * 1024;
  std::uint32_t max_checks_per_frame = 1024;
  std::uint32_t max_connections = 1024;
  std::int64_t sweep_interval_us = 100'000;   // how often idle buckets are swept
  std::uint32_t sweep_batch = 10'000;          // entries visited per sweep
  std::int64_t shutdown_grace_us = 2'000'000;  // time to finish in-flight replies
  core::LimiterOptions limiter;
};

struct Config {
  DaemonSettings daemon;
  core::RuleSet rules;
  std::string source;  // file name, or "<built-in>"
};

// One problem in a config, located.
struct ConfigError {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string message;
  std::string to_string() const;  // "file:line:column: message"
};

struct LoadResult {
  Config config;                    // meaningful only when errors is empty
  std::vector<ConfigError> errors;  // every problem found, in file order
  bool ok() const { return errors.empty(); }
};

// Parses `text` (the contents of `file_name`, used in messages).
LoadResult load_config(std::string_view text, std::string_view file_name);

// Reads and parses a file; an unreadable file is one error at line 0.
LoadResult load_config_file(const std::string& path);

// The built-in configuration used when rlimitd runs without --config: one
// node, the default socket, and one example rule (`per-user`: 10/s per
// distinct `user`, burst 20).
Config default_config();

}  // namespace rlimit::config
