// The file system side of the daemon's Unix socket: making its path free to
// bind without stealing it from a live daemon or clobbering a file that is not
// a socket, and removing it on exit only if it is still ours. Plain POSIX, no
// Asio; call from the thread that owns the socket.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace rlimit::shell {

struct FreePathResult {
  bool ok = false;
  bool removed_stale = false;  // a dead daemon's socket was unlinked
  std::string error;           // why the path must not be used, when !ok
};

// Makes `path` ready for bind(): absent, or a socket nobody listens on (which
// is unlinked). Refuses a path that is too long for sockaddr_un, a socket a
// live process accepts on, and anything that is not a socket.
FreePathResult free_socket_path(const std::string& path);

// Which file a path named when we made it, to recognize it at exit.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
};
std::optional<FileId> file_id(const std::string& path);

// Unlinks `path` if it is still the file `id` (another daemon may have taken
// the path over since).
enum class RemoveResult { kRemoved, kGone, kReplaced, kFailed };
RemoveResult remove_if_same(const std::string& path, const FileId& id);

// Sets the process umask for its lifetime, so the socket is never reachable
// with wider permissions than asked between bind() and chmod().
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask);
  ~ScopedUmask();
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t previous_;
};

// chmod(path, mode); an error message on failure.
std::optional<std::string> set_mode(const std::string& path, std::uint32_t mode);

}  // namespace rlimit::shell
