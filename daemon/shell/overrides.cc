#include "shell/overrides.h"

#include <unistd.h>

#include <array>
#include <climits>

#include "wire/frame.h"

namespace rlimit::shell {

void apply_overrides(const SettingOverrides& overrides, config::DaemonSettings& settings) {
  if (overrides.socket_path) settings.socket_path = *overrides.socket_path;
  if (overrides.node_id) settings.node_id = *overrides.node_id;
  if (overrides.log_level) settings.log_level = *overrides.log_level;
  if (overrides.socket_mode) settings.socket_mode = *overrides.socket_mode;
  if (overrides.max_keys) settings.limiter.max_keys = *overrides.max_keys;
  if (settings.node_id.empty()) settings.node_id = host_name();
  if (settings.socket_path.empty()) settings.socket_path = wire::default_socket_path();
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
