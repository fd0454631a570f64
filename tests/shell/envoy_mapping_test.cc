// Envoy's rate-limit API mapped to and from the socket protocol
// (shell/envoy_mapping.h): requests in, rlimit.v1 messages out, and a real
// Dispatcher over a real Limiter in between for the answers.
#include "shell/envoy_mapping.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "core/limiter.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rlimit/v1/client.pb.h"
#include "shell/dispatch.h"

namespace rlimit::shell {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using RateLimit = rls::RateLimitResponse_RateLimit;

constexpr core::TimeUs kNow = 1'000'000'000;

rls::RateLimitRequest request(const std::string& domain) {
  rls::RateLimitRequest r;
  r.set_domain(domain);
  return r;
}

envoy::extensions::common::ratelimit::v3::RateLimitDescriptor* add_descriptor(
    rls::RateLimitRequest& r, std::initializer_list<std::pair<std::string, std::string>> entries) {
  auto* d = r.add_descriptors();
  for (const auto& [key, value] : entries) {
    auto* e = d->add_entries();
    e->set_key(key);
    e->set_value(value);
  }
  return d;
}

EnvoyOutcome to_request(const rls::RateLimitRequest& in, v1::Request& out,
                        EnvoyRequestLimits limits = {}) {
  return envoy_to_request(in, limits, out);
}

TEST(EnvoyToRequest, DomainFirstThenEntriesOneCheckPerDescriptor) {
  rls::RateLimitRequest in = request("edge");
  add_descriptor(in, {{"remote_address", "10.0.0.1"}});
  add_descriptor(in, {{"path", "/a"}, {"method", "GET"}});
  v1::Request out;
  ASSERT_EQ(to_request(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.version(), v1::VERSION_1);
  ASSERT_TRUE(out.has_check());
  ASSERT_EQ(out.check().checks_size(), 2);
  const v1::Check& second = out.check().checks(1);
  ASSERT_EQ(second.descriptors_size(), 3);
  EXPECT_EQ(second.descriptors(0).key(), "domain");
  EXPECT_EQ(second.descriptors(0).value(), "edge");
  EXPECT_EQ(second.descriptors(1).key(), "path");
  EXPECT_EQ(second.descriptors(2).value(), "GET");
  EXPECT_EQ(second.cost(), 1u);
  EXPECT_FALSE(second.has_inline_limit());
}

TEST(EnvoyToRequest, CostFromDescriptorElseRequestZeroMeaningOne) {
  rls::RateLimitRequest in = request("d");
  add_descriptor(in, {{"a", "1"}});
  add_descriptor(in, {{"a", "1"}})->mutable_hits_addend()->set_value(7);
  add_descriptor(in, {{"a", "1"}})->mutable_hits_addend()->set_value(0);
  v1::Request out;
  ASSERT_EQ(to_request(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.check().checks(0).cost(), 1u);
  EXPECT_EQ(out.check().checks(1).cost(), 7u);
  EXPECT_EQ(out.check().checks(2).cost(), 1u);
  in.set_hits_addend(3);
  ASSERT_EQ(to_request(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.check().checks(0).cost(), 3u);
  EXPECT_EQ(out.check().checks(1).cost(), 7u);
  EXPECT_EQ(out.check().checks(2).cost(), 1u);
  in.mutable_descriptors(1)->mutable_hits_addend()->set_value((std::uint64_t{1} << 50) + 1);
  const EnvoyOutcome too_big = to_request(in, out);
  EXPECT_EQ(too_big.status, EnvoyStatus::kInvalidArgument);
  EXPECT_NE(too_big.message.find("descriptor 1"), std::string::npos) << too_big.message;
}

TEST(EnvoyToRequest, OverrideBecomesInlineLimitWhenAllowed) {
  rls::RateLimitRequest in = request("ed/ge");
  auto* d = add_descriptor(in, {{"k=", "v%"}, {"user", "x"}});
  d->mutable_limit()->set_requests_per_unit(42);
  d->mutable_limit()->set_unit(envoy::type::v3::WEEK);
  v1::Request out;
  ASSERT_EQ(to_request(in, out).status, EnvoyStatus::kOk);
  const v1::InlineLimit& limit = out.check().checks(0).inline_limit();
  EXPECT_EQ(limit.key(), "envoy:ed%2Fge/k%3D=v%25/user=x");
  EXPECT_EQ(limit.limit(), 42u);
  EXPECT_EQ(limit.period_ms(), 7u * 86'400'000u);
  EXPECT_EQ(limit.burst(), 0u);

  const std::pair<envoy::type::v3::RateLimitUnit, std::uint64_t> units[] = {
      {envoy::type::v3::SECOND, 1000},         {envoy::type::v3::MINUTE, 60'000},
      {envoy::type::v3::HOUR, 3'600'000},      {envoy::type::v3::DAY, 86'400'000},
      {envoy::type::v3::MONTH, 2'592'000'000}, {envoy::type::v3::YEAR, 31'536'000'000}};
  for (const auto& [unit, ms] : units) {
    d->mutable_limit()->set_unit(unit);
    ASSERT_EQ(to_request(in, out).status, EnvoyStatus::kOk);
    EXPECT_EQ(out.check().checks(0).inline_limit().period_ms(), ms) << unit;
  }

  d->mutable_limit()->set_unit(envoy::type::v3::UNKNOWN);
  EXPECT_EQ(to_request(in, out).status, EnvoyStatus::kInvalidArgument);

  // Inline limits off: the override is ignored, the rules decide.
  ASSERT_EQ(to_request(in, out, {.allow_inline_limits = false}).status, EnvoyStatus::kOk);
  EXPECT_FALSE(out.check().checks(0).has_inline_limit());
}

TEST(EnvoyToRequest, BadRequestsSayWhatAndWhere) {
  v1::Request out;
  {
    rls::RateLimitRequest in = request("");
    add_descriptor(in, {{"a", "1"}});
    const EnvoyOutcome o = to_request(in, out);
    EXPECT_EQ(o.status, EnvoyStatus::kInvalidArgument);
    EXPECT_NE(o.message.find("domain"), std::string::npos);
  }
  {
    rls::RateLimitRequest in = request("d");
    EXPECT_EQ(to_request(in, out).status, EnvoyStatus::kInvalidArgument);
  }
  struct Case {
    std::initializer_list<std::pair<std::string, std::string>> entries;
    std::string says;
  };
  const Case cases[] = {
      {{}, "no entries"},
      {{{"", "v"}}, "empty key"},
      {{{"a", "1"}, {"b", "2"}, {"a", "3"}}, "\"a\" appears twice"},
      {{{"domain", "x"}}, "\"domain\""},
  };
  for (const Case& c : cases) {
    rls::RateLimitRequest in = request("d");
    add_descriptor(in, {{"ok", "1"}});
    add_descriptor(in, c.entries);
    const EnvoyOutcome o = to_request(in, out);
    EXPECT_EQ(o.status, EnvoyStatus::kInvalidArgument) << c.says;
    EXPECT_NE(o.message.find("descriptor 1: "), std::string::npos) << o.message;
    EXPECT_NE(o.message.find(c.says), std::string::npos) << o.message;
  }
  // max_descriptors_per_check counts the domain.
  rls::RateLimitRequest in = request("d");
  add_descriptor(in, {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(to_request(in, out, {.max_descriptors_per_check = 3}).status, EnvoyStatus::kOk);
  EXPECT_EQ(to_request(in, out, {.max_descriptors_per_check = 2}).status,
            EnvoyStatus::kInvalidArgument);
}

TEST(RateLimitFor, ExactUnitsMultiplesAndTheRest) {
  struct Case {
    std::uint64_t limit, period_ms;
    std::uint32_t per_unit;
    RateLimit::Unit unit;
  };
  const Case cases[] = {
      {100, 1000, 100, RateLimit::SECOND},
      {100, 60'000, 100, RateLimit::MINUTE},
      {5, 3'600'000, 5, RateLimit::HOUR},
      {7, 86'400'000, 7, RateLimit::DAY},
      {3, 7 * 86'400'000ULL, 3, RateLimit::WEEK},
      {3, 30 * 86'400'000ULL, 3, RateLimit::MONTH},
      {3, 365 * 86'400'000ULL, 3, RateLimit::YEAR},
      {10, 250, 40, RateLimit::SECOND},  // a whole rate per second
      {100, 2000, 50, RateLimit::SECOND},
      {1, 1500, 40, RateLimit::MINUTE},  // per second 0.67; per minute 40
      {100, 7'200'000, 50, RateLimit::HOUR},
      {1, 3 * 86'400'000ULL, 10, RateLimit::MONTH},   // 1 per 3 days: 10 per 30 days
      {7, 11 * 86'400'000ULL, 232, RateLimit::YEAR},  // none exact: per year, rounded down
      {9, 0, 9, RateLimit::UNKNOWN},                  // concurrency: no period
  };
  for (const Case& c : cases) {
    RateLimit out;
    rate_limit_for(c.limit, c.period_ms, out);
    EXPECT_EQ(out.requests_per_unit(), c.per_unit) << c.limit << "/" << c.period_ms;
    EXPECT_EQ(out.unit(), c.unit) << c.limit << "/" << c.period_ms;
  }
  // A limit above 32 bits per second: still a whole rate in no unit that fits.
  RateLimit out;
  rate_limit_for(std::uint64_t{1} << 40, 1000, out);
  EXPECT_EQ(out.requests_per_unit(), 0xFFFFFFFFu);
  EXPECT_EQ(out.unit(), RateLimit::SECOND);
}

// A real Dispatcher over a real Limiter, from a TOML config.
class EnvoyAnswerTest : public ::testing::Test {
 protected:
  static config::Config load(const char* text) {
    config::LoadResult loaded = config::load_config(text, "test.toml");
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
    return std::move(loaded.config);
  }

  EnvoyAnswerTest()
      : config_(load(R"(
[[rule]]
name = "per-ip"
match = { domain = "edge", ip = { each = true } }
limit = 3
period = "1m"

[[rule]]
name = "per-ip-hourly"
match = { domain = "edge", ip = { each = true } }
limit = 10
period = "1h"

[[rule]]
name = "watch"
match = { domain = "edge", path = { each = true } }
limit = 1
period = "1s"
mode = "shadow"
)")),
        limiter_(core::LimiterOptions{}, std::move(config_.rules)),
        dispatcher_(limiter_, config_.daemon, counters_, status_, lease_tokens_) {}

  // Maps, dispatches and maps back.
  EnvoyOutcome ask(const rls::RateLimitRequest& in, rls::RateLimitResponse& out,
                   bool ietf_headers = true) {
    v1::Request request;
    EnvoyOutcome mapped = envoy_to_request(in, {}, request);
    if (mapped.status != EnvoyStatus::kOk) return mapped;
    v1::Response response;
    dispatcher_.handle(request, kNow, response);
    return envoy_from_response(response, static_cast<std::size_t>(in.descriptors_size()),
                               ietf_headers, out);
  }

  static std::string header(const rls::RateLimitResponse& r, const std::string& key) {
    for (const auto& h : r.response_headers_to_add()) {
      if (h.key() == key) return h.value();
    }
    return "<none>";
  }

  config::Config config_;
  ShellCounters counters_;
  StatusContext status_;
  LeaseTokens lease_tokens_ = LeaseTokens::with_random_secret();
  core::Limiter limiter_;
  Dispatcher dispatcher_;
};

TEST_F(EnvoyAnswerTest, OkThenOverLimitWithTheDecidingRule) {
  rls::RateLimitRequest in = request("edge");
  add_descriptor(in, {{"ip", "10.0.0.1"}});
  rls::RateLimitResponse out;
  for (std::uint32_t left : {2u, 1u, 0u}) {
    ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
    EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OK);
    ASSERT_EQ(out.statuses_size(), 1);
    const auto& s = out.statuses(0);
    EXPECT_EQ(s.code(), rls::RateLimitResponse::OK);
    // Allowed: the rule with the least remaining.
    EXPECT_EQ(s.current_limit().name(), "per-ip");
    EXPECT_EQ(s.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(s.current_limit().unit(), RateLimit::MINUTE);
    EXPECT_EQ(s.limit_remaining(), left);
    EXPECT_GT(
        s.duration_until_reset().seconds() * 1'000'000'000LL + s.duration_until_reset().nanos(), 0);
    EXPECT_EQ(header(out, "Retry-After"), "<none>");
  }
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(out.statuses(0).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(out.statuses(0).current_limit().name(), "per-ip");
  EXPECT_EQ(out.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(header(out, "RateLimit-Policy"), "\"per-ip\";q=3;w=60, \"per-ip-hourly\";q=10;w=3600");
  EXPECT_NE(header(out, "RateLimit").find("\"per-ip\";r=0;t="), std::string::npos);
  EXPECT_EQ(header(out, "Retry-After"), "20");
  // Without IETF headers: none.
  ASSERT_EQ(ask(in, out, false).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.response_headers_to_add_size(), 0);
}

TEST_F(EnvoyAnswerTest, UnmatchedDescriptorIsOkWithoutLimitAndAnyOverLimitIsOverall) {
  rls::RateLimitRequest in = request("edge");
  add_descriptor(in, {{"ip", "10.0.0.2"}});
  add_descriptor(in, {{"nothing", "matches"}});
  in.set_hits_addend(3);
  rls::RateLimitResponse out;
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(out.statuses(1).code(), rls::RateLimitResponse::OK);
  EXPECT_FALSE(out.statuses(1).has_current_limit());
  EXPECT_FALSE(out.statuses(1).has_duration_until_reset());
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.statuses(0).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(out.statuses(1).code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
}

TEST_F(EnvoyAnswerTest, ShadowRuleAnswersOkAndSaysSo) {
  rls::RateLimitRequest in = request("edge");
  add_descriptor(in, {{"path", "/x"}});
  rls::RateLimitResponse out;
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(header(out, "x-rlimit-over-limit"), "<none>");
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(out.statuses(0).code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(out.statuses(0).current_limit().name(), "watch");
  EXPECT_EQ(header(out, "x-rlimit-over-limit"), "watch");
}

TEST_F(EnvoyAnswerTest, InlineOverrideDecidesAndNamesItsKey) {
  rls::RateLimitRequest in = request("api");
  auto* d = add_descriptor(in, {{"tenant", "t1"}});
  d->mutable_limit()->set_requests_per_unit(2);
  d->mutable_limit()->set_unit(envoy::type::v3::HOUR);
  rls::RateLimitResponse out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
    EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OK);
  }
  ASSERT_EQ(ask(in, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(out.statuses(0).current_limit().name(), "envoy:api/tenant=t1");
  EXPECT_EQ(out.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(out.statuses(0).current_limit().unit(), RateLimit::HOUR);
}

TEST(EnvoyFromResponse, InvalidResultsErrorsAndMismatches) {
  rls::RateLimitResponse out;
  v1::Response response;
  auto* check = response.mutable_check();
  check->add_results()->set_allowed(true);
  auto* bad = check->add_results();
  bad->set_status(v1::CheckResult::INVALID);
  bad->set_error("cost 9 is too big");
  EnvoyOutcome o = envoy_from_response(response, 2, true, out);
  EXPECT_EQ(o.status, EnvoyStatus::kInvalidArgument);
  EXPECT_EQ(o.message, "descriptor 1: cost 9 is too big");
  EXPECT_EQ(envoy_from_response(response, 3, true, out).status, EnvoyStatus::kInternal);

  v1::Response error;
  error.mutable_error()->set_code(v1::Error::TOO_MANY_CHECKS);
  error.mutable_error()->set_message("2000 checks; at most 1024");
  o = envoy_from_response(error, 2000, true, out);
  EXPECT_EQ(o.status, EnvoyStatus::kResourceExhausted);
  EXPECT_EQ(o.message, "2000 checks; at most 1024");
  error.mutable_error()->set_code(v1::Error::SHUTTING_DOWN);
  EXPECT_EQ(envoy_from_response(error, 1, true, out).status, EnvoyStatus::kUnavailable);
  error.mutable_error()->set_code(v1::Error::UNSUPPORTED_VERSION);
  EXPECT_EQ(envoy_from_response(error, 1, true, out).status, EnvoyStatus::kInvalidArgument);
}

TEST(EnvoyFromResponse, RefusedPicksLongestRetryAndNeverBeatsAll) {
  v1::Response response;
  auto* result = response.mutable_check()->add_results();
  result->set_allowed(false);
  auto add = [&](const char* name, bool allowed, std::int64_t retry, std::uint64_t remaining) {
    auto* r = result->add_rules();
    r->set_name(name);
    r->set_allowed(allowed);
    r->set_retry_after_us(retry);
    r->set_remaining(remaining);
    r->set_limit(10);
    r->set_period_ms(1000);
    r->set_reset_after_us(1'500'000);
  };
  add("fine", true, 0, 0);
  add("short", false, 1'000, 0);
  add("long", false, 9'000'000, 0);
  rls::RateLimitResponse out;
  ASSERT_EQ(envoy_from_response(response, 1, false, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.statuses(0).current_limit().name(), "long");
  EXPECT_EQ(out.statuses(0).duration_until_reset().seconds(), 1);
  EXPECT_EQ(out.statuses(0).duration_until_reset().nanos(), 500'000'000);
  add("never", false, -1, 0);
  add("later", false, 99'000'000, 0);
  ASSERT_EQ(envoy_from_response(response, 1, false, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.statuses(0).current_limit().name(), "never");
  // remaining above 32 bits is clamped.
  result->Clear();
  result->set_allowed(true);
  add("big", true, 0, std::uint64_t{1} << 40);
  ASSERT_EQ(envoy_from_response(response, 1, false, out).status, EnvoyStatus::kOk);
  EXPECT_EQ(out.statuses(0).limit_remaining(), 0xFFFFFFFFu);
}

}  // namespace
}  // namespace rlimit::shell
