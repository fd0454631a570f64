// Peer addresses as the shell handles them: "host:port" split with
// config::parse_host_port, plus the one exception a bind address needs (port
// 0: any free port). Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlimit::shell {

struct HostPort {
  std::string host;  // an IPv6 literal without its brackets
  std::uint16_t port = 0;
};

// Splits "host:port". `allow_port_zero` accepts port 0 (a bind address asking
// the kernel for a free port). On failure sets `*error` (if not null).
std::optional<HostPort> split_address(std::string_view text, bool allow_port_zero,
                                      std::string* error);

// True for the wildcard hosts 0.0.0.0 and ::, which peers cannot reach.
bool is_wildcard_host(std::string_view host);

}  // namespace rlimit::shell
