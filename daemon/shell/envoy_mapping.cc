#include "shell/envoy_mapping.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "core/token_bucket.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rlimit/v1/client.pb.h"
#include "shell/face_answer.h"

namespace rlimit::shell {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using RateLimit = rls::RateLimitResponse_RateLimit;

constexpr std::string_view kDomainKey = "domain";
constexpr std::string_view kOverLimitHeader = "x-rlimit-over-limit";

constexpr std::uint64_t kSecondMs = 1000;
constexpr std::uint64_t kMinuteMs = 60 * kSecondMs;
constexpr std::uint64_t kHourMs = 60 * kMinuteMs;
constexpr std::uint64_t kDayMs = 24 * kHourMs;

struct Unit {
  RateLimit::Unit unit;
  std::uint64_t ms;
};
// Smallest first.
constexpr Unit kUnits[] = {
    {RateLimit::SECOND, kSecondMs},  {RateLimit::MINUTE, kMinuteMs},
    {RateLimit::HOUR, kHourMs},      {RateLimit::DAY, kDayMs},
    {RateLimit::WEEK, 7 * kDayMs},   {RateLimit::MONTH, 30 * kDayMs},
    {RateLimit::YEAR, 365 * kDayMs},
};

// The period of an override's unit, or 0 for UNKNOWN (and values this
// daemon does not know).
std::uint64_t unit_period_ms(envoy::type::v3::RateLimitUnit unit) {
  switch (unit) {
    case envoy::type::v3::SECOND:
      return kSecondMs;
    case envoy::type::v3::MINUTE:
      return kMinuteMs;
    case envoy::type::v3::HOUR:
      return kHourMs;
    case envoy::type::v3::DAY:
      return kDayMs;
    case envoy::type::v3::WEEK:
      return 7 * kDayMs;
    case envoy::type::v3::MONTH:
      return 30 * kDayMs;
    case envoy::type::v3::YEAR:
      return 365 * kDayMs;
    default:
      return 0;
  }
}

void append_escaped(std::string& out, std::string_view part) {
  for (const char c : part) {
    switch (c) {
      case '%':
        out += "%25";
        break;
      case '/':
        out += "%2F";
        break;
      case '=':
        out += "%3D";
        break;
      default:
        out += c;
    }
  }
}

EnvoyOutcome invalid(std::string message) {
  return {.status = EnvoyStatus::kInvalidArgument, .message = std::move(message)};
}

std::string at(int index) { return "descriptor " + std::to_string(index) + ": "; }

// The rule that decided `result` (see the header), or nullptr when none did.
const v1::RuleResult* deciding_rule(const v1::CheckResult& result) {
  const v1::RuleResult* best = nullptr;
  for (const v1::RuleResult& rule : result.rules()) {
    if (!result.allowed()) {
      if (rule.allowed()) continue;
      if (best == nullptr) {
        best = &rule;
      } else if (best->retry_after_us() >= 0 &&
                 (rule.retry_after_us() < 0 || rule.retry_after_us() > best->retry_after_us())) {
        best = &rule;
      }
    } else if (best == nullptr || rule.remaining() < best->remaining()) {
      best = &rule;
    }
  }
  return best;
}

void add_header(google::protobuf::RepeatedPtrField<envoy::config::core::v3::HeaderValue>& headers,
                std::string_view key, std::string value) {
  envoy::config::core::v3::HeaderValue* header = headers.Add();
  header->set_key(key.data(), key.size());
  header->set_value(std::move(value));
}

}  // namespace

std::string envoy_inline_key(const rls::RateLimitRequest& request, int descriptor) {
  std::string key = "envoy:";
  append_escaped(key, request.domain());
  for (const RateLimitDescriptor::Entry& entry : request.descriptors(descriptor).entries()) {
    key += '/';
    append_escaped(key, entry.key());
    key += '=';
    append_escaped(key, entry.value());
  }
  return key;
}

EnvoyOutcome envoy_to_request(const rls::RateLimitRequest& in, const EnvoyRequestLimits& limits,
                              v1::Request& out) {
  out.Clear();
  if (in.domain().empty()) return invalid("domain is empty");
  if (in.descriptors_size() == 0) return invalid("no descriptors");
  out.set_version(v1::VERSION_1);
  v1::CheckRequest* request = out.mutable_check();
  std::vector<std::string_view> keys;
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const RateLimitDescriptor& descriptor = in.descriptors(i);
    if (descriptor.entries_size() == 0) return invalid(at(i) + "no entries");
    // The domain is one descriptor of the check.
    if (static_cast<std::size_t>(descriptor.entries_size()) + 1 >
        limits.max_descriptors_per_check) {
      return invalid(at(i) + std::to_string(descriptor.entries_size()) + " entries; at most " +
                     std::to_string(limits.max_descriptors_per_check - 1) +
                     " (max_descriptors_per_check, the domain counting as one)");
    }
    keys.clear();
    keys.push_back(kDomainKey);
    for (const RateLimitDescriptor::Entry& entry : descriptor.entries()) {
      if (entry.key().empty()) return invalid(at(i) + "an entry has an empty key");
      keys.push_back(entry.key());
    }
    std::sort(keys.begin(), keys.end());
    if (auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end()) {
      if (*twice == kDomainKey) {
        return invalid(at(i) + "entry key \"domain\": the request's domain is that key");
      }
      return invalid(at(i) + "entry key \"" + std::string(*twice) + "\" appears twice");
    }

    std::uint64_t cost = in.hits_addend();
    if (descriptor.has_hits_addend()) cost = descriptor.hits_addend().value();
    if (cost == 0) cost = 1;
    if (cost > static_cast<std::uint64_t>(core::kMaxTokens)) {
      return invalid(at(i) + "hits_addend " + std::to_string(cost) + " is above 2^50");
    }

    v1::Check* check = request->add_checks();
    check->set_cost(cost);
    v1::Descriptor* domain = check->add_descriptors();
    domain->set_key(kDomainKey.data(), kDomainKey.size());
    domain->set_value(in.domain());
    for (const RateLimitDescriptor::Entry& entry : descriptor.entries()) {
      v1::Descriptor* d = check->add_descriptors();
      d->set_key(entry.key());
      d->set_value(entry.value());
    }
    if (descriptor.has_limit() && limits.allow_inline_limits) {
      const std::uint64_t period_ms = unit_period_ms(descriptor.limit().unit());
      if (period_ms == 0) return invalid(at(i) + "limit override has no known unit");
      v1::InlineLimit* limit = check->mutable_inline_limit();
      limit->set_key(envoy_inline_key(in, i));
      limit->set_limit(descriptor.limit().requests_per_unit());
      limit->set_period_ms(period_ms);
    }
  }
  return {};
}

void rate_limit_for(std::uint64_t limit, std::uint64_t period_ms, RateLimit& out) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (period_ms == 0) {
    out.set_requests_per_unit(static_cast<std::uint32_t>(std::min(limit, kMax)));
    out.set_unit(RateLimit::UNKNOWN);
    return;
  }
  for (const Unit& unit : kUnits) {
    if (unit.ms == period_ms && limit <= kMax) {
      out.set_requests_per_unit(static_cast<std::uint32_t>(limit));
      out.set_unit(unit.unit);
      return;
    }
  }
  using Wide = unsigned __int128;
  for (const Unit& unit : kUnits) {
    const Wide scaled = static_cast<Wide>(limit) * unit.ms;
    if (scaled % period_ms == 0 && scaled / period_ms <= kMax) {
      out.set_requests_per_unit(static_cast<std::uint32_t>(scaled / period_ms));
      out.set_unit(unit.unit);
      return;
    }
  }
  // No unit holds the rate exactly: the most precise one that fits, rounded
  // down.
  for (auto unit = std::rbegin(kUnits); unit != std::rend(kUnits); ++unit) {
    const Wide per_unit = static_cast<Wide>(limit) * unit->ms / period_ms;
    if (per_unit <= kMax) {
      out.set_requests_per_unit(static_cast<std::uint32_t>(per_unit));
      out.set_unit(unit->unit);
      return;
    }
  }
  out.set_requests_per_unit(static_cast<std::uint32_t>(kMax));
  out.set_unit(RateLimit::SECOND);
}

EnvoyOutcome envoy_from_response(const v1::Response& response, std::size_t descriptors,
                                 bool ietf_headers, rls::RateLimitResponse& out,
                                 EnvoyAnswerSummary* summary) {
  out.Clear();
  if (response.has_error()) {
    const v1::Error& error = response.error();
    EnvoyStatus status = EnvoyStatus::kInvalidArgument;
    if (error.code() == v1::Error::TOO_MANY_CHECKS) status = EnvoyStatus::kResourceExhausted;
    if (error.code() == v1::Error::SHUTTING_DOWN) status = EnvoyStatus::kUnavailable;
    return {.status = status, .message = error.message()};
  }
  if (!response.has_check() ||
      static_cast<std::size_t>(response.check().results_size()) != descriptors) {
    return {.status = EnvoyStatus::kInternal,
            .message = "the daemon's answer does not hold one result per descriptor"};
  }
  const v1::CheckResponse& checks = response.check();
  for (int i = 0; i < checks.results_size(); ++i) {
    const v1::CheckResult& result = checks.results(i);
    if (result.status() == v1::CheckResult::INVALID) return invalid(at(i) + result.error());
  }

  bool over = false;
  std::string over_limit_rules;
  std::vector<std::string_view> over_limit_seen;
  // Every descriptor's rules as one list, for the IETF fields.
  v1::CheckResult combined;
  combined.set_allowed(true);
  for (const v1::CheckResult& result : checks.results()) {
    rls::RateLimitResponse_DescriptorStatus* status = out.add_statuses();
    status->set_code(result.allowed() ? rls::RateLimitResponse::OK
                                      : rls::RateLimitResponse::OVER_LIMIT);
    if (!result.allowed()) {
      over = true;
      combined.set_allowed(false);
    }
    if (const v1::RuleResult* rule = deciding_rule(result)) {
      RateLimit* limit = status->mutable_current_limit();
      limit->set_name(rule->name());
      rate_limit_for(rule->limit(), rule->period_ms(), *limit);
      status->set_limit_remaining(static_cast<std::uint32_t>(
          std::min<std::uint64_t>(rule->remaining(), std::numeric_limits<std::uint32_t>::max())));
      if (rule->reset_after_us() >= 0) {
        google::protobuf::Duration* reset = status->mutable_duration_until_reset();
        reset->set_seconds(rule->reset_after_us() / 1'000'000);
        reset->set_nanos(static_cast<std::int32_t>(rule->reset_after_us() % 1'000'000) * 1000);
      }
    }
    for (const v1::RuleResult& rule : result.rules()) {
      if (ietf_headers) *combined.add_rules() = rule;
      if (!rule.over_limit()) continue;
      if (std::find(over_limit_seen.begin(), over_limit_seen.end(), rule.name()) !=
          over_limit_seen.end()) {
        continue;
      }
      over_limit_seen.push_back(rule.name());
      if (!over_limit_rules.empty()) over_limit_rules += ", ";
      over_limit_rules += rule.name();
    }
  }
  out.set_overall_code(over ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK);
  if (ietf_headers) {
    RateLimitHeaders headers = shell::ietf_headers(combined);
    auto& add = *out.mutable_response_headers_to_add();
    if (!headers.policy.empty()) add_header(add, "RateLimit-Policy", std::move(headers.policy));
    if (!headers.ratelimit.empty()) add_header(add, "RateLimit", std::move(headers.ratelimit));
    if (!headers.retry_after.empty())
      add_header(add, "Retry-After", std::move(headers.retry_after));
  }
  if (!over_limit_rules.empty()) {
    add_header(*out.mutable_response_headers_to_add(), kOverLimitHeader,
               std::move(over_limit_rules));
  }
  if (summary != nullptr) {
    summary->descriptors = descriptors;
    summary->over_limit = over;
  }
  return {};
}

}  // namespace rlimit::shell
