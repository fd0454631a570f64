#include "shell/dispatch.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "rlimit/v1/client.pb.h"
#include "wire/frame.h"

namespace rlimit::shell {
namespace {

using Outcome = Dispatcher::Outcome;

Outcome set_error(v1::Response& response, v1::Error::Code code, std::string message, bool close) {
  v1::Error* error = response.mutable_error();
  error->set_code(code);
  error->set_message(std::move(message));
  return Outcome{.error = true, .close = close};
}

v1::CheckResult::Status to_proto(core::CheckStatus status) {
  switch (status) {
    case core::CheckStatus::kOk:
      return v1::CheckResult::OK;
    case core::CheckStatus::kExempt:
      return v1::CheckResult::EXEMPT;
    case core::CheckStatus::kInvalid:
      return v1::CheckResult::INVALID;
    case core::CheckStatus::kKeyTableFull:
      return v1::CheckResult::KEY_TABLE_FULL;
  }
  return v1::CheckResult::INVALID;
}

std::string too_big(std::string_view what, std::uint64_t value, std::int64_t max) {
  return std::string(what) + " " + std::to_string(value) + " is above the maximum " +
         std::to_string(max);
}

// Largest inline period in milliseconds the core accepts.
constexpr std::uint64_t kMaxPeriodMs = core::kMaxPeriodUs / core::kUsPerMs;

}  // namespace

Dispatcher::Dispatcher(core::Limiter& limiter, const config::DaemonSettings& settings,
                       ShellCounters& counters, const StatusContext& status)
    : limiter_(limiter), settings_(settings), counters_(counters), status_(status) {}

Dispatcher::~Dispatcher() = default;

void Dispatcher::recycle(v1::Response& response) {
  if (response.has_check() && spare_check_ == nullptr) {
    spare_check_.reset(response.release_check());
    spare_check_->Clear();  // keeps the repeated results allocated
  }
  response.Clear();
}

Outcome Dispatcher::handle_frame(std::string_view payload, core::TimeUs now, v1::Request& request,
                                 v1::Response& response) {
  ++counters_.frames_received;
  if (payload.size() > static_cast<std::size_t>(INT_MAX) ||
      !request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    ++counters_.malformed_frames;
    recycle(response);
    return set_error(response, v1::Error::MALFORMED_FRAME,
                     "a frame of " + std::to_string(payload.size()) +
                         " bytes does not decode as a rlimit.v1.Request",
                     /*close=*/true);
  }
  return handle(request, now, response);
}

Outcome Dispatcher::frame_too_large(std::uint32_t declared_bytes, v1::Response& response) {
  ++counters_.frames_too_large;
  recycle(response);
  return set_error(response, v1::Error::FRAME_TOO_LARGE,
                   "a frame declares " + std::to_string(declared_bytes) +
                       " bytes; max_frame_bytes is " + std::to_string(settings_.max_frame_bytes),
                   /*close=*/true);
}

Outcome Dispatcher::handle(const v1::Request& request, core::TimeUs now, v1::Response& response) {
  recycle(response);
  response.set_id(request.id());
  // The version comes first: a later version may carry bodies we do not know.
  if (request.version() != v1::VERSION_1) {
    ++counters_.unsupported_version;
    return set_error(response, v1::Error::UNSUPPORTED_VERSION,
                     "protocol version " + std::to_string(request.version()) +
                         " is not supported; this daemon speaks VERSION_1",
                     /*close=*/false);
  }
  switch (request.body_case()) {
    case v1::Request::kCheck:
      ++counters_.check_requests;
      return handle_check(request.check(), now, response);
    case v1::Request::kStatus:
      ++counters_.status_requests;
      fill_status(status_, limiter_, counters_, now, *response.mutable_status());
      return {};
    case v1::Request::kMembers:
      ++counters_.members_requests;
      fill_members(status_, now, *response.mutable_members());
      return {};
    case v1::Request::BODY_NOT_SET:
      break;
  }
  // Either no body or one from a newer schema: we cannot tell what the client
  // meant, so its later frames are suspect too.
  ++counters_.unknown_message_types;
  return set_error(response, v1::Error::UNKNOWN_MESSAGE_TYPE,
                   "the request has no body this daemon knows (expected check, status or members)",
                   /*close=*/true);
}

Outcome Dispatcher::handle_check(const v1::CheckRequest& body, core::TimeUs now,
                                 v1::Response& response) {
  const auto count = static_cast<std::size_t>(body.checks_size());
  if (count > settings_.max_checks_per_frame) {
    ++counters_.too_many_checks;
    return set_error(response, v1::Error::TOO_MANY_CHECKS,
                     std::to_string(count) + " checks in one frame; max_checks_per_frame is " +
                         std::to_string(settings_.max_checks_per_frame),
                     /*close=*/false);
  }
  if (spare_check_ != nullptr) response.set_allocated_check(spare_check_.release());
  v1::CheckResponse* out = response.mutable_check();
  for (const v1::Check& check : body.checks()) decide(check, now, *out->add_results());
  return {};
}

void Dispatcher::set_invalid(v1::CheckResult& result, std::string message) {
  ++counters_.invalid_checks;
  result.set_allowed(false);
  result.set_status(v1::CheckResult::INVALID);
  result.set_error(std::move(message));
}

void Dispatcher::decide(const v1::Check& check, core::TimeUs now, v1::CheckResult& result) {
  core::CheckInput input;

  // Values that do not fit the core's types are refused here (this check is
  // INVALID, the others in the frame proceed); the core validates the rest.
  if (check.has_cost()) {
    if (check.cost() > static_cast<std::uint64_t>(core::kMaxTokens)) {
      return set_invalid(result, too_big("cost", check.cost(), core::kMaxTokens));
    }
    input.cost = static_cast<std::int64_t>(check.cost());
  }

  if (check.has_inline_limit()) {
    const v1::InlineLimit& limit = check.inline_limit();
    if (limit.key().empty()) {
      // An empty InlineLimit is how some encoders say "none"; numbers without
      // a key are a limit the client meant but the daemon could not apply.
      if (limit.limit() != 0 || limit.period_ms() != 0 || limit.burst() != 0) {
        return set_invalid(result, "inline_limit has no key");
      }
    } else {
      if (limit.period_ms() == 0) {
        return set_invalid(result, "inline_limit.period_ms must be above 0");
      }
      if (limit.period_ms() > kMaxPeriodMs) {
        return set_invalid(result, too_big("inline_limit.period_ms", limit.period_ms(),
                                           static_cast<std::int64_t>(kMaxPeriodMs)));
      }
      if (limit.limit() > static_cast<std::uint64_t>(core::kMaxTokens)) {
        return set_invalid(result, too_big("inline_limit.limit", limit.limit(), core::kMaxTokens));
      }
      if (limit.burst() > static_cast<std::uint64_t>(core::kMaxTokens)) {
        return set_invalid(result, too_big("inline_limit.burst", limit.burst(), core::kMaxTokens));
      }
      inline_limit_.key = limit.key();
      inline_limit_.params.limit = static_cast<std::int64_t>(limit.limit());
      inline_limit_.params.period_us =
          static_cast<std::int64_t>(limit.period_ms()) * core::kUsPerMs;
      inline_limit_.params.burst = limit.burst() == 0 ? inline_limit_.params.limit
                                                      : static_cast<std::int64_t>(limit.burst());
      input.inline_limit = &inline_limit_;
    }
  }

  descriptors_.clear();
  for (const v1::Descriptor& d : check.descriptors()) {
    descriptors_.push_back(core::Descriptor{.key = d.key(), .value = d.value()});
  }
  input.descriptors = descriptors_;

  limiter_.check(input, now, output_);

  result.set_allowed(output_.allowed);
  result.set_status(to_proto(output_.status));
  if (!output_.error.empty()) result.set_error(output_.error);
  for (const core::RuleVerdict& verdict : output_.rules) {
    v1::RuleResult* rule = result.add_rules();
    rule->set_name(verdict.name.data(), verdict.name.size());
    rule->set_allowed(verdict.allowed);
    rule->set_limit(static_cast<std::uint64_t>(verdict.params.limit));
    rule->set_period_ms(static_cast<std::uint64_t>(verdict.params.period_us / core::kUsPerMs));
    rule->set_burst(static_cast<std::uint64_t>(verdict.params.burst));
    rule->set_remaining(static_cast<std::uint64_t>(std::max<std::int64_t>(0, verdict.remaining)));
    rule->set_retry_after_us(verdict.retry_after_us);
    rule->set_reset_after_us(verdict.reset_after_us);
  }
}

bool Dispatcher::append_response(v1::Response& response, std::string& out) {
  const std::uint32_t max_bytes = settings_.max_response_bytes;
  if (wire::append_message_frame(out, response, max_bytes)) return true;

  ++counters_.responses_too_large;
  const std::size_t bytes = response.ByteSizeLong();
  const bool was_check = response.has_check();
  const std::uint64_t id = response.id();
  recycle(response);
  response.set_id(id);
  // The checks were decided (and charged); the client learns only that it
  // must send fewer per frame.
  set_error(response, was_check ? v1::Error::TOO_MANY_CHECKS : v1::Error::UNKNOWN,
            "the answer (" + std::to_string(bytes) + " bytes) is above max_response_bytes (" +
                std::to_string(max_bytes) + ")" +
                (was_check ? "; send fewer checks per frame" : ""),
            /*close=*/false);
  if (!wire::append_message_frame(out, response, max_bytes)) {
    // Only a max_response_bytes too small for an Error gets here; the client
    // still gets told why rather than nothing.
    wire::append_message_frame(out, response, UINT32_MAX);
  }
  return false;
}

}  // namespace rlimit::shell
