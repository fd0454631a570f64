// Readiness notification for systemd's Type=notify services, without
// libsystemd: one datagram such as "READY=1" to the AF_UNIX socket systemd
// names in $NOTIFY_SOCKET (sd_notify(3)). Outside systemd the variable is
// unset and nothing is sent.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rlimit::shell {

// Sends `state` (newline-separated VAR=value assignments, e.g. "READY=1") to
// the socket at `socket_path`: a file system path, or an abstract socket when
// it starts with '@'. Returns what failed, or nothing when sent.
std::optional<std::string> notify_socket(std::string_view socket_path, std::string_view state);

// notify_socket to $NOTIFY_SOCKET; nothing to do (and no error) when the
// variable is unset or empty, i.e. when no service manager asked.
std::optional<std::string> notify_service_manager(std::string_view state);

}  // namespace rlimit::shell
