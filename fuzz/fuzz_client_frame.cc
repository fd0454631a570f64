// The client's side of the socket: a byte stream from the daemon is cut into
// frames (wire::next_frame with libclient's reply limit) and each frame is
// read as libclient reads it: the hand-written check decoder first
// (wire::decode_check_response), protobuf when it says "not mine".
// Property: whenever the fast decoder accepts a frame, protobuf accepts it
// too and reads the same values (check_codec.h promises exactly that).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "rlimit/v1/client.pb.h"
#include "wire/check_codec.h"
#include "wire/frame.h"

namespace {

using rlimit::wire::CheckResponseView;

void same_as_protobuf(std::string_view payload, const CheckResponseView& view) {
  rlimit::v1::Response parsed;
  FUZZ_CHECK(parsed.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  FUZZ_CHECK(parsed.id() == view.id);
  FUZZ_CHECK(parsed.has_check());
  const auto& results = parsed.check().results();
  FUZZ_CHECK(static_cast<std::size_t>(results.size()) == view.results.size());
  for (int i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const auto& v = view.results[static_cast<std::size_t>(i)];
    FUZZ_CHECK(r.allowed() == v.allowed);
    FUZZ_CHECK(static_cast<std::int32_t>(r.status()) == v.status);
    FUZZ_CHECK(r.error() == v.error);
    FUZZ_CHECK(r.delay_us() == v.delay_us);
    FUZZ_CHECK(static_cast<std::uint32_t>(r.rules_size()) == v.rule_count);
    for (int j = 0; j < r.rules_size(); ++j) {
      const auto& pr = r.rules(j);
      const auto& vr = view.rules[v.first_rule + static_cast<std::uint32_t>(j)];
      FUZZ_CHECK(pr.name() == vr.name);
      FUZZ_CHECK(pr.allowed() == vr.allowed);
      FUZZ_CHECK(pr.limit() == vr.limit);
      FUZZ_CHECK(pr.period_ms() == vr.period_ms);
      FUZZ_CHECK(pr.burst() == vr.burst);
      FUZZ_CHECK(pr.remaining() == vr.remaining);
      FUZZ_CHECK(pr.retry_after_us() == vr.retry_after_us);
      FUZZ_CHECK(pr.reset_after_us() == vr.reset_after_us);
      FUZZ_CHECK(pr.algorithm() == vr.algorithm);
      FUZZ_CHECK(pr.delay_us() == vr.delay_us);
      FUZZ_CHECK(pr.lease() == vr.lease);
      FUZZ_CHECK(pr.over_limit() == vr.over_limit);
    }
  }
}

// The writer must reproduce what the decoder read: encode the view again
// and decode it.
void writer_round_trip(const CheckResponseView& view) {
  rlimit::wire::CheckResponseWriter writer;
  writer.begin(view.id);
  for (const auto& result : view.results) {
    writer.add_result(result.allowed, result.status, result.error,
                      view.rules.data() + result.first_rule, result.rule_count, result.delay_us);
  }
  std::string framed;
  writer.finish(framed);
  const rlimit::wire::FrameView frame =
      rlimit::wire::next_frame(framed, rlimit::wire::kDefaultMaxResponseBytes);
  FUZZ_CHECK(frame.status == rlimit::wire::FrameStatus::kComplete);
  FUZZ_CHECK(frame.consumed == framed.size());
  CheckResponseView again;
  FUZZ_CHECK(rlimit::wire::decode_check_response(frame.payload, again));
  FUZZ_CHECK(again.id == view.id);
  FUZZ_CHECK(again.results.size() == view.results.size());
  FUZZ_CHECK(again.rules.size() == view.rules.size());
  same_as_protobuf(frame.payload, again);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view stream(reinterpret_cast<const char*>(data), size);
  CheckResponseView view;
  rlimit::v1::Response parsed;
  // Every frame a stream of this size can hold; a bound so a run always ends.
  for (std::size_t frames = 0; frames <= size; ++frames) {
    const rlimit::wire::FrameView frame =
        rlimit::wire::next_frame(stream, rlimit::wire::kDefaultMaxResponseBytes);
    if (frame.status != rlimit::wire::FrameStatus::kComplete) {
      FUZZ_CHECK(frame.status == rlimit::wire::FrameStatus::kNeedMore ||
                 frame.declared_bytes > rlimit::wire::kDefaultMaxResponseBytes);
      break;
    }
    FUZZ_CHECK(frame.consumed == rlimit::wire::kFrameHeaderBytes + frame.payload.size());
    FUZZ_CHECK(frame.consumed <= stream.size());
    FUZZ_CHECK(frame.payload.data() == stream.data() + rlimit::wire::kFrameHeaderBytes);
    if (rlimit::wire::decode_check_response(frame.payload, view)) {
      same_as_protobuf(frame.payload, view);
      writer_round_trip(view);
    } else {
      // What libclient does then; a failure is a protocol error, not a fault.
      (void)parsed.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()));
    }
    stream.remove_prefix(frame.consumed);
  }
  return 0;
}
