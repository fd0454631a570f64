// Test support: a temporary directory and a real rlimitd child process on a
// socket inside it. Everything started is stopped and removed by the
// destructors; every wait is bounded. Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace rlimit::testing {

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to file(name) and returns its path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// The result of running a program to completion.
struct RunResult {
  int exit_code = -1;  // -1 if killed or timed out
  std::string output;  // stdout and stderr together
};

// A loopback port that was free, for both TCP and UDP, a moment ago; -1
// after 50 tries. It lies below the kernel's ephemeral range (no bind to
// port 0 or outgoing connection of any process takes it meanwhile) and is
// never handed out twice by one process; another test process may still
// pick it, rarely, before the daemon binds it. Thread-safe.
int free_port();

// Writes a cluster secret of its own to dir's file "secret" (mode 600) and
// returns the path. Each test cluster needs its own: tests run side by side
// on loopback and a free_port() may be handed out twice, so a daemon of one
// test can list another test's daemon as a seed; with one secret for all
// they would join one cluster, with one each the stranger's datagrams fail
// authentication.
std::string write_cluster_secret(const TempDir& dir);

// Runs `argv` (argv[0] a path), capturing output; kills it after `timeout`.
RunResult run_program(const std::vector<std::string>& argv,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20));

class DaemonProcess {
 public:
  // Starts build/bin/rlimitd with `args`, stderr to a log file in `dir`.
  // Does not wait for readiness; see wait_ready().
  DaemonProcess(const TempDir& dir, std::vector<std::string> args,
                std::string log_name = "rlimitd.log");
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // True once a connect() to `socket_path` succeeds; false after `timeout`
  // or when the process exits first.
  bool wait_ready(const std::string& socket_path,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Sends `signal` and waits up to `timeout` for exit. Returns the exit code,
  // 128+signal if killed by a signal, or nullopt if still running.
  std::optional<int> stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void signal(int signal);
  // The exit code if the process has exited (reaps it), else nullopt.
  std::optional<int> poll_exit();
  // Waits up to `timeout` for the process to exit by itself.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

  bool running();
  pid_t pid() const { return pid_; }
  std::string log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Polls `predicate` every few milliseconds until it holds or `timeout` passes.
template <typename Predicate>
bool eventually(Predicate&& predicate,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    struct timespec ts {
      0, 5'000'000
    };
    nanosleep(&ts, nullptr);
  }
  return predicate();
}

// Path of a program built next to rlimitd (build/bin/<name>).
std::string program_path(const std::string& name);

}  // namespace rlimit::testing
