// Settings given on the rlimitd command line, which win over the config
// file's (at start and again on every reload), and the defaults the daemon
// fills in for settings left empty. Plain data and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"

namespace rlimit::shell {

struct SettingOverrides {
  std::optional<std::string> socket_path;
  std::optional<std::string> node_id;
  std::optional<std::string> log_level;
  std::optional<std::uint32_t> socket_mode;
  std::optional<std::size_t> max_keys;
};

// Applies the set overrides to `settings`, then fills the empty ones: node_id
// with the host name, socket_path with wire::default_socket_path().
void apply_overrides(const SettingOverrides& overrides, config::DaemonSettings& settings);

// Parses an octal permission such as "660" or "0660" (at most 0777).
std::optional<std::uint32_t> parse_socket_mode(std::string_view text);

// The host name, or "localhost" if it cannot be read.
std::string host_name();

}  // namespace rlimit::shell
