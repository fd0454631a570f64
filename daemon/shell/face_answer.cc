#include "shell/face_answer.h"

#include <algorithm>
#include <vector>

#include "rlimit/v1/client.pb.h"

namespace rlimit::shell {

RateLimitHeaders ietf_headers(const v1::CheckResult& result) {
  std::vector<RateLimitHeaderItem> items;
  items.reserve(static_cast<std::size_t>(result.rules_size()));
  for (const v1::RuleResult& rule : result.rules()) {
    items.push_back({.name = rule.name(),
                     .limit = rule.limit(),
                     // A concurrency rule's period_ms is its lease TTL.
                     .period_ms = rule.algorithm() == "concurrency" ? 0 : rule.period_ms(),
                     .remaining = rule.remaining(),
                     .reset_after_us = rule.reset_after_us()});
  }
  return ratelimit_headers(items, result.allowed(), retry_after_us(result));
}

std::int64_t retry_after_us(const v1::CheckResult& result) {
  if (result.allowed()) return 0;
  std::int64_t longest = 0;
  for (const v1::RuleResult& rule : result.rules()) {
    if (rule.allowed()) continue;
    if (rule.retry_after_us() < 0) return -1;
    longest = std::max(longest, rule.retry_after_us());
  }
  return longest;
}

bool over_limit(const v1::CheckResult& result) {
  return std::any_of(result.rules().begin(), result.rules().end(),
                     [](const v1::RuleResult& rule) { return rule.over_limit(); });
}

std::string_view status_name(const v1::CheckResult& result) {
  switch (result.status()) {
    case v1::CheckResult::OK:
      return "ok";
    case v1::CheckResult::EXEMPT:
      return "exempt";
    case v1::CheckResult::INVALID:
      return "invalid";
    case v1::CheckResult::KEY_TABLE_FULL:
      return "key_table_full";
    default:
      return "unknown";
  }
}

}  // namespace rlimit::shell
