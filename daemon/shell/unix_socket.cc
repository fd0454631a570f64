#include "shell/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rlimit::shell {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

enum class Probe { kLive, kStale, kGone, kUnknown };

// Connects to `path` without blocking: a listener (even one whose backlog is
// full) means a live daemon; ECONNREFUSED means nobody accepts there.
Probe probe(const std::string& path, int& err) {
  err = 0;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    err = errno;
    return Probe::kUnknown;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  err = rc == 0 ? 0 : errno;
  ::close(fd);
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS) return Probe::kLive;
  if (err == ECONNREFUSED) return Probe::kStale;
  if (err == ENOENT) return Probe::kGone;
  return Probe::kUnknown;
}

}  // namespace

FreePathResult free_socket_path(const std::string& path) {
  FreePathResult result;
  constexpr std::size_t kMaxPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;
  if (path.empty()) {
    result.error = "the socket path is empty";
    return result;
  }
  if (path.size() > kMaxPathBytes) {
    result.error = "socket path " + path + " is too long (" + std::to_string(path.size()) +
                   " bytes; a Unix socket path holds at most " + std::to_string(kMaxPathBytes) +
                   ")";
    return result;
  }

  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      result.ok = true;
      return result;
    }
    result.error = "cannot inspect socket path " + path + ": " + errno_text(errno);
    return result;
  }
  if (!S_ISSOCK(st.st_mode)) {
    result.error = path + " exists and is not a socket; refusing to replace it";
    return result;
  }

  int err = 0;
  switch (probe(path, err)) {
    case Probe::kLive:
      result.error = "another rlimitd is listening on " + path;
      return result;
    case Probe::kGone:
      result.ok = true;
      return result;
    case Probe::kStale:
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        result.error = "cannot remove stale socket " + path + ": " + errno_text(errno);
        return result;
      }
      result.ok = true;
      result.removed_stale = true;
      return result;
    case Probe::kUnknown:
      break;
  }
  result.error = "cannot tell whether " + path + " is in use: " + errno_text(err);
  return result;
}

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{.dev = st.st_dev, .ino = st.st_ino};
}

RemoveResult remove_if_same(const std::string& path, const FileId& id) {
  const std::optional<FileId> now = file_id(path);
  if (!now) return RemoveResult::kGone;
  if (now->dev != id.dev || now->ino != id.ino) return RemoveResult::kReplaced;
  if (::unlink(path.c_str()) != 0)
    return errno == ENOENT ? RemoveResult::kGone : RemoveResult::kFailed;
  return RemoveResult::kRemoved;
}

ScopedUmask::ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
ScopedUmask::~ScopedUmask() { ::umask(previous_); }

std::optional<std::string> set_mode(const std::string& path, std::uint32_t mode) {
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    char octal[16];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
    return "cannot chmod " + path + " to " + octal + ": " + errno_text(errno);
  }
  return std::nullopt;
}

}  // namespace rlimit::shell
