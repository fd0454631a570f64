// The whole socket path of a request: a client's byte stream is cut into
// frames as Session::answer_buffered cuts it (wire::next_frame with
// max_frame_bytes), each frame goes to the Dispatcher exactly as the session
// sends it (the fast check path first, then protobuf; frame_too_large for an
// oversized header) and is decided by a Limiter holding every algorithm
// (fuzz_rules.h), with a rules service for RulesRequests. Each frame is
// decided 1 ms after the previous one. Properties: the answer always fits
// max_response_bytes and decodes as a Response.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "fuzz_daemon.h"
#include "rlimit/v1/client.pb.h"
#include "shell/dispatch.h"
#include "wire/frame.h"

namespace {

using rlimit::shell::Dispatcher;

// One answer as appended to the session's output: one whole frame within
// the limit that protobuf reads.
void check_answer(std::string_view out, std::uint32_t max_response_bytes) {
  const rlimit::wire::FrameView frame =
      rlimit::wire::next_frame(out, rlimit::wire::kDefaultMaxResponseBytes);
  FUZZ_CHECK(frame.status == rlimit::wire::FrameStatus::kComplete);
  FUZZ_CHECK(frame.consumed == out.size());
  FUZZ_CHECK(frame.payload.size() <= max_response_bytes);
  rlimit::v1::Response response;
  FUZZ_CHECK(response.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size())));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Made at the first frame: a stream that holds none needs no Daemon.
  std::optional<rlimit::fuzz::Daemon> daemon;
  static const std::uint32_t max_frame_bytes =
      rlimit::fuzz::Daemon::make_settings().max_frame_bytes;
  rlimit::v1::Request request;
  rlimit::v1::Response response;
  std::string out;
  std::string_view pending(reinterpret_cast<const char*>(data), size);
  rlimit::core::TimeUs now = 1'000'000'000;
  for (std::size_t frames = 0; frames <= size; ++frames, now += 1000) {
    const rlimit::wire::FrameView frame = rlimit::wire::next_frame(pending, max_frame_bytes);
    if (frame.status == rlimit::wire::FrameStatus::kNeedMore) break;
    if (!daemon) daemon.emplace();
    Dispatcher::Outcome outcome;
    out.clear();
    if (frame.status == rlimit::wire::FrameStatus::kTooLarge) {
      outcome = daemon->dispatcher.frame_too_large(frame.declared_bytes, response);
      FUZZ_CHECK(outcome.close);
      pending = {};
    } else {
      pending.remove_prefix(frame.consumed);
      if (daemon->dispatcher.answer_checks(frame.payload, now, response, out, outcome)) {
        check_answer(out, daemon->settings.max_response_bytes);
        continue;
      }
      FUZZ_CHECK(out.empty());
      outcome = daemon->dispatcher.handle_frame(frame.payload, now, request, response);
    }
    daemon->dispatcher.append_response(response, out);
    check_answer(out, daemon->settings.max_response_bytes);
    if (outcome.close) break;
  }
  return 0;
}
