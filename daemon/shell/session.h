// One client connection: reads bytes, splits them into frames, has the
// Dispatcher answer each one, and writes every answer to what it has read in
// one write. While it writes it does not read, so a client that does not read
// its answers stops being read (backpressure). Kept alive by its own
// coroutine (shared_from_this); the server holds only a weak_ptr. Runs on the
// server's single thread; not thread-safe. A write the client does not take
// within write_timeout, and (when set) a read that gets nothing within
// idle_timeout, close the connection (counted: write_timeouts, idle_timeouts).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "shell/counters.h"

namespace rlimit::v1 {
class Request;
class Response;
}  // namespace rlimit::v1

namespace rlimit::shell {

class Dispatcher;

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  using ClosedHandler = std::function<void(std::uint64_t id)>;

  // Answers held back at most this long before they are written even though
  // more received frames wait: bounds a session's memory against clients that
  // pipeline cheap requests with large answers.
  static constexpr std::size_t kOutputHighWaterBytes = 256 * 1024;
  // The read buffer starts (and shrinks back to) this; a larger frame grows it
  // to header + max_frame_bytes at most.
  static constexpr std::size_t kReadChunkBytes = 16 * 1024;

  // `dispatcher`, `settings` and `counters` must outlive the session.
  // `on_closed` runs once, when the session has closed its socket.
  Session(Socket socket, std::uint64_t id, Dispatcher& dispatcher,
          const config::DaemonSettings& settings, ShellCounters& counters, ClosedHandler on_closed);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the session's coroutine on the socket's executor.
  void start();

  // Graceful stop: a session waiting for input with nothing arrived stops
  // now; one answering or writing, or with bytes already in its socket, first
  // answers every complete frame that has reached it, then stops. Idempotent.
  void stop();

  // Closes the socket now, dropping unanswered frames. Idempotent.
  void close_now();

  std::uint64_t id() const { return id_; }

 private:
  struct Batch {
    bool close = false;  // a fatal error was answered: close after writing
    bool more = false;   // stopped at the high-water mark: frames may remain
    // The last frame is a rules apply that finishes later (request_ holds
    // it): await it (finish_rules_apply), then answer what follows.
    bool rules_apply = false;
  };

  boost::asio::awaitable<void> run();
  // Answers buffered complete frames into out_ until none is left, the
  // output reaches kOutputHighWaterBytes, or an answer says to close.
  Batch answer_buffered();
  // Awaits the rules apply in request_ and appends its answer to out_. The
  // connection's later frames wait; the event loop does not.
  boost::asio::awaitable<void> finish_rules_apply();
  enum class WriteStatus { kDone, kPartial, kFailed };
  // Writes what of out_ the socket takes now, without waiting.
  WriteStatus write_now();
  // Writes the rest of out_ through the event loop; false if the connection
  // failed.
  boost::asio::awaitable<bool> write_rest();
  void note_write_error(const boost::system::error_code& error);
  // Closes the connection if the operation that follows has not finished
  // within `timeout_us` (0: no deadline); disarm() when it has.
  enum class Deadline { kWrite, kIdle };
  void arm(Deadline kind, std::int64_t timeout_us);
  void disarm();
  void written_all();
  // Moves the unconsumed bytes to the front and makes room to read the rest
  // of the pending frame.
  void prepare_read_space();
  void note_truncated_frame();
  void log_error_reply(bool closing);
  void finish(std::exception_ptr error);

  Socket socket_;
  const std::uint64_t id_;
  Dispatcher& dispatcher_;
  const config::DaemonSettings& settings_;
  ShellCounters& counters_;
  ClosedHandler on_closed_;

  // Received bytes not yet answered live in in_[in_begin_, in_end_).
  std::string in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::string out_;  // framed answers not yet written, from out_written_ on
  std::size_t out_written_ = 0;
  std::unique_ptr<v1::Request> request_;
  std::unique_ptr<v1::Response> response_;

  boost::asio::steady_timer deadline_;
  bool reading_ = false;
  bool stopping_ = false;
  bool warned_ = false;  // repeated non-fatal errors drop to debug level
};

}  // namespace rlimit::shell
