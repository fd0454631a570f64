// The daemon's hand-written check decoder (wire::decode_check_request), the
// first thing every client frame meets. Properties: whenever it accepts a
// payload, protobuf accepts it too and reads the same values; and the
// writer libclient sends with (CheckRequestWriter) encodes those values so
// that both decoders read them back unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "rlimit/v1/client.pb.h"
#include "wire/check_codec.h"
#include "wire/frame.h"

namespace {

using rlimit::wire::CheckRequestView;

void same_as_protobuf(std::string_view payload, const CheckRequestView& view) {
  rlimit::v1::Request parsed;
  FUZZ_CHECK(parsed.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  FUZZ_CHECK(static_cast<std::uint64_t>(parsed.version()) == view.version);
  FUZZ_CHECK(parsed.id() == view.id);
  FUZZ_CHECK(parsed.has_check());
  const auto& checks = parsed.check().checks();
  FUZZ_CHECK(static_cast<std::size_t>(checks.size()) == view.checks.size());
  for (int i = 0; i < checks.size(); ++i) {
    const auto& c = checks[i];
    const auto& v = view.checks[static_cast<std::size_t>(i)];
    FUZZ_CHECK(static_cast<std::uint32_t>(c.descriptors_size()) == v.descriptor_count);
    for (int j = 0; j < c.descriptors_size(); ++j) {
      const auto& d = view.descriptors[v.first_descriptor + static_cast<std::uint32_t>(j)];
      FUZZ_CHECK(c.descriptors(j).key() == d.key);
      FUZZ_CHECK(c.descriptors(j).value() == d.value);
    }
    FUZZ_CHECK(c.has_cost() == v.has_cost);
    if (v.has_cost) FUZZ_CHECK(c.cost() == v.cost);
    FUZZ_CHECK(c.has_inline_limit() == v.has_inline_limit);
    if (v.has_inline_limit) {
      FUZZ_CHECK(c.inline_limit().key() == v.inline_limit.key);
      FUZZ_CHECK(c.inline_limit().limit() == v.inline_limit.limit);
      FUZZ_CHECK(c.inline_limit().period_ms() == v.inline_limit.period_ms);
      FUZZ_CHECK(c.inline_limit().burst() == v.inline_limit.burst);
    }
    FUZZ_CHECK(static_cast<std::int32_t>(c.mode()) == v.mode);
    FUZZ_CHECK(c.has_max_wait_us() == v.has_max_wait_us);
    if (v.has_max_wait_us) FUZZ_CHECK(c.max_wait_us() == v.max_wait_us);
  }
}

void writer_round_trip(const CheckRequestView& view) {
  rlimit::wire::CheckRequestWriter writer;
  writer.begin(view.id);
  for (const auto& check : view.checks) {
    writer.begin_check();
    for (std::uint32_t i = 0; i < check.descriptor_count; ++i) {
      const auto& d = view.descriptors[check.first_descriptor + i];
      writer.add_descriptor(d.key, d.value);
    }
    if (check.has_cost) writer.set_cost(check.cost);
    if (check.has_inline_limit) {
      writer.set_inline_limit(check.inline_limit.key, check.inline_limit.limit,
                              check.inline_limit.period_ms, check.inline_limit.burst);
    }
    writer.set_mode(check.mode);
    if (check.has_max_wait_us) writer.set_max_wait_us(check.max_wait_us);
    writer.end_check();
  }
  std::string framed;
  // Re-encoding never grows a payload by more than its version field and
  // headers, so a generous limit always fits.
  FUZZ_CHECK(writer.finish(framed, 1u << 30));
  const rlimit::wire::FrameView frame = rlimit::wire::next_frame(framed, 1u << 30);
  FUZZ_CHECK(frame.status == rlimit::wire::FrameStatus::kComplete);
  FUZZ_CHECK(frame.consumed == framed.size());
  CheckRequestView again;
  FUZZ_CHECK(rlimit::wire::decode_check_request(frame.payload, again));
  FUZZ_CHECK(again.id == view.id);
  FUZZ_CHECK(again.checks.size() == view.checks.size());
  FUZZ_CHECK(again.descriptors.size() == view.descriptors.size());
  same_as_protobuf(frame.payload, again);
  // Protobuf serializes the same message to the same bytes.
  rlimit::v1::Request parsed;
  FUZZ_CHECK(parsed.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size())));
  FUZZ_CHECK(parsed.SerializeAsString() == frame.payload);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  CheckRequestView view;
  if (rlimit::wire::decode_check_request(payload, view)) {
    same_as_protobuf(payload, view);
    writer_round_trip(view);
  }
  return 0;
}
