// Readiness notification: a datagram to the socket $NOTIFY_SOCKET names,
// received here by a socket bound the way systemd binds its own.
#include "shell/sd_notify.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace rlimit::shell {
namespace {

// A datagram socket bound at a path in a fresh directory, or at an abstract
// name; removes both and restores NOTIFY_SOCKET's absence on destruction.
class Receiver {
 public:
  explicit Receiver(bool abstract) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    socklen_t length = 0;
    if (abstract) {
      const std::string name = "rlimit-sd-notify-test-" + std::to_string(::getpid());
      name_ = "@" + name;
      std::memcpy(address.sun_path + 1, name.data(), name.size());
      length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      std::array<char, 64> dir_template{};
      std::strcpy(dir_template.data(), "/tmp/rlimit-sd-notify-XXXXXX");
      EXPECT_NE(::mkdtemp(dir_template.data()), nullptr);
      dir_ = dir_template.data();
      name_ = dir_ + "/notify";
      std::memcpy(address.sun_path, name_.data(), name_.size());
      length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size() + 1);
    }
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&address), length), 0)
        << std::strerror(errno);
  }
  ~Receiver() {
    ::unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) ::close(fd_);
    if (!dir_.empty()) {
      ::unlink(name_.c_str());
      ::rmdir(dir_.c_str());
    }
  }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  const std::string& name() const { return name_; }

  // The next datagram, or "<nothing>" after `timeout_ms`.
  std::string receive(int timeout_ms) {
    pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, timeout_ms) != 1) return "<nothing>";
    std::array<char, 4096> buffer{};
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    return n < 0 ? "<error>" : std::string(buffer.data(), static_cast<std::size_t>(n));
  }

 private:
  int fd_ = -1;
  std::string dir_;
  std::string name_;
};

TEST(SdNotifyTest, SendsReadyToThePathInNotifySocket) {
  Receiver receiver(/*abstract=*/false);
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", receiver.name().c_str(), 1), 0);
  EXPECT_EQ(notify_service_manager("READY=1"), std::nullopt);
  EXPECT_EQ(receiver.receive(5000), "READY=1");
}

TEST(SdNotifyTest, SendsToAnAbstractSocket) {
  Receiver receiver(/*abstract=*/true);
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", receiver.name().c_str(), 1), 0);
  EXPECT_EQ(notify_service_manager("READY=1\nSTATUS=serving"), std::nullopt);
  EXPECT_EQ(receiver.receive(5000), "READY=1\nSTATUS=serving");
}

TEST(SdNotifyTest, NothingToDoOutsideAServiceManager) {
  Receiver receiver(/*abstract=*/false);
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(notify_service_manager("READY=1"), std::nullopt);
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", "", 1), 0);
  EXPECT_EQ(notify_service_manager("READY=1"), std::nullopt);
  EXPECT_EQ(receiver.receive(100), "<nothing>");
}

TEST(SdNotifyTest, ReportsASocketThatIsNotThere) {
  Receiver receiver(/*abstract=*/false);
  const std::string missing = receiver.name() + "-missing";
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", missing.c_str(), 1), 0);
  const std::optional<std::string> error = notify_service_manager("READY=1");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find(missing), std::string::npos) << *error;
  EXPECT_NE(error->find(std::strerror(ENOENT)), std::string::npos) << *error;
}

TEST(SdNotifyTest, RejectsAddressesThatAreNotSockets) {
  EXPECT_TRUE(notify_socket("relative/notify", "READY=1"));
  EXPECT_TRUE(notify_socket("/" + std::string(200, 'x'), "READY=1"));  // beyond sun_path
}

}  // namespace
}  // namespace rlimit::shell
