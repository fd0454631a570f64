#include "support/daemon_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "support/sanitizer_report.h"

namespace rlimit::testing {
namespace {

// How long the destructor waits for a daemon to stop on SIGTERM (and run its
// exit-time checks, LeakSanitizer's among them) before it kills it.
constexpr std::chrono::seconds kDestructorStopTimeout{10};

// Fails the running test when `text`, the output of `what`, holds a sanitizer
// report (build-asan, build-tsan): a child's report fails the test that ran it
// even when the test looks only at replies or the exit code.
void expect_no_sanitizer_report(const std::string& what, const std::string& text) {
  const std::string_view line = sanitizer_report(text);
  if (!line.empty()) {
    ADD_FAILURE() << what << " reported: " << line << "\n---- its output ----\n" << text;
  }
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<char*> to_argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

bool can_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::string program_path(const std::string& name) {
  return std::string(RLIMIT_BIN_DIR) + "/" + name;
}

TempDir::TempDir() {
  std::string pattern = "/tmp/rlimit-test.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const std::string path = file(name);
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return path;
}

std::string write_cluster_secret(const TempDir& dir) {
  std::random_device random;
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%08x%08x%08x%08x", random(), random(), random(), random());
  const std::string path =
      dir.write("secret", std::string("# this test cluster's own\n") + hex + "\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

RunResult run_program(const std::vector<std::string>& argv_in, std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  std::vector<std::string> args = argv_in;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    auto argv = to_argv(args);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  RunResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  bool killed = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = killed ? -1 : decode_status(status);
  expect_no_sanitizer_report(argv_in.empty() ? "program" : argv_in.front(), result.output);
  return result;
}

DaemonProcess::DaemonProcess(const TempDir& dir, std::vector<std::string> args,
                             std::string log_name)
    : log_path_(dir.file(log_name)) {
  args.insert(args.begin(), program_path("rlimitd"));
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_path_);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    auto argv = to_argv(args);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid_ < 0) throw std::runtime_error("fork failed");
}

DaemonProcess::~DaemonProcess() {
  // SIGTERM (and SIGCONT, for a test that stopped it), so that a daemon that
  // is still running exits the way it does in service and a sanitized one runs
  // its exit-time checks; SIGKILL if it does not stop in time.
  if (running()) {
    ::kill(pid_, SIGTERM);
    ::kill(pid_, SIGCONT);
    if (!wait_exit(kDestructorStopTimeout)) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  expect_no_sanitizer_report("rlimitd (log " + log_path_ + ")", log());
}

bool DaemonProcess::wait_ready(const std::string& socket_path, std::chrono::milliseconds timeout) {
  return eventually([&] { return !running() || can_connect(socket_path); }, timeout) && running();
}

std::optional<int> DaemonProcess::poll_exit() {
  if (exit_code_) return exit_code_;
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) exit_code_ = decode_status(status);
  return exit_code_;
}

bool DaemonProcess::running() { return pid_ > 0 && !poll_exit().has_value(); }

void DaemonProcess::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<int> DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
  eventually([&] { return poll_exit().has_value(); }, timeout);
  return poll_exit();
}

std::optional<int> DaemonProcess::stop(int sig, std::chrono::milliseconds timeout) {
  signal(sig);
  return wait_exit(timeout);
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// Ports free_port() hands out lie below the kernel's ephemeral range, so no
// socket bound to port 0 and no outgoing connection of any process (another
// test's client, redis-server's replicas) can take one between free_port()
// and the daemon's bind. The range's floor; its top is the ephemeral floor.
constexpr int kTestPortFloor = 20'000;

// The lowest ephemeral port (net.ipv4.ip_local_port_range), 32768 if unread.
int ephemeral_floor() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return (in >> low) && low > 0 ? low : 32'768;
}

// 127.0.0.1:`port` (0: the kernel's choice).
sockaddr_in loopback_address(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// True if `port` can be bound on loopback for both TCP and UDP right now.
bool bindable(int port) {
  const sockaddr_in addr = loopback_address(port);
  bool ok = true;
  for (const int type : {SOCK_STREAM, SOCK_DGRAM}) {
    const int fd = ::socket(AF_INET, type, 0);
    ok = ok && fd >= 0 &&
         ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) ::close(fd);
  }
  return ok;
}

// A port the kernel chose from its ephemeral range, bindable for TCP and UDP:
// the fallback where the range leaves no room below it.
int kernel_chosen_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback_address(0);
  socklen_t len = sizeof(addr);
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  const int port = bound ? ntohs(addr.sin_port) : -1;
  return port > 0 && bindable(port) ? port : -1;
}

}  // namespace

int free_port() {
  constexpr int kAttempts = 50;
  const int top = ephemeral_floor();
  if (top - kTestPortFloor < 1'000) {
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (const int port = kernel_chosen_port(); port > 0) return port;
    }
    return -1;
  }
  // Each test process walks the range from a random place of its own and
  // never hands a port out twice: a test's own daemons and relays cannot
  // collide, and tests running side by side rarely start near each other.
  const int span = top - kTestPortFloor;
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  static int next = [span] {
    std::random_device seed;
    return static_cast<int>(seed() % static_cast<unsigned>(span));
  }();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const int port = kTestPortFloor + next;
    next = (next + 1) % span;
    if (bindable(port)) return port;
  }
  return -1;
}

}  // namespace rlimit::testing
