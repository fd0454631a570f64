// Test support: a real redis-server child (Debian's /usr/bin/redis-server) on
// a loopback port, with no persistence, its files in a directory the caller
// owns. Killed and reaped by the destructor; every wait is bounded. Not
// thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace rlimit::testing {

inline constexpr const char* kRedisServerPath = "/usr/bin/redis-server";
inline constexpr const char* kRedisCliPath = "/usr/bin/redis-cli";

// True when redis-server and redis-cli are installed (tests skip otherwise).
bool redis_available();

class RedisProcess {
 public:
  // Starts redis-server on 127.0.0.1:`port` with `--save "" --appendonly no`,
  // its log and files in `dir`, plus `extra_args` (e.g. {"--requirepass",
  // "x"}). Does not wait; see wait_ready().
  RedisProcess(const std::string& dir, int port, std::vector<std::string> extra_args = {});
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // True once the port answers PING (+PONG, or an authentication error: it
  // is up); false after `timeout` or when the process exited.
  bool wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGKILL and reap (idempotent).
  void kill();
  // Sends `signal` (e.g. SIGSTOP to make it hang, SIGCONT to resume).
  void signal(int signal);
  bool running();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const;

 private:
  int port_;
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace rlimit::testing
