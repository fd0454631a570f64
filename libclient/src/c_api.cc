// The C ABI over rlimit::Client. Every entry point catches everything: no C++
// exception may unwind into C code.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlimit/client.h"
#include "rlimit/ratelimit_headers.h"
#include "rlimit/rlimit.h"

struct rlimit_client {
  explicit rlimit_client(rlimit::ClientOptions options) : client(std::move(options)) {}

  rlimit::Client client;
  // Reused across calls so the descriptor strings keep their capacity.
  rlimit::CheckRequest scratch;
};

struct rlimit_leases {
  std::vector<std::string> tokens;
};

namespace {

static_assert(static_cast<int>(rlimit::DecisionStatus::kOk) == RLIMIT_STATUS_OK);
static_assert(static_cast<int>(rlimit::DecisionStatus::kExempt) == RLIMIT_STATUS_EXEMPT);
static_assert(static_cast<int>(rlimit::DecisionStatus::kInvalid) == RLIMIT_STATUS_INVALID);
static_assert(static_cast<int>(rlimit::DecisionStatus::kKeyTableFull) ==
              RLIMIT_STATUS_KEY_TABLE_FULL);
static_assert(static_cast<int>(rlimit::DecisionStatus::kUnavailable) == RLIMIT_STATUS_UNAVAILABLE);
static_assert(static_cast<int>(rlimit::DecisionStatus::kProtocolError) ==
              RLIMIT_STATUS_PROTOCOL_ERROR);

// Copies with truncation; always NUL-terminates.
template <std::size_t N>
void copy_truncated(char (&dst)[N], std::string_view src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

void clear_decision(rlimit_decision_t* out) {
  std::memset(out, 0, sizeof(*out));
  out->remaining = std::numeric_limits<std::uint64_t>::max();
}

void fill_failure(rlimit_decision_t* out, bool allowed, rlimit_status_t status,
                  std::string_view error) {
  if (out == nullptr) return;
  clear_decision(out);
  out->allowed = allowed ? 1 : 0;
  out->status = status;
  copy_truncated(out->error, error);
}

void fill_decision(const rlimit::Decision& decision, rlimit_decision_t* out,
                   rlimit_rule_status_t* rules, std::size_t rules_capacity) {
  clear_decision(out);
  out->allowed = decision.allowed ? 1 : 0;
  out->status = static_cast<rlimit_status_t>(decision.status);
  out->retry_after_us = decision.retry_after_us();
  out->rule_count = decision.rules.size();
  copy_truncated(out->error, decision.error);
  const rlimit::RuleStatus* tightest = nullptr;
  for (const rlimit::RuleStatus& rule : decision.rules) {
    if (tightest == nullptr || rule.remaining < tightest->remaining) tightest = &rule;
  }
  if (tightest != nullptr) {
    out->remaining = tightest->remaining;
    out->limit = tightest->limit;
    out->period_ms = tightest->period_ms;
  }
  const std::size_t copied = std::min(rules_capacity, decision.rules.size());
  for (std::size_t i = 0; i < copied; ++i) {
    const rlimit::RuleStatus& rule = decision.rules[i];
    rlimit_rule_status_t& dst = rules[i];
    copy_truncated(dst.name, rule.name);
    dst.allowed = rule.allowed ? 1 : 0;
    dst.limit = rule.limit;
    dst.period_ms = rule.period_ms;
    dst.burst = rule.burst;
    dst.remaining = rule.remaining;
    dst.retry_after_us = rule.retry_after_us;
    dst.reset_after_us = rule.reset_after_us;
  }
}

// What a call asks beyond rlimit_check(): the mode, and where its extra
// answers go.
struct CallExtras {
  rlimit::CheckMode mode = rlimit::CheckMode::kCheck;
  std::int64_t max_wait_us = -1;
  bool acquire = false;  // sleep the delay
  std::int64_t* delay_us = nullptr;
  rlimit_leases_t** leases = nullptr;
};

int check_impl(rlimit_client_t* client, const rlimit_descriptor_t* descs, std::size_t n,
               std::uint64_t cost, rlimit_decision_t* out, rlimit_rule_status_t* rules,
               std::size_t rules_capacity, const CallExtras& extras = {}) {
  if (extras.delay_us != nullptr) *extras.delay_us = 0;
  if (extras.leases != nullptr) *extras.leases = nullptr;
  const auto invalid = [&](const char* why) {
    fill_failure(out, false, RLIMIT_STATUS_INVALID, why);
    return RLIMIT_ERR_INVALID_ARGUMENT;
  };
  if (client == nullptr) return invalid("client is NULL");
  if (out == nullptr) return RLIMIT_ERR_INVALID_ARGUMENT;
  if (descs == nullptr && n > 0) return invalid("descs is NULL");
  if (rules == nullptr && rules_capacity > 0) return invalid("rules is NULL");
  for (std::size_t i = 0; i < n; ++i) {
    if (descs[i].key == nullptr || descs[i].value == nullptr) {
      return invalid("descriptor key or value is NULL");
    }
  }
  const bool fail_open = client->client.options().fail_mode == rlimit::FailMode::kOpen;
  try {
    rlimit::CheckRequest& request = client->scratch;
    request.descriptors.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      request.descriptors[i].key.assign(descs[i].key);
      request.descriptors[i].value.assign(descs[i].value);
    }
    request.cost = cost;
    request.inline_limit.reset();
    request.mode = extras.mode;
    request.max_wait.reset();
    if (extras.max_wait_us >= 0) request.max_wait = std::chrono::microseconds(extras.max_wait_us);
    const rlimit::Decision decision = extras.acquire ? client->client.acquire(request)
                                                     : client->client.check(request);
    if (extras.leases != nullptr) {
      std::vector<std::string> tokens = decision.leases();
      if (!tokens.empty()) *extras.leases = new rlimit_leases{std::move(tokens)};
    }
    if (extras.delay_us != nullptr && decision.allowed) *extras.delay_us = decision.delay_us;
    fill_decision(decision, out, rules, rules_capacity);
    return RLIMIT_OK;
  } catch (const std::bad_alloc&) {
    fill_failure(out, fail_open, RLIMIT_STATUS_UNAVAILABLE, "out of memory");
    return RLIMIT_ERR_NO_MEMORY;
  } catch (...) {
    fill_failure(out, fail_open, RLIMIT_STATUS_UNAVAILABLE, "internal error");
    return RLIMIT_ERR_INTERNAL;
  }
}

int release_impl(rlimit_client_t* client, const rlimit_leases_t* leases, bool extend,
                 std::size_t* done) {
  if (done != nullptr) *done = 0;
  if (client == nullptr) return RLIMIT_ERR_INVALID_ARGUMENT;
  if (leases == nullptr || leases->tokens.empty()) return RLIMIT_OK;
  try {
    std::string error;
    const std::vector<rlimit::LeaseStatus> statuses =
        client->client.release_leases(leases->tokens, extend, &error);
    if (!error.empty()) return RLIMIT_ERR_DAEMON;
    if (done != nullptr) {
      *done = static_cast<std::size_t>(
          std::count(statuses.begin(), statuses.end(), rlimit::LeaseStatus::kDone));
    }
    return RLIMIT_OK;
  } catch (const std::bad_alloc&) {
    return RLIMIT_ERR_NO_MEMORY;
  } catch (...) {
    return RLIMIT_ERR_INTERNAL;
  }
}

void copy_error(char* dst, std::size_t bytes, std::string_view src) {
  if (dst == nullptr || bytes == 0) return;
  const std::size_t n = std::min(src.size(), bytes - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace

extern "C" {

void rlimit_options_init(rlimit_options_t* options) {
  if (options == nullptr) return;
  const rlimit::ClientOptions defaults;
  options->socket_path = nullptr;
  options->timeout_ms = defaults.timeout_ms;
  options->fail_mode =
      defaults.fail_mode == rlimit::FailMode::kOpen ? RLIMIT_FAIL_OPEN : RLIMIT_FAIL_CLOSED;
  options->reconnect_backoff_min_ms = defaults.reconnect_backoff_min_ms;
  options->reconnect_backoff_max_ms = defaults.reconnect_backoff_max_ms;
  options->max_frame_bytes = defaults.max_frame_bytes;
}

rlimit_client_t* rlimit_client_new(const rlimit_options_t* options) {
  try {
    rlimit::ClientOptions cpp;
    if (options != nullptr) {
      if (options->socket_path != nullptr) cpp.socket_path = options->socket_path;
      cpp.timeout_ms = options->timeout_ms;
      cpp.fail_mode = options->fail_mode == RLIMIT_FAIL_CLOSED ? rlimit::FailMode::kClosed
                                                               : rlimit::FailMode::kOpen;
      cpp.reconnect_backoff_min_ms = options->reconnect_backoff_min_ms;
      cpp.reconnect_backoff_max_ms = options->reconnect_backoff_max_ms;
      cpp.max_frame_bytes = options->max_frame_bytes;
    }
    return new rlimit_client(std::move(cpp));
  } catch (...) {
    return nullptr;
  }
}

void rlimit_client_free(rlimit_client_t* client) { delete client; }

int rlimit_check(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n, uint64_t cost,
                 rlimit_decision_t* out) {
  return check_impl(client, descs, n, cost, out, nullptr, 0);
}

int rlimit_check_detailed(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                          uint64_t cost, rlimit_decision_t* out, rlimit_rule_status_t* rules,
                          size_t rules_capacity) {
  return check_impl(client, descs, n, cost, out, rules, rules_capacity);
}

int rlimit_peek(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n, uint64_t cost,
                rlimit_decision_t* out) {
  return check_impl(client, descs, n, cost, out, nullptr, 0, {.mode = rlimit::CheckMode::kPeek});
}

int rlimit_check_leased(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                        uint64_t cost, rlimit_decision_t* out, rlimit_leases_t** leases) {
  return check_impl(client, descs, n, cost, out, nullptr, 0, {.leases = leases});
}

int rlimit_reserve(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                   uint64_t cost, int64_t max_wait_us, rlimit_decision_t* out, int64_t* delay_us,
                   rlimit_leases_t** leases) {
  return check_impl(client, descs, n, cost, out, nullptr, 0,
                    {.mode = rlimit::CheckMode::kReserve,
                     .max_wait_us = max_wait_us,
                     .delay_us = delay_us,
                     .leases = leases});
}

int rlimit_acquire(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                   uint64_t cost, int64_t max_wait_us, rlimit_decision_t* out, int64_t* delay_us,
                   rlimit_leases_t** leases) {
  return check_impl(client, descs, n, cost, out, nullptr, 0,
                    {.mode = rlimit::CheckMode::kReserve,
                     .max_wait_us = max_wait_us,
                     .acquire = true,
                     .delay_us = delay_us,
                     .leases = leases});
}

int rlimit_release(rlimit_client_t* client, const rlimit_leases_t* leases, size_t* released) {
  return release_impl(client, leases, /*extend=*/false, released);
}

int rlimit_extend(rlimit_client_t* client, const rlimit_leases_t* leases, size_t* extended) {
  return release_impl(client, leases, /*extend=*/true, extended);
}

size_t rlimit_leases_count(const rlimit_leases_t* leases) {
  return leases == nullptr ? 0 : leases->tokens.size();
}

void rlimit_leases_free(rlimit_leases_t* leases) { delete leases; }

int rlimit_reset(rlimit_client_t* client, const rlimit_descriptor_t* descs, size_t n,
                 uint64_t* keys_reset, char* error, size_t error_bytes) {
  if (keys_reset != nullptr) *keys_reset = 0;
  copy_error(error, error_bytes, "");
  const auto invalid = [&](const char* why) {
    copy_error(error, error_bytes, why);
    return RLIMIT_ERR_INVALID_ARGUMENT;
  };
  if (client == nullptr) return invalid("client is NULL");
  if (descs == nullptr && n > 0) return invalid("descs is NULL");
  for (std::size_t i = 0; i < n; ++i) {
    if (descs[i].key == nullptr || descs[i].value == nullptr) {
      return invalid("descriptor key or value is NULL");
    }
  }
  try {
    rlimit::CheckRequest request;
    request.descriptors.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      request.descriptors[i].key.assign(descs[i].key);
      request.descriptors[i].value.assign(descs[i].value);
    }
    std::string why;
    const std::optional<rlimit::ResetResult> result = client->client.reset(request, &why);
    if (!result) {
      copy_error(error, error_bytes, why);
      return RLIMIT_ERR_DAEMON;
    }
    if (keys_reset != nullptr) *keys_reset = result->keys_reset;
    return RLIMIT_OK;
  } catch (const std::bad_alloc&) {
    copy_error(error, error_bytes, "out of memory");
    return RLIMIT_ERR_NO_MEMORY;
  } catch (...) {
    copy_error(error, error_bytes, "internal error");
    return RLIMIT_ERR_INTERNAL;
  }
}

const char* rlimit_status_string(rlimit_status_t status) {
  switch (status) {
    case RLIMIT_STATUS_OK:
    case RLIMIT_STATUS_EXEMPT:
    case RLIMIT_STATUS_INVALID:
    case RLIMIT_STATUS_KEY_TABLE_FULL:
    case RLIMIT_STATUS_UNAVAILABLE:
    case RLIMIT_STATUS_PROTOCOL_ERROR:
      return rlimit::to_string(static_cast<rlimit::DecisionStatus>(status));
  }
  return "unknown";
}

}  // extern "C"

int rlimit_ratelimit_headers(const rlimit_rule_status_t* rules, size_t n, int allowed,
                             int64_t retry_after_us, char* policy, size_t policy_bytes,
                             char* ratelimit, size_t ratelimit_bytes, char* retry_after,
                             size_t retry_after_bytes) {
  if (rules == nullptr && n > 0) return RLIMIT_ERR_INVALID_ARGUMENT;
  if ((policy == nullptr && policy_bytes > 0) || (ratelimit == nullptr && ratelimit_bytes > 0) ||
      (retry_after == nullptr && retry_after_bytes > 0)) {
    return RLIMIT_ERR_INVALID_ARGUMENT;
  }
  try {
    std::vector<rlimit::RateLimitHeaderItem> items;
    items.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const rlimit_rule_status_t& rule = rules[i];
      items.push_back({.name = std::string_view(rule.name, strnlen(rule.name, RLIMIT_NAME_BYTES)),
                       .limit = rule.limit,
                       .period_ms = rule.period_ms,
                       .remaining = rule.remaining,
                       .reset_after_us = rule.reset_after_us});
    }
    const rlimit::RateLimitHeaders headers =
        rlimit::ratelimit_headers(items, allowed != 0, retry_after_us);
    int result = RLIMIT_OK;
    const auto put = [&result](char* out, std::size_t bytes, const std::string& text) {
      if (out == nullptr) return;
      if (text.size() >= bytes) {
        if (bytes > 0) out[0] = '\0';
        result = RLIMIT_ERR_TRUNCATED;
        return;
      }
      std::memcpy(out, text.c_str(), text.size() + 1);
    };
    put(policy, policy_bytes, headers.policy);
    put(ratelimit, ratelimit_bytes, headers.ratelimit);
    put(retry_after, retry_after_bytes, headers.retry_after);
    return result;
  } catch (const std::bad_alloc&) {
    return RLIMIT_ERR_NO_MEMORY;
  } catch (...) {
    return RLIMIT_ERR_INTERNAL;
  }
}
