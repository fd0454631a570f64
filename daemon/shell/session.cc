#include "shell/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <utility>

#include "rlimit/v1/client.pb.h"
#include "shell/clock.h"
#include "shell/dispatch.h"
#include "shell/rules_await.h"
#include "shell/rules_service.h"
#include "wire/frame.h"

namespace rlimit::shell {

namespace asio = boost::asio;
using asio::as_tuple;
using asio::use_awaitable;

Session::Session(Socket socket, std::uint64_t id, Dispatcher& dispatcher,
                 const config::DaemonSettings& settings, ShellCounters& counters,
                 ClosedHandler on_closed)
    : socket_(std::move(socket)),
      id_(id),
      dispatcher_(dispatcher),
      settings_(settings),
      counters_(counters),
      on_closed_(std::move(on_closed)),
      in_(kReadChunkBytes, '\0'),
      request_(std::make_unique<v1::Request>()),
      response_(std::make_unique<v1::Response>()),
      deadline_(socket_.get_executor()) {}

Session::~Session() = default;

void Session::start() {
  // write_now() writes directly and must not block the loop on a full buffer.
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
  auto self = shared_from_this();
  // The handler holds `self`, so the session lives until its coroutine ends,
  // and sees the coroutine's exception instead of `detached` swallowing it.
  asio::co_spawn(socket_.get_executor(), run(),
                 [self](std::exception_ptr error) { self->finish(error); });
}

void Session::stop() {
  if (stopping_) return;
  stopping_ = true;
  // A session answering or writing sees stopping_ once it has answered what
  // it holds. One waiting for input stops now, unless bytes have already
  // arrived: then the pending read completes with them and they are answered.
  if (reading_) {
    boost::system::error_code error;
    if (socket_.available(error) == 0 || error) socket_.cancel(error);
  }
}

void Session::close_now() {
  stopping_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

asio::awaitable<void> Session::run() {
  for (;;) {
    for (;;) {
      const Batch batch = answer_buffered();
      if (!out_.empty()) {
        // Written here when the socket takes it all (nearly always): no
        // coroutine frame for the common case.
        const WriteStatus status = write_now();
        if (status == WriteStatus::kFailed) co_return;
        if (status == WriteStatus::kPartial && !co_await write_rest()) co_return;
      }
      if (batch.rules_apply) {
        co_await finish_rules_apply();
        continue;  // writes its answer, then answers the frames after it
      }
      if (batch.close) co_return;
      if (!batch.more) break;
    }
    if (!socket_.is_open()) co_return;
    if (stopping_) {
      // Drain what has already reached the socket, but wait for nothing new;
      // the server's grace timer bounds a client that keeps sending.
      boost::system::error_code available_error;
      if (socket_.available(available_error) == 0 || available_error) co_return;
    }

    prepare_read_space();
    reading_ = true;
    arm(Deadline::kIdle, settings_.idle_timeout_us);
    auto [error, bytes] = co_await socket_.async_read_some(
        asio::buffer(in_.data() + in_end_, in_.size() - in_end_), as_tuple(use_awaitable));
    disarm();
    reading_ = false;
    if (error) {
      if (error == asio::error::eof) {
        if (in_end_ > in_begin_) note_truncated_frame();
      } else if (error != asio::error::operation_aborted) {
        ++counters_.read_errors;
        spdlog::debug("connection {}: read failed: {}", id_, error.message());
      }
      co_return;
    }
    counters_.bytes_received += bytes;
    in_end_ += bytes;
  }
}

namespace {

// Records a batch's answering time in the socket face's histogram when the
// batch ends, each frame as the batch's mean: one clock read per batch (its
// start is the read that gave the batch its `now`).
struct BatchTimer {
  LatencyHistogram& histogram;
  std::chrono::steady_clock::time_point start;
  std::uint64_t frames = 0;
  ~BatchTimer() {
    if (frames == 0) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    histogram.observe(ns / static_cast<std::int64_t>(frames), frames);
  }
};

}  // namespace

Session::Batch Session::answer_buffered() {
  Batch batch;
  // Frames that arrived together are decided at one instant: one clock read
  // per batch, not per frame.
  BatchTimer timer{dispatcher_.decision_times().unix_socket, std::chrono::steady_clock::now()};
  const core::TimeUs now = steady_now_us(timer.start);
  while (out_.size() < kOutputHighWaterBytes) {
    const std::string_view pending(in_.data() + in_begin_, in_end_ - in_begin_);
    const wire::FrameView frame = wire::next_frame(pending, settings_.max_frame_bytes);
    Dispatcher::Outcome outcome;
    if (frame.status != wire::FrameStatus::kNeedMore) ++timer.frames;
    switch (frame.status) {
      case wire::FrameStatus::kNeedMore:
        return batch;
      case wire::FrameStatus::kTooLarge:
        // The length cannot be trusted, so neither can anything after it.
        outcome = dispatcher_.frame_too_large(frame.declared_bytes, *response_);
        in_begin_ = in_end_;
        break;
      case wire::FrameStatus::kComplete: {
        // Checks in the common shape are answered straight into out_.
        if (dispatcher_.answer_checks(frame.payload, now, *response_, out_, outcome)) {
          in_begin_ += frame.consumed;
          if (outcome.error) log_error_reply(outcome.close);
          continue;
        }
        outcome = dispatcher_.handle_frame(frame.payload, now, *request_, *response_);
        in_begin_ += frame.consumed;
        break;
      }
    }
    if (outcome.rules_apply) {
      batch.rules_apply = true;
      return batch;
    }
    const bool fits = dispatcher_.append_response(*response_, out_);
    if (outcome.error || !fits) log_error_reply(outcome.close);
    if (outcome.close) {
      batch.close = true;
      return batch;
    }
  }
  batch.more = true;
  return batch;
}

asio::awaitable<void> Session::finish_rules_apply() {
  RulesService& rules = *dispatcher_.rules_service();
  const v1::RulesRequest& request = request_->rules();
  // Named first: with a conditional's temporary inside the co_await, every
  // apply freed memory twice under GCC 12 (rules_await.cc).
  std::string text = request.text();
  std::string name = request.name().empty() ? std::string("<rules>") : request.name();
  const RulesService::Outcome outcome =
      co_await await_rules_apply(rules, std::move(text), std::move(name));
  fill_rules_response(rules, request, outcome, *response_->mutable_rules());
  if (!dispatcher_.append_response(*response_, out_)) log_error_reply(/*closing=*/false);
}

Session::WriteStatus Session::write_now() {
  // Answers nearly always fit the socket buffer: write them now, and wait on
  // the event loop only for what does not fit. (An async write that succeeds
  // at once still costs a trip through the loop and an extra epoll_wait.)
  boost::system::error_code error;
  std::size_t written = socket_.write_some(asio::buffer(out_), error);
  if (error == asio::error::would_block || error == asio::error::try_again) {
    error.clear();
    written = 0;
  }
  counters_.bytes_sent += written;
  if (error) {
    note_write_error(error);
    return WriteStatus::kFailed;
  }
  out_written_ = written;
  if (written < out_.size()) return WriteStatus::kPartial;
  written_all();
  return WriteStatus::kDone;
}

asio::awaitable<bool> Session::write_rest() {
  arm(Deadline::kWrite, settings_.write_timeout_us);
  auto [error, bytes] = co_await asio::async_write(
      socket_, asio::buffer(out_.data() + out_written_, out_.size() - out_written_),
      as_tuple(use_awaitable));
  disarm();
  counters_.bytes_sent += bytes;
  if (error) {
    note_write_error(error);
    co_return false;
  }
  written_all();
  co_return true;
}

void Session::note_write_error(const boost::system::error_code& error) {
  if (error != asio::error::operation_aborted) {
    ++counters_.write_errors;
    spdlog::debug("connection {}: write failed: {}", id_, error.message());
  }
}

void Session::arm(Deadline kind, std::int64_t timeout_us) {
  if (timeout_us <= 0) return;
  deadline_.expires_after(std::chrono::microseconds(timeout_us));
  deadline_.async_wait([weak = weak_from_this(), kind, timeout_us](boost::system::error_code error) {
    const std::shared_ptr<Session> self = weak.lock();
    if (error || !self) return;  // disarmed, or the session is gone
    const bool write = kind == Deadline::kWrite;
    ++(write ? self->counters_.write_timeouts : self->counters_.idle_timeouts);
    spdlog::warn("connection {}: {} for {} ms; closing", self->id_,
                 write ? "the client took no answer" : "nothing received",
                 timeout_us / 1000);
    boost::system::error_code ignored;
    self->socket_.close(ignored);  // the pending read or write ends aborted
  });
}

void Session::disarm() { deadline_.cancel(); }

void Session::written_all() {
  out_.clear();
  out_written_ = 0;
  // A burst of answers should not pin its peak memory for the connection's life.
  if (out_.capacity() > 2 * kOutputHighWaterBytes) out_.shrink_to_fit();
}

void Session::prepare_read_space() {
  const std::size_t pending = in_end_ - in_begin_;
  if (in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, pending);
    in_begin_ = 0;
    in_end_ = pending;
  }
  // Room for the whole pending frame once its header is known (next_frame
  // has already refused lengths above max_frame_bytes).
  std::size_t needed = wire::kFrameHeaderBytes;
  if (pending >= wire::kFrameHeaderBytes) {
    needed += wire::next_frame(std::string_view(in_.data(), pending), settings_.max_frame_bytes)
                  .declared_bytes;
  }
  const std::size_t want = std::max(kReadChunkBytes, needed);
  if (in_.size() < want) {
    in_.resize(want);
  } else if (pending == 0 && in_.size() > kReadChunkBytes) {
    in_.resize(kReadChunkBytes);
    in_.shrink_to_fit();
  }
}

void Session::note_truncated_frame() {
  ++counters_.truncated_frames;
  const std::size_t pending = in_end_ - in_begin_;
  const wire::FrameView frame = wire::next_frame(std::string_view(in_.data() + in_begin_, pending),
                                                 settings_.max_frame_bytes);
  if (pending < wire::kFrameHeaderBytes) {
    spdlog::warn("connection {}: peer closed mid-frame ({} of {} header bytes); closing", id_,
                 pending, wire::kFrameHeaderBytes);
  } else {
    spdlog::warn("connection {}: peer closed mid-frame ({} of {} payload bytes); closing", id_,
                 pending - wire::kFrameHeaderBytes, frame.declared_bytes);
  }
}

void Session::log_error_reply(bool closing) {
  // Closing errors happen once per connection; others could repeat per frame,
  // so only the first of those is a warning.
  const bool warn = closing || !warned_;
  if (!closing) warned_ = true;
  const v1::Error& error = response_->error();
  spdlog::log(warn ? spdlog::level::warn : spdlog::level::debug, "connection {}: {}: {}{}", id_,
              v1::Error::Code_Name(error.code()), error.message(), closing ? "; closing" : "");
}

void Session::finish(std::exception_ptr error) {
  if (error) {
    ++counters_.session_failures;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      spdlog::error("connection {}: internal error: {}; closing", id_, e.what());
    } catch (...) {
      spdlog::error("connection {}: unknown internal error; closing", id_);
    }
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  spdlog::debug("connection {} closed", id_);
  if (on_closed_) std::exchange(on_closed_, nullptr)(id_);
}

}  // namespace rlimit::shell
