#include "load/floor_target.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace rlimit::bench {
namespace {

bool read_exact(int fd, char* buf, std::size_t bytes) {
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(fd, buf + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// MSG_NOSIGNAL: a peer that has gone is a failed write, not a SIGPIPE that
// ends the whole benchmark.
bool write_all(int fd, const char* buf, std::size_t bytes) {
  std::size_t put = 0;
  while (put < bytes) {
    const ssize_t n = ::send(fd, buf + put, bytes - put, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    put += static_cast<std::size_t>(n);
  }
  return true;
}

// The echo child's first byte: ready to answer, or could not be pinned.
constexpr char kChildReady = 'r';
constexpr char kChildNotPinned = 'p';

class FloorTarget final : public Target {
 public:
  FloorTarget(std::size_t request_bytes, std::size_t reply_bytes, int server_cpu)
      : request_bytes_(request_bytes), reply_bytes_(reply_bytes), server_cpu_(server_cpu) {}

  ~FloorTarget() override {
    if (fd_ >= 0) ::close(fd_);
    if (child_ > 0) {
      int status = 0;
      ::waitpid(child_, &status, 0);
    }
  }

  std::string open() override {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return std::string("socketpair: ") + std::strerror(errno);
    }
    child_ = ::fork();
    if (child_ < 0) return std::string("fork: ") + std::strerror(errno);
    if (child_ == 0) {
      // Only async-signal-safe calls from here: the parent has threads.
      ::close(fds[0]);
      // One status byte first: pinned (or not asked to be), or not measured
      // at all, since a floor elsewhere would mislead.
      bool pinned = true;
      if (server_cpu_ >= 0) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(server_cpu_, &cpus);
        pinned = ::sched_setaffinity(0, sizeof(cpus), &cpus) == 0;
      }
      const char status = pinned ? kChildReady : kChildNotPinned;
      if (!write_all(fds[1], &status, 1) || !pinned) ::_exit(0);
      // Answers every complete request read so far with one write, as a
      // server that batches its replies would.
      static char in[16384], out[16384];
      std::size_t partial = 0;
      for (;;) {
        const ssize_t n = ::read(fds[1], in, sizeof(in));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) ::_exit(0);
        partial += static_cast<std::size_t>(n);
        std::size_t replies = partial / request_bytes_;
        partial %= request_bytes_;
        while (replies > 0) {
          const std::size_t fit = std::max<std::size_t>(1, sizeof(out) / reply_bytes_);
          const std::size_t now = replies < fit ? replies : fit;
          if (!write_all(fds[1], out, now * reply_bytes_)) ::_exit(0);
          replies -= now;
        }
      }
    }
    ::close(fds[1]);
    fd_ = fds[0];
    char status = 0;
    if (!read_exact(fd_, &status, 1) || status != kChildReady) {
      return server_cpu_ >= 0 ? "cannot pin the floor's echo server to CPU " +
                                    std::to_string(server_cpu_)
                              : std::string("the floor's echo server did not start");
    }
    request_.assign(request_bytes_, 'x');
    reply_.resize(reply_bytes_);
    return {};
  }

  Tally call(std::span<const std::uint64_t> keys) override {
    Tally t;
    for (std::size_t i = 0; i < keys.size(); ++i) out_ += request_;  // a batch is one write
    if (!write_all(fd_, out_.data(), out_.size()) || !read_exact_n(keys.size())) {
      t.failed = keys.size();
    } else {
      t.allowed = keys.size();
    }
    out_.clear();
    return t;
  }

  void send(std::span<const std::uint64_t> keys) override {
    for (std::size_t i = 0; i < keys.size(); ++i) out_ += request_;
    sizes_.push_back(keys.size());
  }

  Tally receive() override {
    Tally t;
    const std::size_t n = sizes_.front();
    sizes_.pop_front();
    if (!out_.empty()) {
      if (!write_all(fd_, out_.data(), out_.size())) t.failed = n;
      out_.clear();
    }
    if (t.failed == 0 && !read_exact_n(n)) t.failed = n;
    if (t.failed == 0) t.allowed = n;
    return t;
  }

 private:
  bool read_exact_n(std::size_t replies) {
    if (reply_.size() < replies * reply_bytes_) reply_.resize(replies * reply_bytes_);
    return read_exact(fd_, reply_.data(), replies * reply_bytes_);
  }

  const std::size_t request_bytes_;
  const std::size_t reply_bytes_;
  const int server_cpu_;
  int fd_ = -1;
  pid_t child_ = -1;
  std::string request_;
  std::string out_;
  std::vector<char> reply_;
  std::deque<std::size_t> sizes_;
};

}  // namespace

std::unique_ptr<Target> make_floor_target(std::size_t request_bytes, std::size_t reply_bytes,
                                          int server_cpu) {
  // The child's buffers bound one reply; a request of 0 bytes never completes.
  return std::make_unique<FloorTarget>(std::clamp<std::size_t>(request_bytes, 1, 16384),
                                       std::clamp<std::size_t>(reply_bytes, 1, 16384), server_cpu);
}

}  // namespace rlimit::bench
