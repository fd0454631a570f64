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
#include "shell/latency_histogram.h"
#include "shell/lease_token.h"
#include "shell/status.h"
#include "wire/check_codec.h"

namespace rlimit::v1 {
class Request;
class Response;
class Check;
class CheckResult;
class CheckRequest;
class CheckResponse;
class ReleaseRequest;
class ResetRequest;
}  // namespace rlimit::v1

namespace rlimit::shell {

class RulesService;

class Dispatcher {
 public:
  // What the session does once the response is sent.
  struct Outcome {
    bool error = false;  // the response is an Error; its message says why
    bool close = false;  // the stream cannot be trusted any more: close it
    // A rules apply that finishes later (the rules service persists in the
    // background): the session awaits it (rules_await.h) and fills the
    // response's rules body, then sends it.
    bool rules_apply = false;
  };

  // Every argument must outlive the Dispatcher. `settings` is read on each
  // call, so bounds changed by a reload apply at once.
  Dispatcher(core::Limiter& limiter, const config::DaemonSettings& settings,
             ShellCounters& counters, const StatusContext& status, LeaseTokens& lease_tokens);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Decodes one frame's payload into `request` and answers into `response`.
  // Both are cleared and refilled, so a session reuses them across frames.
  Outcome handle_frame(std::string_view payload, core::TimeUs now, v1::Request& request,
                       v1::Response& response);

  // Answers a decoded request.
  Outcome handle(const v1::Request& request, core::TimeUs now, v1::Response& response);

  // The fast path for the frame nearly every client sends: a CheckRequest in
  // the common shape (wire/check_codec.h) is decoded and answered without
  // building protobuf messages, and the framed answer appended to `out`.
  // Returns false, having done nothing, for any other frame: answer that one
  // with handle_frame. The answer is the same either way. If it would exceed
  // max_response_bytes, `response` holds the Error sent instead and the
  // outcome says error.
  bool answer_checks(std::string_view payload, core::TimeUs now, v1::Response& response,
                     std::string& out, Outcome& outcome);

  // Answers a frame whose header declared more than max_frame_bytes.
  Outcome frame_too_large(std::uint32_t declared_bytes, v1::Response& response);

  // Appends `response`, framed, to `out`. An answer above max_response_bytes
  // (the client would refuse it) is replaced in `response` by an Error, which
  // is appended instead; returns false then.
  bool append_response(v1::Response& response, std::string& out);

  // Answers rules requests (rules_service.h); until set they are refused
  // with NOT_ALLOWED. Must outlive the Dispatcher.
  void set_rules_service(RulesService* rules) { rules_ = rules; }
  RulesService* rules_service() const { return rules_; }

  // How long answers took, per face: each face times its own requests (the
  // Dispatcher reads no clock) and /metrics reports them.
  DecisionTimes& decision_times() { return decision_times_; }
  const DecisionTimes& decision_times() const { return decision_times_; }

 private:
  // One check as read from either decoder; its descriptors are in
  // descriptors_.
  struct CheckFields {
    bool has_cost = false;
    std::uint64_t cost = 0;
    bool has_inline_limit = false;
    std::string_view inline_key;
    std::uint64_t inline_limit = 0;
    std::uint64_t inline_period_ms = 0;
    std::uint64_t inline_burst = 0;
    std::int32_t mode = 0;  // rlimit.v1.Check.Mode
    bool has_max_wait_us = false;
    std::int64_t max_wait_us = 0;
  };

  Outcome handle_check(const v1::CheckRequest& body, core::TimeUs now, v1::Response& response);
  Outcome handle_release(const v1::ReleaseRequest& body, core::TimeUs now,
                         v1::Response& response);
  Outcome handle_reset(const v1::ResetRequest& body, core::TimeUs now, v1::Response& response);
  // Fills `input` from `check` (descriptors from descriptors_). Returns why
  // the check's values do not fit the core's types, or "" when they do.
  std::string make_input(const CheckFields& check, core::CheckInput& input);
  // The same, making output_ the INVALID answer (counted) when they do not.
  bool input_or_invalid(const CheckFields& check, core::CheckInput& input);
  // Reads what a Check or a ResetRequest names (inline limit, descriptors)
  // into `fields` and descriptors_.
  template <typename Message>
  void read_target(const Message& message, CheckFields& fields);
  // Reads one check of either decoder into `fields` and descriptors_.
  void read_check(const v1::Check& check, CheckFields& fields);
  void read_check(const wire::CheckView& check, CheckFields& fields);

  // A batch whose answer could exceed max_response_bytes is refused whole
  // before any of it is decided, so nothing is charged for an answer the
  // client never gets. answer_bound() finds the bound of a batch of either
  // decoder's checks in two steps: quick_answer_bound from the rules' facts,
  // the number of checks and `variable_bytes` (at least the sum over the
  // checks of their inline key's bytes and 4 + key + value bytes per
  // descriptor: twice the payload is enough), O(1); only if that is above
  // the limit, check_answer_bound of each check from what it would match
  // (Limiter::shape), which decides nothing.
  template <typename Checks>
  std::size_t answer_bound(const Checks& checks, std::size_t variable_bytes);
  std::size_t quick_answer_bound(std::size_t checks, std::size_t variable_bytes) const;
  std::size_t check_answer_bound(const CheckFields& check);
  // Makes `response` the refusal of a batch whose answer could take `bound`
  // bytes.
  Outcome answer_too_large(std::size_t bound, v1::Response& response);
  // How many checks ahead a batch starts fetching the buckets it will touch
  // (Limiter::prefetch): enough to overlap a memory access, few enough that
  // the first ones are still cached when decided.
  static constexpr std::size_t kPrefetchAhead = 4;
  void prefetch(const wire::CheckView& check);
  // Decides one check into output_ (an INVALID output when the check's values
  // do not fit the core's types).
  void decide(const CheckFields& check, core::TimeUs now);
  // output_.rules[i]'s lease token, or empty; valid until the next decide().
  void make_lease_tokens();
  // Makes output_ an INVALID answer; returns false.
  bool set_invalid(std::string message);
  Outcome too_many_checks(std::size_t count, v1::Response& response);
  // Clears `response`, keeping its CheckResponse's allocations for reuse.
  void recycle(v1::Response& response);

  core::Limiter& limiter_;
  const config::DaemonSettings& settings_;
  ShellCounters& counters_;
  const StatusContext& status_;
  LeaseTokens& lease_tokens_;

  // Scratch reused across checks so the hot path does not allocate.
  std::vector<core::Descriptor> descriptors_;
  std::vector<core::Descriptor> prefetch_descriptors_;  // scratch for prefetch()
  core::InlineLimit inline_limit_;
  core::CheckOutput output_;
  core::CheckShape shape_;
  std::unique_ptr<v1::CheckResponse> spare_check_;
  wire::CheckRequestView request_view_;
  wire::CheckResponseWriter writer_;
  std::vector<wire::RuleResultView> rule_views_;
  std::string lease_token_bytes_;          // every token of output_, back to back
  std::vector<std::string_view> leases_;   // one per output_.rules entry
  RulesService* rules_ = nullptr;
  DecisionTimes decision_times_;
};

}  // namespace rlimit::shell
