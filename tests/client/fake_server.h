// A fake rlimitd for client tests: a thread serving an AF_UNIX socket in a
// fresh temporary directory, decoding Request frames and answering as the
// test's handler says. Every wait is bounded; the destructor stops the thread,
// closes every socket and removes the directory.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/v1/client.pb.h"

namespace rlimit::testing {

class FakeServer {
 public:
  enum class Action {
    kReply,           // send `response` (its id preset to the request's)
    kIgnore,          // read the request, never answer
    kClose,           // close the connection without answering
    kReplyThenClose,  // answer, then close the connection
  };
  using Handler = std::function<Action(const v1::Request& request, v1::Response& response)>;

  // Answers every check with allowed/OK and no rules, every status with an
  // empty status, every members request with a single node's (mode "none",
  // no members).
  static Action allow_all(const v1::Request& request, v1::Response& response);

  explicit FakeServer(Handler handler = allow_all);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  // A path in the same directory where nothing listens.
  std::string missing_socket_path() const { return dir_ + "/nobody.sock"; }

  void set_handler(Handler handler);
  int connections() const { return connections_.load(); }
  // Every request decoded so far, in arrival order.
  std::vector<v1::Request> requests() const;
  std::size_t frames() const;

 private:
  void run();
  bool serve(int fd, std::string& buffer);  // false: close this connection

  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  Handler handler_;
  std::vector<v1::Request> requests_;
  std::thread thread_;
};

}  // namespace rlimit::testing
