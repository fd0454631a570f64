#include "shell/state_file_writer.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "shell/rules_service.h"

namespace rlimit::shell {

StateFileWriter::StateFileWriter(boost::asio::io_context& io, Write write)
    : io_(io),
      write_(write ? std::move(write)
                   : Write([](const std::string& path, const std::string& contents) {
                       return write_file_atomically(path, contents);
                     })),
      worker_([this] { run(); }) {}

StateFileWriter::~StateFileWriter() {
  *alive_ = false;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void StateFileWriter::write(std::string path, std::string contents, Done done) {
  ++pending_;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(Job{std::move(path), std::move(contents), std::move(done)});
  }
  wake_.notify_one();
}

void StateFileWriter::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      // Stopping still writes what was asked: an apply's file is whole
      // either way (written aside, then renamed).
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::optional<std::string> error = write_(job.path, job.contents);
    // One worker, posted in order: results come back in the order asked.
    boost::asio::post(io_, [this, alive = alive_, done = std::move(job.done),
                            error = std::move(error)]() mutable {
      if (!*alive) return;
      --pending_;
      done(std::move(error));
    });
  }
}

}  // namespace rlimit::shell
