#include "shell/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace rlimit::shell {

std::optional<std::string> notify_socket(std::string_view socket_path, std::string_view state) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // An abstract address is as long as its name; sun_path needs no NUL then.
  const bool abstract = !socket_path.empty() && socket_path.front() == '@';
  if (socket_path.empty() || socket_path.size() > sizeof(address.sun_path) - (abstract ? 0 : 1)) {
    return "NOTIFY_SOCKET \"" + std::string(socket_path) + "\": not a usable socket address";
  }
  if (!abstract && socket_path.front() != '/') {
    return "NOTIFY_SOCKET \"" + std::string(socket_path) + "\": neither a path nor @abstract";
  }
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  if (abstract) address.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path.size() +
                                             (abstract ? 0 : 1));

  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno);
  const ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&address), length);
  const int send_errno = errno;
  ::close(fd);
  if (sent < 0) {
    return "NOTIFY_SOCKET \"" + std::string(socket_path) + "\": " + std::strerror(send_errno);
  }
  if (static_cast<std::size_t>(sent) != state.size()) {
    return "NOTIFY_SOCKET \"" + std::string(socket_path) + "\": short send";
  }
  return std::nullopt;
}

std::optional<std::string> notify_service_manager(std::string_view state) {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || *socket_path == '\0') return std::nullopt;
  return notify_socket(socket_path, state);
}

}  // namespace rlimit::shell
