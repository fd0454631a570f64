// A hand-written codec for the one exchange that dominates the protocol: a
// Request carrying checks, and the Response carrying their results. The wire
// format stays protobuf (rlimit/v1/client.proto); this code reads and writes
// exactly those bytes without building protobuf messages, which costs more
// than deciding the checks. Pure functions over byte buffers; no I/O, no
// shared state.
//
// The decoders accept only the common shape and say "not mine" (false) for
// anything else (another body, unknown fields, a repeated singular message,
// a string that is not plain ASCII, malformed bytes): the caller then parses
// with protobuf, which decides what the bytes mean. So a decoder that returns
// true has read what protobuf would have read, and one that returns false
// changes nothing. The encoders write the bytes protobuf's own serializer
// writes for the same message (fields in number order, defaults left out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlimit::wire {

// ---- Request (client -> daemon) ------------------------------------------

struct DescriptorView {
  std::string_view key;
  std::string_view value;
};

struct InlineLimitView {
  std::string_view key;
  std::uint64_t limit = 0;
  std::uint64_t period_ms = 0;
  std::uint64_t burst = 0;
};

struct CheckView {
  std::uint32_t first_descriptor = 0;  // into CheckRequestView::descriptors
  std::uint32_t descriptor_count = 0;
  bool has_cost = false;
  std::uint64_t cost = 0;
  bool has_inline_limit = false;
  InlineLimitView inline_limit;
  std::int32_t mode = 0;  // rlimit.v1.Check.Mode; only known values are read here
  bool has_max_wait_us = false;
  std::int64_t max_wait_us = 0;
};

// Views into the payload: valid while it is.
struct CheckRequestView {
  std::uint64_t version = 0;
  std::uint64_t id = 0;
  std::vector<CheckView> checks;
  std::vector<DescriptorView> descriptors;
  void clear() {
    version = id = 0;
    checks.clear();
    descriptors.clear();
  }
};

// Reads a Request payload whose body is `check`. False: not the common shape
// (parse it with protobuf instead); `out` is then unspecified.
bool decode_check_request(std::string_view payload, CheckRequestView& out);

// Builds a framed Request{version: VERSION_1, id, check: {checks...}}.
// Reusable: begin() starts over, keeping the allocations.
class CheckRequestWriter {
 public:
  void begin(std::uint64_t id);
  void begin_check();
  void add_descriptor(std::string_view key, std::string_view value);
  // Leave unset for the default cost of 1 (as libclient does).
  void set_cost(std::uint64_t cost);
  void set_inline_limit(std::string_view key, std::uint64_t limit, std::uint64_t period_ms,
                        std::uint64_t burst);
  // rlimit.v1.Check.Mode; CHECK (0) writes nothing, as protobuf does.
  void set_mode(std::int32_t mode);
  // `optional`: present even when 0.
  void set_max_wait_us(std::int64_t max_wait_us);
  // Fields go out in the order they are set: call the setters in field
  // order (descriptors, cost, inline limit, mode, max wait), as protobuf
  // writes them.
  void end_check();
  // Appends the frame to `out`; false (appending nothing) above
  // max_frame_bytes.
  bool finish(std::string& out, std::uint32_t max_frame_bytes);

 private:
  std::uint64_t id_ = 0;
  std::string body_;   // CheckRequest: the finished checks
  std::string check_;  // the check being built
};

// ---- Response (daemon -> client) -----------------------------------------

struct RuleResultView {
  std::string_view name;
  bool allowed = false;
  std::uint64_t limit = 0;
  std::uint64_t period_ms = 0;
  std::uint64_t burst = 0;
  std::uint64_t remaining = 0;
  std::int64_t retry_after_us = 0;
  std::int64_t reset_after_us = 0;
  std::string_view algorithm;
  std::int64_t delay_us = 0;
  std::string_view lease;  // bytes: any value
  bool over_limit = false;
};

struct CheckResultView {
  bool allowed = false;
  std::int32_t status = 0;  // rlimit.v1.CheckResult.Status
  std::string_view error;
  std::int64_t delay_us = 0;
  std::uint32_t first_rule = 0;  // into CheckResponseView::rules
  std::uint32_t rule_count = 0;
};

struct CheckResponseView {
  std::uint64_t id = 0;
  std::vector<CheckResultView> results;
  std::vector<RuleResultView> rules;
  void clear() {
    id = 0;
    results.clear();
    rules.clear();
  }
};

// Reads a Response payload whose body is `check`. False: not the common
// shape (an Error, a status, anything unusual): parse it with protobuf.
bool decode_check_response(std::string_view payload, CheckResponseView& out);

// Builds a framed Response{id, check: {results...}}. Reusable.
class CheckResponseWriter {
 public:
  void begin(std::uint64_t id);
  // One CheckResult: `rules` holds `rule_count` entries.
  void add_result(bool allowed, std::int32_t status, std::string_view error,
                  const RuleResultView* rules, std::size_t rule_count, std::int64_t delay_us = 0);
  // Payload bytes the frame will carry (without the 4-byte header).
  std::size_t payload_bytes() const;
  // Appends the frame to `out`.
  void finish(std::string& out);

 private:
  std::uint64_t id_ = 0;
  std::string body_;  // CheckResponse: the results
};

}  // namespace rlimit::wire
