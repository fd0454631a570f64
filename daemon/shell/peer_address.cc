#include "shell/peer_address.h"

#include "config/config.h"

namespace rlimit::shell {

std::optional<HostPort> split_address(std::string_view text, bool allow_port_zero,
                                      std::string* error) {
  HostPort out;
  if (config::parse_host_port(text, &out.host, &out.port, error)) return out;
  // parse_host_port wants a port a peer can be reached at (1..65535); a bind
  // address may ask for any free port with 0, so check the rest with port 1.
  if (allow_port_zero && text.size() >= 2 && text.substr(text.size() - 2) == ":0") {
    std::string with_port_one(text.substr(0, text.size() - 1));
    with_port_one.push_back('1');
    if (config::parse_host_port(with_port_one, &out.host, &out.port, error)) {
      out.port = 0;
      return out;
    }
  }
  return std::nullopt;
}

bool is_wildcard_host(std::string_view host) { return host == "0.0.0.0" || host == "::"; }

}  // namespace rlimit::shell
