#include "support/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/daemon_process.h"

namespace rlimit::testing {
namespace {

// One PING on a fresh connection; true when any reply line comes back
// (+PONG, or -NOAUTH from a server that wants a password).
bool answers_ping(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    constexpr char kPing[] = "PING\r\n";
    if (::send(fd, kPing, sizeof(kPing) - 1, MSG_NOSIGNAL) == sizeof(kPing) - 1) {
      pollfd pfd{fd, POLLIN, 0};
      char reply[64];
      ok = ::poll(&pfd, 1, 500) == 1 && ::recv(fd, reply, sizeof(reply), 0) > 0 &&
           (reply[0] == '+' || reply[0] == '-');
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

bool redis_available() {
  return ::access(kRedisServerPath, X_OK) == 0 && ::access(kRedisCliPath, X_OK) == 0;
}

RedisProcess::RedisProcess(const std::string& dir, int port, std::vector<std::string> extra_args)
    : port_(port), log_path_(dir + "/redis-" + std::to_string(port) + ".log") {
  std::vector<std::string> args = {kRedisServerPath,
                                   "--port",
                                   std::to_string(port),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir,
                                   "--logfile",
                                   log_path_,
                                   "--daemonize",
                                   "no"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      ::dup2(null_fd, 1);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
}

RedisProcess::~RedisProcess() { kill(); }  // SIGKILL ends a stopped process too

bool RedisProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

bool RedisProcess::wait_ready(std::chrono::milliseconds timeout) {
  return eventually([&] { return !running() || answers_ping(port_); }, timeout) && running();
}

void RedisProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::string RedisProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rlimit::testing
