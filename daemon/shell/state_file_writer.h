// Writes files off the event loop: the rules state file (rules_service.h)
// is written, fsynced, renamed and its directory fsynced on a worker thread,
// so a slow disk delays the apply that waits for it and nothing else (every
// check on the node used to wait too: docs/reliability.md, "Soak"). Writes
// are done one at a time in the order asked, and each one's result is handed
// back on the event loop, in that order. Owns its one thread; every member is
// called on the event loop's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace rlimit::shell {

class StateFileWriter {
 public:
  // Writes `contents` to `path`; returns why it failed, or nullopt. Runs on
  // the worker thread. write_file_atomically (rules_service.h) by default.
  using Write = std::function<std::optional<std::string>(const std::string& path,
                                                         const std::string& contents)>;
  // Called on the event loop with the write's result.
  using Done = std::function<void(std::optional<std::string> error)>;

  explicit StateFileWriter(boost::asio::io_context& io, Write write = {});
  // Finishes the writes asked for (their Done are not called), then joins.
  ~StateFileWriter();
  StateFileWriter(const StateFileWriter&) = delete;
  StateFileWriter& operator=(const StateFileWriter&) = delete;

  // Queues a write; `done` runs on the event loop once it is done.
  void write(std::string path, std::string contents, Done done);
  // Writes asked for and not yet handed back.
  std::size_t pending() const { return pending_; }

 private:
  struct Job {
    std::string path;
    std::string contents;
    Done done;
  };
  void run();

  boost::asio::io_context& io_;
  Write write_;
  // Set false by the destructor; a result posted after it is dropped.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::size_t pending_ = 0;  // event loop only
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;   // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread worker_;     // last: starts once the rest is built
};

}  // namespace rlimit::shell
