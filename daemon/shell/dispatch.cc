#include "shell/dispatch.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "rlimit/v1/client.pb.h"
#include "shell/rules_service.h"
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

// Upper bounds of an answer's encoding in bytes (protobuf: a tag of 1 byte, a
// varint of at most 10, a length of at most 5), for refusing a batch whose
// answer could exceed max_response_bytes before deciding it.
// A CheckResult's own fields (allowed, status, delay, the error's tag and
// length) and its tag and length in the CheckResponse.
constexpr std::size_t kResultFixedBytes = 32;
// The longest error text a check can get, beside the descriptor key it may
// quote ("descriptor key \"...\" appears twice").
constexpr std::size_t kErrorFixedBytes = 256;
// A RuleResult's fields other than its name and lease (the algorithm's name
// at most 17 bytes), and its tag and length in the CheckResult.
constexpr std::size_t kRuleFixedBytes = 128;
// A lease field beyond its key: tag, length, the id and the tag.
constexpr std::size_t kLeaseFixedBytes = 6 + LeaseTokens::kIdBytes + LeaseTokens::kTagBytes;
// The Response's id and the CheckResponse's tag and length.
constexpr std::size_t kResponseFixedBytes = 32;

// Largest inline period in milliseconds the core accepts.
constexpr std::uint64_t kMaxPeriodMs = core::kMaxPeriodUs / core::kUsPerMs;

v1::ReleaseResponse::Status to_proto(core::LeaseStatus status) {
  switch (status) {
    case core::LeaseStatus::kDone:
      return v1::ReleaseResponse::DONE;
    case core::LeaseStatus::kUnknown:
      return v1::ReleaseResponse::UNKNOWN_LEASE;
    case core::LeaseStatus::kNotALease:
      return v1::ReleaseResponse::NOT_A_LEASE;
  }
  return v1::ReleaseResponse::NOT_A_LEASE;
}

}  // namespace

Dispatcher::Dispatcher(core::Limiter& limiter, const config::DaemonSettings& settings,
                       ShellCounters& counters, const StatusContext& status,
                       LeaseTokens& lease_tokens)
    : limiter_(limiter),
      settings_(settings),
      counters_(counters),
      status_(status),
      lease_tokens_(lease_tokens) {}

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
    case v1::Request::kRelease:
      ++counters_.release_requests;
      return handle_release(request.release(), now, response);
    case v1::Request::kReset:
      ++counters_.reset_requests;
      return handle_reset(request.reset(), now, response);
    case v1::Request::kRules:
      if (rules_ == nullptr) {
        return set_error(response, v1::Error::NOT_ALLOWED, "this daemon serves no rules API",
                         /*close=*/false);
      }
      if (request.rules().action() == v1::RulesRequest::APPLY && rules_->persists_in_background()) {
        Outcome outcome;
        outcome.rules_apply = true;
        return outcome;
      }
      answer_rules_request(*rules_, request.rules(), *response.mutable_rules());
      return {};
    case v1::Request::BODY_NOT_SET:
      break;
  }
  // Either no body or one from a newer schema: we cannot tell what the client
  // meant, so its later frames are suspect too.
  ++counters_.unknown_message_types;
  return set_error(response, v1::Error::UNKNOWN_MESSAGE_TYPE,
                   "the request has no body this daemon knows (expected check, status, members, "
                   "release, reset or rules)",
                   /*close=*/true);
}

Outcome Dispatcher::too_many_checks(std::size_t count, v1::Response& response) {
  ++counters_.too_many_checks;
  return set_error(response, v1::Error::TOO_MANY_CHECKS,
                   std::to_string(count) + " checks in one frame; max_checks_per_frame is " +
                       std::to_string(settings_.max_checks_per_frame),
                   /*close=*/false);
}

Outcome Dispatcher::handle_check(const v1::CheckRequest& body, core::TimeUs now,
                                 v1::Response& response) {
  const auto count = static_cast<std::size_t>(body.checks_size());
  if (count > settings_.max_checks_per_frame) return too_many_checks(count, response);
  std::size_t variable_bytes = 0;
  for (const v1::Check& check : body.checks()) {
    variable_bytes += check.inline_limit().key().size();
    for (const v1::Descriptor& d : check.descriptors()) {
      variable_bytes += 4 + d.key().size() + d.value().size();
    }
  }
  const std::size_t bound = answer_bound(body.checks(), variable_bytes);
  if (bound > settings_.max_response_bytes) return answer_too_large(bound, response);
  if (spare_check_ != nullptr) response.set_allocated_check(spare_check_.release());
  v1::CheckResponse* out = response.mutable_check();
  for (const v1::Check& check : body.checks()) {
    CheckFields fields;
    read_check(check, fields);
    decide(fields, now);

    v1::CheckResult& result = *out->add_results();
    result.set_allowed(output_.allowed);
    result.set_status(to_proto(output_.status));
    if (!output_.error.empty()) result.set_error(output_.error);
    result.set_delay_us(output_.delay_us);
    for (std::size_t i = 0; i < output_.rules.size(); ++i) {
      const core::RuleVerdict& verdict = output_.rules[i];
      v1::RuleResult* rule = result.add_rules();
      rule->set_name(verdict.name.data(), verdict.name.size());
      rule->set_allowed(verdict.allowed);
      rule->set_limit(static_cast<std::uint64_t>(verdict.params.limit));
      rule->set_period_ms(static_cast<std::uint64_t>(verdict.params.period_us / core::kUsPerMs));
      rule->set_burst(static_cast<std::uint64_t>(verdict.params.burst));
      rule->set_remaining(static_cast<std::uint64_t>(std::max<std::int64_t>(0, verdict.remaining)));
      rule->set_retry_after_us(verdict.retry_after_us);
      rule->set_reset_after_us(verdict.reset_after_us);
      rule->set_algorithm(core::algorithm_name(verdict.algorithm));
      rule->set_delay_us(verdict.delay_us);
      if (!leases_[i].empty()) rule->set_lease(leases_[i].data(), leases_[i].size());
      rule->set_over_limit(verdict.over_limit);
    }
  }
  return {};
}

Outcome Dispatcher::handle_release(const v1::ReleaseRequest& body, core::TimeUs now,
                                   v1::Response& response) {
  // Each lease costs about what a check does: the same bound.
  const auto count = static_cast<std::size_t>(body.leases_size());
  if (count > settings_.max_checks_per_frame) {
    ++counters_.too_many_checks;
    return set_error(response, v1::Error::TOO_MANY_CHECKS,
                     std::to_string(count) + " leases in one frame; max_checks_per_frame is " +
                         std::to_string(settings_.max_checks_per_frame),
                     /*close=*/false);
  }
  v1::ReleaseResponse* out = response.mutable_release();
  for (const std::string& token : body.leases()) {
    std::string_view key;
    std::uint64_t id = 0;
    switch (lease_tokens_.decode(token, key, id)) {
      case LeaseTokens::Decoded::kOk:
        break;
      case LeaseTokens::Decoded::kMalformed:
        ++counters_.leases_malformed;
        out->add_statuses(v1::ReleaseResponse::MALFORMED_LEASE);
        continue;
      case LeaseTokens::Decoded::kForged:
        // Answered as a lease never issued, which it is.
        ++counters_.leases_forged;
        out->add_statuses(v1::ReleaseResponse::UNKNOWN_LEASE);
        continue;
    }
    out->add_statuses(to_proto(limiter_.release_lease(key, id, body.extend(), now)));
  }
  return {};
}

Outcome Dispatcher::handle_reset(const v1::ResetRequest& body, core::TimeUs now,
                                 v1::Response& response) {
  if (!settings_.allow_reset) {
    ++counters_.resets_refused;
    return set_error(response, v1::Error::NOT_ALLOWED,
                     "reset is disabled on this daemon (allow_reset = false)", /*close=*/false);
  }
  CheckFields fields;
  read_target(body, fields);
  core::CheckInput input;
  std::size_t existed = 0;
  if (input_or_invalid(fields, input)) existed = limiter_.reset(input, now, output_);
  if (output_.status == core::CheckStatus::kInvalid) {
    return set_error(response, v1::Error::INVALID_REQUEST, "reset: " + output_.error,
                     /*close=*/false);
  }
  v1::ResetResponse* out = response.mutable_reset();
  out->set_keys_reset(existed);
  for (const core::RuleVerdict& verdict : output_.rules) {
    out->add_rules(verdict.name.data(), verdict.name.size());
  }
  return {};
}

bool Dispatcher::answer_checks(std::string_view payload, core::TimeUs now, v1::Response& response,
                               std::string& out, Outcome& outcome) {
  // Too many checks, another version, another body: the slow path says why.
  if (!wire::decode_check_request(payload, request_view_) ||
      request_view_.checks.size() > settings_.max_checks_per_frame) {
    return false;
  }
  ++counters_.frames_received;
  ++counters_.check_requests;
  const std::vector<wire::CheckView>& checks = request_view_.checks;
  // Each descriptor takes at least 2 + key + value bytes of the payload.
  if (const std::size_t bound = answer_bound(checks, 2 * payload.size());
      bound > settings_.max_response_bytes) {
    recycle(response);
    response.set_id(request_view_.id);
    outcome = answer_too_large(bound, response);
    if (!wire::append_message_frame(out, response, settings_.max_response_bytes)) {
      wire::append_message_frame(out, response, UINT32_MAX);
    }
    return true;
  }
  writer_.begin(request_view_.id);
  // A batch: start fetching the buckets of the checks a few places ahead,
  // so that their cache misses overlap (docs/performance.md, 1M keys).
  for (std::size_t i = 0; i < checks.size() && i < kPrefetchAhead; ++i) prefetch(checks[i]);
  for (std::size_t c = 0; c < checks.size(); ++c) {
    const wire::CheckView& check = checks[c];
    if (c + kPrefetchAhead < checks.size()) prefetch(checks[c + kPrefetchAhead]);
    CheckFields fields;
    read_check(check, fields);
    decide(fields, now);

    rule_views_.clear();
    for (std::size_t i = 0; i < output_.rules.size(); ++i) {
      const core::RuleVerdict& verdict = output_.rules[i];
      rule_views_.push_back(wire::RuleResultView{
          .name = verdict.name,
          .allowed = verdict.allowed,
          .limit = static_cast<std::uint64_t>(verdict.params.limit),
          .period_ms = static_cast<std::uint64_t>(verdict.params.period_us / core::kUsPerMs),
          .burst = static_cast<std::uint64_t>(verdict.params.burst),
          .remaining = static_cast<std::uint64_t>(std::max<std::int64_t>(0, verdict.remaining)),
          .retry_after_us = verdict.retry_after_us,
          .reset_after_us = verdict.reset_after_us,
          .algorithm = core::algorithm_name(verdict.algorithm),
          .delay_us = verdict.delay_us,
          .lease = leases_[i],
          .over_limit = verdict.over_limit});
    }
    writer_.add_result(output_.allowed, to_proto(output_.status), output_.error, rule_views_.data(),
                       rule_views_.size(), output_.delay_us);
  }
  outcome = {};
  const std::size_t bytes = writer_.payload_bytes();
  if (bytes <= settings_.max_response_bytes) {
    writer_.finish(out);
    return true;
  }
  // Not reached while the bound above holds (it refuses such a batch
  // before deciding it); kept so that an answer the client would refuse is
  // never sent. The checks were decided and charged.
  ++counters_.responses_too_large;
  recycle(response);
  response.set_id(request_view_.id);
  outcome =
      set_error(response, v1::Error::TOO_MANY_CHECKS,
                "the answer (" + std::to_string(bytes) + " bytes) is above max_response_bytes (" +
                    std::to_string(settings_.max_response_bytes) + "); send fewer checks per frame",
                /*close=*/false);
  if (!wire::append_message_frame(out, response, settings_.max_response_bytes)) {
    wire::append_message_frame(out, response, UINT32_MAX);
  }
  return true;
}

template <typename Message>
void Dispatcher::read_target(const Message& message, CheckFields& fields) {
  fields.has_inline_limit = message.has_inline_limit();
  if (fields.has_inline_limit) {
    const v1::InlineLimit& limit = message.inline_limit();
    fields.inline_key = limit.key();
    fields.inline_limit = limit.limit();
    fields.inline_period_ms = limit.period_ms();
    fields.inline_burst = limit.burst();
  }
  descriptors_.clear();
  for (const v1::Descriptor& d : message.descriptors()) {
    descriptors_.push_back(core::Descriptor{.key = d.key(), .value = d.value()});
  }
}

void Dispatcher::read_check(const v1::Check& check, CheckFields& fields) {
  read_target(check, fields);
  fields.has_cost = check.has_cost();
  fields.cost = check.cost();
  fields.mode = static_cast<std::int32_t>(check.mode());
  fields.has_max_wait_us = check.has_max_wait_us();
  fields.max_wait_us = check.max_wait_us();
}

void Dispatcher::read_check(const wire::CheckView& check, CheckFields& fields) {
  fields.has_cost = check.has_cost;
  fields.cost = check.cost;
  fields.has_inline_limit = check.has_inline_limit;
  fields.inline_key = check.inline_limit.key;
  fields.inline_limit = check.inline_limit.limit;
  fields.inline_period_ms = check.inline_limit.period_ms;
  fields.inline_burst = check.inline_limit.burst;
  fields.mode = check.mode;
  fields.has_max_wait_us = check.has_max_wait_us;
  fields.max_wait_us = check.max_wait_us;
  descriptors_.clear();
  for (std::uint32_t i = 0; i < check.descriptor_count; ++i) {
    const wire::DescriptorView& d = request_view_.descriptors[check.first_descriptor + i];
    descriptors_.push_back(core::Descriptor{.key = d.key, .value = d.value});
  }
}

template <typename Checks>
std::size_t Dispatcher::answer_bound(const Checks& checks, std::size_t variable_bytes) {
  const std::size_t quick = quick_answer_bound(static_cast<std::size_t>(checks.size()),
                                               variable_bytes);
  if (quick <= settings_.max_response_bytes) return quick;
  std::size_t bound = kResponseFixedBytes;
  for (const auto& check : checks) {
    CheckFields fields;
    read_check(check, fields);
    bound += check_answer_bound(fields);
  }
  return bound;
}

std::size_t Dispatcher::quick_answer_bound(std::size_t checks, std::size_t variable_bytes) const {
  // Per check: an error (its text quotes at most one descriptor key), or a
  // result per rule and one for the inline limit (named by its key), each
  // leased one with its key (the header and 4 + value bytes per descriptor).
  const core::RuleSetBounds& rules = limiter_.rule_bounds();
  const std::size_t leased_rules = rules.concurrency ? rules.rules : 0;
  const std::size_t per_check = kResultFixedBytes + kErrorFixedBytes +
                                (rules.rules + 1) * kRuleFixedBytes +
                                rules.rules * rules.max_name_bytes +
                                leased_rules * (kLeaseFixedBytes + core::kRuleKeyHeaderBytes);
  return kResponseFixedBytes + checks * per_check + variable_bytes * (2 + leased_rules);
}

std::size_t Dispatcher::check_answer_bound(const CheckFields& check) {
  core::CheckInput input;
  if (const std::string why = make_input(check, input); !why.empty()) {
    return kResultFixedBytes + why.size();
  }
  limiter_.shape(input, shape_);
  return kResultFixedBytes + shape_.error_bytes + shape_.verdicts * kRuleFixedBytes +
         shape_.name_bytes + shape_.leases * kLeaseFixedBytes + shape_.lease_key_bytes;
}

Outcome Dispatcher::answer_too_large(std::size_t bound, v1::Response& response) {
  ++counters_.responses_too_large;
  return set_error(response, v1::Error::TOO_MANY_CHECKS,
                   "the answer could take up to " + std::to_string(bound) +
                       " bytes, above max_response_bytes (" +
                       std::to_string(settings_.max_response_bytes) +
                       "); nothing was decided or charged: send fewer checks per frame",
                   /*close=*/false);
}

bool Dispatcher::set_invalid(std::string message) {
  ++counters_.invalid_checks;
  output_.clear();
  output_.allowed = false;
  output_.status = core::CheckStatus::kInvalid;
  output_.error = std::move(message);
  return false;
}

void Dispatcher::prefetch(const wire::CheckView& check) {
  prefetch_descriptors_.clear();
  for (std::uint32_t i = 0; i < check.descriptor_count; ++i) {
    const wire::DescriptorView& d = request_view_.descriptors[check.first_descriptor + i];
    prefetch_descriptors_.push_back(core::Descriptor{.key = d.key, .value = d.value});
  }
  limiter_.prefetch(core::CheckInput{prefetch_descriptors_, 1, nullptr});
}

void Dispatcher::decide(const CheckFields& check, core::TimeUs now) {
  core::CheckInput input;
  if (input_or_invalid(check, input)) limiter_.check(input, now, output_);
  make_lease_tokens();
}

bool Dispatcher::input_or_invalid(const CheckFields& check, core::CheckInput& input) {
  std::string why = make_input(check, input);
  return why.empty() || set_invalid(std::move(why));
}

void Dispatcher::make_lease_tokens() {
  lease_token_bytes_.clear();
  leases_.assign(output_.rules.size(), std::string_view());
  // Tokens are written first and viewed after, as the buffer may move.
  for (const core::RuleVerdict& verdict : output_.rules) {
    if (verdict.lease != core::alg::kNoTicket) {
      lease_tokens_.append(lease_token_bytes_, verdict.key, verdict.lease);
    }
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < output_.rules.size(); ++i) {
    const core::RuleVerdict& verdict = output_.rules[i];
    if (verdict.lease == core::alg::kNoTicket) continue;
    const std::size_t bytes = LeaseTokens::token_bytes(verdict.key.size());
    leases_[i] = std::string_view(lease_token_bytes_).substr(at, bytes);
    at += bytes;
  }
}

std::string Dispatcher::make_input(const CheckFields& check, core::CheckInput& input) {
  // Values that do not fit the core's types are refused here (this check is
  // INVALID, the others in the frame proceed); the core validates the rest.
  if (check.has_cost) {
    if (check.cost > static_cast<std::uint64_t>(core::kMaxTokens)) {
      return too_big("cost", check.cost, core::kMaxTokens);
    }
    input.cost = static_cast<std::int64_t>(check.cost);
  }

  if (check.has_inline_limit) {
    if (check.inline_key.empty()) {
      // An empty InlineLimit is how some encoders say "none"; numbers without
      // a key are a limit the client meant but the daemon could not apply.
      if (check.inline_limit != 0 || check.inline_period_ms != 0 || check.inline_burst != 0) {
        return "inline_limit has no key";
      }
    } else {
      if (check.inline_period_ms == 0) {
        return "inline_limit.period_ms must be above 0";
      }
      if (check.inline_period_ms > kMaxPeriodMs) {
        return too_big("inline_limit.period_ms", check.inline_period_ms,
                       static_cast<std::int64_t>(kMaxPeriodMs));
      }
      if (check.inline_limit > static_cast<std::uint64_t>(core::kMaxTokens)) {
        return too_big("inline_limit.limit", check.inline_limit, core::kMaxTokens);
      }
      if (check.inline_burst > static_cast<std::uint64_t>(core::kMaxTokens)) {
        return too_big("inline_limit.burst", check.inline_burst, core::kMaxTokens);
      }
      inline_limit_.key = check.inline_key;
      inline_limit_.params.limit = static_cast<std::int64_t>(check.inline_limit);
      inline_limit_.params.period_us =
          static_cast<std::int64_t>(check.inline_period_ms) * core::kUsPerMs;
      inline_limit_.params.burst = check.inline_burst == 0
                                       ? inline_limit_.params.limit
                                       : static_cast<std::int64_t>(check.inline_burst);
      input.inline_limit = &inline_limit_;
    }
  }

  switch (check.mode) {
    case v1::Check::CHECK:
      input.mode = core::CheckMode::kCheck;
      break;
    case v1::Check::PEEK:
      input.mode = core::CheckMode::kPeek;
      break;
    case v1::Check::RESERVE:
      input.mode = core::CheckMode::kReserve;
      break;
    default:
      return "mode " + std::to_string(check.mode) +
             " is not one this daemon knows (CHECK, PEEK, RESERVE)";
  }
  // Unset: no bound from the caller (the core's -1). The core checks the range.
  if (check.has_max_wait_us) input.max_wait_us = check.max_wait_us;
  input.load_permille = static_cast<std::int64_t>(
      std::min<std::uint64_t>(counters_.load_permille, static_cast<std::uint64_t>(INT64_MAX)));

  input.descriptors = descriptors_;
  return {};
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
