// Turns one decoded Request into calls on the core::Limiter and one Response:
// the only code that knows both the protobuf messages and the core's types.
// No Asio and no I/O, so it is tested with messages in and messages out.
// One per server, shared by its sessions; not thread-safe (it reuses scratch
// space across calls, like the single-threaded loop that drives it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "core/limiter.h"
#include "core/time.h"
#include "shell/counters.h"
#include "shell/status.h"

namespace rlimit::v1 {
class Request;
class Response;
class Check;
class CheckResult;
class CheckRequest;
class CheckResponse;
}  // namespace rlimit::v1

namespace rlimit::shell {

class Dispatcher {
 public:
  // What the session does once the response is sent.
  struct Outcome {
    bool error = false;  // the response is an Error; its message says why
    bool close = false;  // the stream cannot be trusted any more: close it
  };

  // Every argument must outlive the Dispatcher. `settings` is read on each
  // call, so bounds changed by a reload apply at once.
  Dispatcher(core::Limiter& limiter, const config::DaemonSettings& settings,
             ShellCounters& counters, const StatusContext& status);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Decodes one frame's payload into `request` and answers into `response`.
  // Both are cleared and refilled, so a session reuses them across frames.
  Outcome handle_frame(std::string_view payload, core::TimeUs now, v1::Request& request,
                       v1::Response& response);

  // Answers a decoded request.
  Outcome handle(const v1::Request& request, core::TimeUs now, v1::Response& response);

  // Answers a frame whose header declared more than max_frame_bytes.
  Outcome frame_too_large(std::uint32_t declared_bytes, v1::Response& response);

  // Appends `response`, framed, to `out`. An answer above max_response_bytes
  // (the client would refuse it) is replaced in `response` by an Error, which
  // is appended instead; returns false then.
  bool append_response(v1::Response& response, std::string& out);

 private:
  Outcome handle_check(const v1::CheckRequest& body, core::TimeUs now, v1::Response& response);
  void decide(const v1::Check& check, core::TimeUs now, v1::CheckResult& result);
  void set_invalid(v1::CheckResult& result, std::string message);
  // Clears `response`, keeping its CheckResponse's allocations for reuse.
  void recycle(v1::Response& response);

  core::Limiter& limiter_;
  const config::DaemonSettings& settings_;
  ShellCounters& counters_;
  const StatusContext& status_;

  // Scratch reused across checks so the hot path does not allocate.
  std::vector<core::Descriptor> descriptors_;
  core::InlineLimit inline_limit_;
  core::CheckOutput output_;
  std::unique_ptr<v1::CheckResponse> spare_check_;
};

}  // namespace rlimit::shell
