#include "fake_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "wire/frame.h"

namespace rlimit::testing {
namespace {

// The server thread wakes at least this often, so a stuck test still ends.
constexpr int kPollMs = 50;

void send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away (e.g. it timed out): fine
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

FakeServer::Action FakeServer::allow_all(const v1::Request& request, v1::Response& response) {
  if (request.has_check()) {
    for (int i = 0; i < request.check().checks_size(); ++i) {
      response.mutable_check()->add_results()->set_allowed(true);
    }
  } else if (request.has_members()) {
    response.mutable_members()->set_mode("none");
  } else {
    response.mutable_status();
  }
  return Action::kReply;
}

FakeServer::FakeServer(Handler handler) : handler_(std::move(handler)) {
  char tmpl[] = "/tmp/rlimit-client-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  socket_path_ = dir_ + "/rlimitd.sock";
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof(addr.sun_path) - 1);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0 || ::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("fake server setup: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

FakeServer::~FakeServer() {
  if (wake_pipe_[1] >= 0) {
    const char byte = 'x';
    (void)!::write(wake_pipe_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_pipe_[0], wake_pipe_[1]}) {
    if (fd >= 0) ::close(fd);
  }
  ::unlink(socket_path_.c_str());
  ::rmdir(dir_.c_str());
}

void FakeServer::set_handler(Handler handler) {
  std::lock_guard lock(mutex_);
  handler_ = std::move(handler);
}

std::vector<v1::Request> FakeServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::size_t FakeServer::frames() const {
  std::lock_guard lock(mutex_);
  return requests_.size();
}

void FakeServer::run() {
  struct Connection {
    int fd;
    std::string buffer;
  };
  std::vector<Connection> conns;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Connection& c : conns) fds.push_back({c.fd, POLLIN, 0});
    const int rc = ::poll(fds.data(), fds.size(), kPollMs);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    if (fds[0].revents != 0) break;
    if ((fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        conns.push_back({fd, {}});
        ++connections_;
      }
    }
    // fds[2 + i] belongs to conns[i] as they were before this round's accept.
    std::vector<int> to_close;
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection& c = conns[i - 2];
      if (!serve(c.fd, c.buffer)) to_close.push_back(c.fd);
    }
    for (int fd : to_close) {
      ::close(fd);
      std::erase_if(conns, [fd](const Connection& c) { return c.fd == fd; });
    }
  }
  for (const Connection& c : conns) ::close(c.fd);
}

bool FakeServer::serve(int fd, std::string& buffer) {
  char chunk[4096];
  const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
  if (n <= 0) return n < 0 && errno == EINTR;
  buffer.append(chunk, static_cast<std::size_t>(n));
  for (;;) {
    const wire::FrameView frame = wire::next_frame(buffer, wire::kDefaultMaxFrameBytes);
    if (frame.status == wire::FrameStatus::kTooLarge) return false;
    if (frame.status == wire::FrameStatus::kNeedMore) return true;
    v1::Request request;
    const bool parsed =
        request.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()));
    buffer.erase(0, frame.consumed);
    if (!parsed) return false;
    v1::Response response;
    response.set_id(request.id());
    Handler handler;
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      handler = handler_;
    }
    const Action action = handler(request, response);
    if (action == Action::kClose) return false;
    if (action == Action::kIgnore) continue;
    std::string out;
    wire::append_message_frame(out, response, wire::kDefaultMaxFrameBytes);
    send_all(fd, out);
    if (action == Action::kReplyThenClose) return false;
  }
}

}  // namespace rlimit::testing
