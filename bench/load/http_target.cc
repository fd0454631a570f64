#include "load/http_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>

#include "load/key_picker.h"

namespace rlimit::bench {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HttpResponseParse bad(std::string_view why) {
  HttpResponseParse p;
  p.state = HttpResponseParse::State::kBad;
  p.error = why;
  return p;
}

}  // namespace

HttpResponseParse parse_http_response(std::string_view data) {
  const std::size_t head_end = data.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    // "HTTP/1.1 200 OK" must at least be on its way.
    constexpr std::string_view kPrefix = "HTTP/1.";
    if (data.substr(0, kPrefix.size()) != kPrefix.substr(0, std::min(data.size(), kPrefix.size())))
      return bad("not an HTTP/1.x response");
    return {};
  }
  const std::string_view head = data.substr(0, head_end);
  std::size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  // HTTP/1.x SP 3DIGIT [SP reason]
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    return bad("malformed status line");
  }
  unsigned status = 0;
  const char* digits = status_line.data() + 9;
  if (auto [end, ec] = std::from_chars(digits, digits + 3, status);
      ec != std::errc() || end != digits + 3 || status < 100) {
    return bad("malformed status code");
  }
  bool close = status_line[7] == '0';  // HTTP/1.0 closes unless kept alive
  bool have_length = false;
  std::size_t content_length = 0;
  while (line_end != std::string_view::npos) {
    const std::size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string_view line = head.substr(
        start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad("malformed header line");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      std::size_t n = 0;
      if (auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
          ec != std::errc() || end != value.data() + value.size() || value.empty()) {
        return bad("malformed Content-Length");
      }
      if (have_length && n != content_length) return bad("conflicting Content-Length");
      have_length = true;
      content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      return bad("Transfer-Encoding is not supported");
    } else if (iequals(name, "connection")) {
      if (iequals(value, "close")) close = true;
      if (iequals(value, "keep-alive")) close = false;
    }
  }
  const bool bodiless = status < 200 || status == 204 || status == 304;
  if (bodiless) {
    content_length = 0;
  } else if (!have_length) {
    return bad("no Content-Length");
  }
  const std::size_t length = head_end + 4 + content_length;
  if (data.size() < length) return {};
  HttpResponseParse p;
  p.state = HttpResponseParse::State::kComplete;
  p.status = status;
  p.length = length;
  p.close = close;
  return p;
}

namespace {

class HttpTarget final : public Target {
 public:
  HttpTarget(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~HttpTarget() override { disconnect(); }

  std::string open() override {
    prefix_ = "GET /v1/check?user=";
    suffix_ = " HTTP/1.1\r\nHost: " + host_ + ":" + std::to_string(port_) + "\r\n\r\n";
    if (std::string why = connect(); !why.empty()) return why;
    const std::uint64_t warmup = 0;
    const Tally t = call({&warmup, 1});
    if (t.failed != 0) return "http " + where() + ": the warm-up check failed: " + last_error_;
    return {};
  }

  void send(std::span<const std::uint64_t> keys) override {
    if (fd_ < 0) connect();  // after a failure: a new connection
    for (const std::uint64_t key : keys) {
      out_ += prefix_;
      key_name(key, scratch_);
      out_ += scratch_;  // bench-N: nothing to escape
      out_ += suffix_;
    }
    pending_.push_back(keys.size());
  }

  Tally receive() override {
    Tally t;
    const std::size_t n = pending_.front();
    pending_.pop_front();
    if (!flush()) {
      t.failed += n;
      return t;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const int status = read_response();
      if (status == 200) {
        ++t.allowed;
      } else if (status == 429 || status == 403) {
        ++t.denied;
      } else {
        ++t.failed;
        if (status < 0) {  // the connection is gone: what was queued on it too
          t.failed += n - i - 1;
          fail_queued();
          break;
        }
      }
    }
    return t;
  }

 private:
  std::string where() const { return host_ + ":" + std::to_string(port_); }

  std::string connect() {
    disconnect();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
        rc != 0) {
      return "http " + where() + ": " + ::gai_strerror(rc);
    }
    std::string why = "http " + where() + ": no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        // Long enough that a loaded 2-core machine does not turn into failures.
        const timeval timeout{2, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
        fd_ = fd;
        why.clear();
        break;
      }
      why = "http " + where() + ": " + std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(found);
    return why;
  }

  void disconnect() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    in_begin_ = in_end_ = 0;
  }

  // Requests queued after the connection failed are lost with it.
  void fail_queued() {
    disconnect();
    out_.clear();
  }

  bool flush() {
    std::size_t done = 0;
    while (done < out_.size()) {
      const ssize_t n = ::send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        last_error_ = std::string("send: ") + std::strerror(errno);
        fail_queued();
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    out_.clear();
    return true;
  }

  // The next response's status, or -1 when the connection failed.
  int read_response() {
    for (;;) {
      const std::string_view data(in_.data() + in_begin_, in_end_ - in_begin_);
      const HttpResponseParse p = parse_http_response(data);
      if (p.state == HttpResponseParse::State::kComplete) {
        in_begin_ += p.length;
        if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
        if (p.close) disconnect();
        return static_cast<int>(p.status);
      }
      if (p.state == HttpResponseParse::State::kBad) {
        last_error_ = std::string(p.error);
        return -1;
      }
      if (fd_ < 0) {
        last_error_ = "connection closed";
        return -1;
      }
      if (in_end_ == in_.size()) {  // room at the end: move down, or grow
        if (in_begin_ > 0) {
          std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
          in_end_ -= in_begin_;
          in_begin_ = 0;
        } else {
          in_.resize(std::max<std::size_t>(in_.size() * 2, 16 * 1024));
        }
      }
      const ssize_t n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        last_error_ = n == 0 ? "connection closed" : std::string("recv: ") + std::strerror(errno);
        return -1;
      }
      in_end_ += static_cast<std::size_t>(n);
    }
  }

  std::string host_;
  int port_;
  int fd_ = -1;
  std::string prefix_, suffix_, scratch_;
  std::string out_;
  std::string in_;  // received bytes in [in_begin_, in_end_)
  std::size_t in_begin_ = 0, in_end_ = 0;
  std::deque<std::size_t> pending_;
  std::string last_error_;
};

}  // namespace

std::unique_ptr<Target> make_http_target(const std::string& host, int port) {
  return std::make_unique<HttpTarget>(host, port);
}

}  // namespace rlimit::bench
