// Bad input on the client socket: every kind gets a counted error, closes only
// its own connection, and never disturbs another client.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "fixture.h"
#include "rlimit/v1/client.pb.h"
#include "wire/frame.h"

namespace rlimit::testing {
namespace {

// A raw connection that speaks bytes, for sending what libclient never would.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  void send_request(const v1::Request& request) {
    std::string out;
    ASSERT_TRUE(wire::append_message_frame(out, request));
    send(out);
  }

  // Sends `frame` over and over without reading, until the socket takes no
  // more (the daemon stopped reading because we do not take its answers);
  // returns the frames sent. Bounded by `max_frames`.
  int send_until_full(const std::string& frame, int max_frames) {
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    int sent = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sent < max_frames && std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd pfd{fd_, POLLOUT, 0};
        if (::poll(&pfd, 1, 200) <= 0) break;  // still full: the daemon stopped reading
        continue;
      }
      if (n != static_cast<ssize_t>(frame.size())) break;
      ++sent;
    }
    return sent;
  }

  // Reads one response frame; nullopt on close or after 5 s.
  std::optional<v1::Response> read_response() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      const wire::FrameView frame = wire::next_frame(buffer_, 1 << 20);
      if (frame.status == wire::FrameStatus::kComplete) {
        v1::Response response;
        EXPECT_TRUE(response.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size())));
        buffer_.erase(0, frame.consumed);
        return response;
      }
      if (!fill()) return std::nullopt;
    }
    return std::nullopt;
  }

  // True if the daemon closed the connection (EOF) within 5 s.
  bool closed_by_peer() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 100) <= 0) continue;
      char byte;
      const ssize_t n = ::recv(fd_, &byte, 1, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  bool fill() {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) return true;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

const char* kRule = R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 1000
period = "1h"
)";

std::string frame_of(const std::string& payload) {
  std::string out;
  wire::append_frame_header(out, static_cast<std::uint32_t>(payload.size()));
  return out + payload;
}

v1::Request check_request(std::uint64_t id, std::uint32_t version = v1::VERSION_1) {
  v1::Request request;
  request.set_version(static_cast<v1::Version>(version));
  request.set_id(id);
  auto* check = request.mutable_check()->add_checks();
  auto* d = check->add_descriptors();
  d->set_key("user");
  d->set_value("raw");
  return request;
}

class BadInputTest : public DaemonTest {
 protected:
  void SetUp() override { start(kRule, {"--log-level", "warn"}); }

  // A well-behaved client that must keep getting answers throughout.
  void expect_bystander_served() {
    const Decision d = bystander_.check(user("bystander"));
    EXPECT_EQ(d.status, DecisionStatus::kOk) << d.error;
    EXPECT_TRUE(d.allowed);
  }

  Client bystander_ = client();
};

TEST_F(BadInputTest, GarbagePayloadGetsMalformedErrorAndClose) {
  expect_bystander_served();
  RawConnection raw(socket_path());
  ASSERT_TRUE(raw.connected());
  // Field 1 declared 127 bytes long in a shorter payload: cannot decode.
  raw.send(frame_of("\x0a\x7fgarbage that is not protobuf"));
  auto response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_error());
  EXPECT_EQ(response->error().code(), v1::Error::MALFORMED_FRAME);
  EXPECT_FALSE(response->error().message().empty());
  EXPECT_TRUE(raw.closed_by_peer());
  expect_bystander_served();
  EXPECT_EQ(counter(bystander_, "malformed_frames"), 1);
}

TEST_F(BadInputTest, OversizeFrameGetsErrorAndClose) {
  RawConnection raw(socket_path());
  std::string header;
  wire::append_frame_header(header, 10 * 1024 * 1024);
  raw.send(header + "xxxx");
  auto response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error().code(), v1::Error::FRAME_TOO_LARGE);
  EXPECT_TRUE(raw.closed_by_peer());
  expect_bystander_served();
  EXPECT_EQ(counter(bystander_, "frames_too_large"), 1);
}

TEST_F(BadInputTest, TruncatedFrameIsCountedAndDisturbsNoOne) {
  {
    RawConnection raw(socket_path());
    const std::string whole = frame_of(check_request(1).SerializeAsString());
    raw.send(whole.substr(0, whole.size() - 3));
  }  // closed mid-frame
  expect_bystander_served();
  EXPECT_TRUE(eventually([&] { return counter(bystander_, "truncated_frames") == 1; }));
}

TEST_F(BadInputTest, UnknownMessageTypeGetsErrorAndClose) {
  RawConnection raw(socket_path());
  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.set_id(9);
  raw.send_request(request);  // no body
  auto response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->id(), 9u);
  EXPECT_EQ(response->error().code(), v1::Error::UNKNOWN_MESSAGE_TYPE);
  EXPECT_TRUE(raw.closed_by_peer());
  expect_bystander_served();
  EXPECT_EQ(counter(bystander_, "unknown_message_types"), 1);
}

TEST_F(BadInputTest, UnknownVersionGetsClearErrorAndConnectionGoesOn) {
  RawConnection raw(socket_path());
  raw.send_request(check_request(5, 7));
  auto response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->id(), 5u);
  EXPECT_EQ(response->error().code(), v1::Error::UNSUPPORTED_VERSION);
  EXPECT_NE(response->error().message().find("7"), std::string::npos) << response->error().message();
  raw.send_request(check_request(6));
  response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->id(), 6u);
  ASSERT_TRUE(response->has_check());
  EXPECT_TRUE(response->check().results(0).allowed());
}

TEST_F(BadInputTest, PipelinedFramesAreAnsweredInOrder) {
  RawConnection raw(socket_path());
  std::string burst;
  for (std::uint64_t id = 1; id <= 500; ++id) wire::append_message_frame(burst, check_request(id));
  raw.send(burst);
  for (std::uint64_t id = 1; id <= 500; ++id) {
    auto response = raw.read_response();
    ASSERT_TRUE(response.has_value()) << id;
    ASSERT_EQ(response->id(), id);
  }
}

TEST_F(BadInputTest, InvalidCheckInBatchSparesTheOthers) {
  RawConnection raw(socket_path());
  v1::Request request = check_request(3);
  auto* dup = request.mutable_check()->add_checks();
  for (int i = 0; i < 2; ++i) {
    auto* d = dup->add_descriptors();
    d->set_key("user");
    d->set_value("twice");
  }
  auto* bad_inline = request.mutable_check()->add_checks();
  bad_inline->mutable_inline_limit()->set_key("job");
  bad_inline->mutable_inline_limit()->set_limit(1);  // period 0
  raw.send_request(request);
  auto response = raw.read_response();
  ASSERT_TRUE(response.has_value());
  ASSERT_EQ(response->check().results_size(), 3);
  EXPECT_TRUE(response->check().results(0).allowed());
  EXPECT_EQ(response->check().results(1).status(), v1::CheckResult::INVALID);
  EXPECT_FALSE(response->check().results(1).error().empty());
  EXPECT_EQ(response->check().results(2).status(), v1::CheckResult::INVALID);
}

TEST_F(BadInputTest, ManyBadClientsAtOnceLeaveTheDaemonServing) {
  for (int round = 0; round < 20; ++round) {
    RawConnection raw(socket_path());
    raw.send(round % 2 ? std::string("\x00\x00\x00\x05hello", 9) : std::string("\xff\xff\xff\xff", 4));
  }
  expect_bystander_served();
  EXPECT_TRUE(daemon_->running());
}

// The bounds on a connection's time: a client that stops taking its answers
// and one that sends nothing are closed, counted, and nobody else notices.
class ConnectionTimeoutTest : public DaemonTest {
 protected:
  // Keys before the first table land in the fixture's [daemon] section.
  void start_with(const std::string& daemon_keys) { start(daemon_keys + kRule); }
};

TEST_F(ConnectionTimeoutTest, AClientThatStopsReadingIsClosedAfterWriteTimeout) {
  start_with("write_timeout = \"300ms\"\n");
  Client bystander = client();
  RawConnection raw(socket_path());
  ASSERT_TRUE(raw.connected());
  v1::Request status;
  status.set_version(v1::VERSION_1);
  status.mutable_status();
  std::string frame;
  ASSERT_TRUE(wire::append_message_frame(frame, status));
  // Status answers are far larger than the request: the daemon's answers
  // fill our receive buffer long before our requests fill its.
  EXPECT_GT(raw.send_until_full(frame, 200'000), 0);
  EXPECT_TRUE(eventually([&] { return counter(bystander, "write_timeouts") == 1; }))
      << daemon_->log();
  EXPECT_EQ(counter(bystander, "idle_timeouts"), 0);
  EXPECT_TRUE(bystander.check(user("bystander")).allowed);
  EXPECT_NE(daemon_->log().find("the client took no answer for 300 ms; closing"),
            std::string::npos);
}

TEST_F(ConnectionTimeoutTest, ASilentClientIsClosedAfterIdleTimeoutOnlyWhenOneIsSet) {
  start_with("idle_timeout = \"300ms\"\n");
  RawConnection silent(socket_path());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.closed_by_peer());
  Client c = client();
  EXPECT_EQ(counter(c, "idle_timeouts"), 1);
}

TEST_F(ConnectionTimeoutTest, WithoutIdleTimeoutASilentClientStaysConnected) {
  start_with("");
  RawConnection silent(socket_path());
  ASSERT_TRUE(silent.connected());
  ::usleep(500'000);
  silent.send_request(check_request(7));
  const std::optional<v1::Response> answer = silent.read_response();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->id(), 7u);
}

}  // namespace
}  // namespace rlimit::testing
