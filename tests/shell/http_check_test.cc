// The HTTP check face's mapping (shell/http_check.h) with a real Dispatcher
// and Limiter in between: requests in, statuses, headers and JSON out.
#include "shell/http_check.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/limiter.h"
#include "rlimit/v1/client.pb.h"
#include "shell/dispatch.h"

namespace rlimit::shell {
namespace {

namespace json = boost::json;

constexpr core::TimeUs kNow = 1'000'000;
constexpr std::size_t kMaxDescriptors = 8;

constexpr const char* kRules = R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1m"

[[rule]]
name = "shadow-search"
match = { path = "/search" }
limit = 1
period = "1h"
mode = "shadow"
)";

config::Config load_rules() {
  config::LoadResult loaded = config::load_config(kRules, "test.toml");
  EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  return std::move(loaded.config);
}

std::string header(const HttpAnswer& answer, std::string_view name) {
  for (const auto& [key, value] : answer.headers) {
    if (key == name) return value;
  }
  return "";
}

class HttpCheckTest : public ::testing::Test {
 protected:
  HttpCheckTest()
      : limiter_(core::LimiterOptions{}, load_rules().rules),
        dispatcher_(limiter_, settings_, counters_, status_, lease_tokens_) {}

  // Maps, decides and answers one request as the server does.
  HttpAnswer ask(std::string_view method, std::string_view target, std::string_view body = "",
                 unsigned deny_status = 429, bool ietf = true) {
    const HttpRequestView http{
        .method = method,
        .target = target,
        .body = body,
        .header = [this](std::string_view name) -> std::optional<std::string_view> {
          for (const auto& [key, value] : headers_) {
            if (key == name) return value;
          }
          return std::nullopt;
        }};
    const HttpCheckMapping mapping = map_http_check(http, deny_status, kMaxDescriptors, request_);
    if (!mapping.ok) return mapping.error;
    dispatcher_.handle(request_, kNow, response_);
    return answer_http_check(response_, mapping.deny_status, ietf);
  }

  config::DaemonSettings settings_;
  ShellCounters counters_;
  StatusContext status_;
  core::Limiter limiter_;
  LeaseTokens lease_tokens_{"a lease secret for tests"};
  Dispatcher dispatcher_;
  v1::Request request_;
  v1::Response response_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

TEST_F(HttpCheckTest, AQueryCheckIsAllowedThenDeniedWithTheIetfFields) {
  HttpAnswer answer = ask("GET", "/v1/check?user=alice");
  EXPECT_EQ(answer.status, 200u);
  EXPECT_EQ(header(answer, "RateLimit-Policy"), R"("per-user";q=2;w=60)");
  EXPECT_EQ(header(answer, "RateLimit"), R"("per-user";r=1;t=30)");
  EXPECT_EQ(header(answer, "Retry-After"), "");
  const json::value body = json::parse(answer.body);
  EXPECT_TRUE(body.at("allowed").as_bool());
  EXPECT_EQ(body.at("rules").as_array().size(), 1u);
  EXPECT_EQ(body.at("rules").at(0).at("name").as_string(), "per-user");
  EXPECT_EQ(body.at("rules").at(0).at("remaining").to_number<std::uint64_t>(), 1u);

  EXPECT_EQ(ask("GET", "/v1/check?user=alice").status, 200u);
  answer = ask("GET", "/v1/check?user=alice");
  EXPECT_EQ(answer.status, 429u);
  EXPECT_EQ(header(answer, "Retry-After"), "30");
  EXPECT_FALSE(json::parse(answer.body).at("allowed").as_bool());
  // Another user is untouched.
  EXPECT_EQ(ask("GET", "/v1/check?user=bob").status, 200u);
}

TEST_F(HttpCheckTest, OptionsCostModeAndDenyStatus) {
  // A peek spends nothing.
  EXPECT_EQ(ask("GET", "/v1/check?user=carol&_mode=peek&_cost=2").status, 200u);
  EXPECT_EQ(ask("GET", "/v1/check?user=carol&_cost=2").status, 200u);
  // Denied, as 403 when asked (nginx auth_request), or by the default.
  EXPECT_EQ(ask("GET", "/v1/check?user=carol&_deny_status=403").status, 403u);
  EXPECT_EQ(ask("GET", "/v1/check?user=carol", "", 403).status, 403u);
  // The headers can be switched off.
  EXPECT_TRUE(ask("GET", "/v1/check?user=carol", "", 429, false).headers.empty());
}

TEST_F(HttpCheckTest, PercentEscapesAndPlusesAreDecoded) {
  ASSERT_EQ(ask("GET", "/v1/check?user=a%20b+c&path=%2Fsearch").status, 200u);
  const v1::Check& check = request_.check().checks(0);
  ASSERT_EQ(check.descriptors_size(), 2);
  EXPECT_EQ(check.descriptors(0).value(), "a b c");
  EXPECT_EQ(check.descriptors(1).value(), "/search");
}

TEST_F(HttpCheckTest, AJsonBodyChecksTheSame) {
  HttpAnswer answer = ask("POST", "/v1/check", R"({"descriptors": {"user": "dave"}, "cost": 2})");
  EXPECT_EQ(answer.status, 200u);
  answer = ask("POST", "/v1/check",
               R"({"descriptors": [{"key": "user", "value": "dave"}], "deny_status": 403})");
  EXPECT_EQ(answer.status, 403u);
  EXPECT_EQ(header(answer, "Retry-After"), "30");
}

TEST_F(HttpCheckTest, ShadowModeAdmitsAndSaysSo) {
  EXPECT_EQ(ask("GET", "/v1/check?path=/search").status, 200u);
  const HttpAnswer answer = ask("GET", "/v1/check?path=/search");
  EXPECT_EQ(answer.status, 200u);
  const json::value body = json::parse(answer.body);
  EXPECT_TRUE(body.at("allowed").as_bool());
  EXPECT_TRUE(body.at("over_limit").as_bool());
  EXPECT_EQ(header(answer, "Retry-After"), "");
}

TEST_F(HttpCheckTest, BadRequestsSayWhatIsWrong) {
  const auto error_of = [](const HttpAnswer& answer) {
    return std::string(json::parse(answer.body).at("error").as_string());
  };
  HttpAnswer answer = ask("GET", "/v1/check?user=%zz");
  EXPECT_EQ(answer.status, 400u);
  EXPECT_NE(error_of(answer).find("percent-escape"), std::string::npos);
  answer = ask("GET", "/v1/check?user=%4");
  EXPECT_EQ(answer.status, 400u);
  answer = ask("GET", "/v1/check?user=a&_cost=x");
  EXPECT_NE(error_of(answer).find("cost \"x\""), std::string::npos);
  answer = ask("GET", "/v1/check?user=a&_speed=1");
  EXPECT_NE(error_of(answer).find("unknown option \"_speed\""), std::string::npos);
  answer = ask("GET", "/v1/check?user=a&_deny_status=500");
  EXPECT_EQ(answer.status, 400u);
  answer = ask("GET", "/v1/check?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9");
  EXPECT_NE(error_of(answer).find("more than 8 descriptors"), std::string::npos);
  // The daemon's own validation: a key twice.
  answer = ask("GET", "/v1/check?user=a&user=b");
  EXPECT_EQ(answer.status, 400u);
  EXPECT_NE(error_of(answer).find("twice"), std::string::npos);

  answer = ask("POST", "/v1/check", "{not json");
  EXPECT_EQ(answer.status, 400u);
  EXPECT_NE(error_of(answer).find("not JSON"), std::string::npos);
  answer = ask("POST", "/v1/check", R"({"descriptors": {"user": 5}})");
  EXPECT_NE(error_of(answer).find("must be a string"), std::string::npos);
  answer = ask("POST", "/v1/check", R"({"descriptors": {"user": "x"}, "colour": 1})");
  EXPECT_NE(error_of(answer).find("unknown field \"colour\""), std::string::npos);
  answer = ask("POST", "/v1/check", "[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]");
  EXPECT_EQ(answer.status, 400u);
  answer = ask("POST", "/v1/check?user=a", R"({"descriptors": {}})");
  EXPECT_EQ(answer.status, 400u);
  answer = ask("DELETE", "/v1/check");
  EXPECT_EQ(answer.status, 405u);
  EXPECT_EQ(header(answer, "Allow"), "GET, POST");
  // None of it was charged: alice's user still has her whole limit.
  EXPECT_EQ(ask("GET", "/v1/check?user=a").status, 200u);
  EXPECT_EQ(ask("GET", "/v1/check?user=a").status, 200u);
}

TEST_F(HttpCheckTest, DescriptorsFromHeadersAsProxiesSendThem) {
  headers_ = {{"X-Forwarded-For", "10.0.0.7"}, {"X-User", "erin"}};
  ASSERT_EQ(ask("GET", "/v1/check?route=api&_header.ip=X-Forwarded-For&_header.user=X-User").status,
            200u);
  const v1::Check& check = request_.check().checks(0);
  ASSERT_EQ(check.descriptors_size(), 3);
  EXPECT_EQ(check.descriptors(1).key(), "ip");
  EXPECT_EQ(check.descriptors(1).value(), "10.0.0.7");
  EXPECT_EQ(check.descriptors(2).value(), "erin");
  // The per-user rule counts erin's requests.
  EXPECT_EQ(ask("GET", "/v1/check?_header.user=X-User").status, 200u);
  EXPECT_EQ(ask("GET", "/v1/check?_header.user=X-User").status, 429u);
  // A header the request lacks is an error, not an unlimited request.
  const HttpAnswer answer = ask("GET", "/v1/check?_header.user=X-Missing");
  EXPECT_EQ(answer.status, 400u);
  EXPECT_NE(answer.body.find("X-Missing"), std::string::npos);
  EXPECT_EQ(ask("GET", "/v1/check?_header.=X-User").status, 400u);
  // An optional header that is absent leaves its descriptor out.
  ASSERT_EQ(ask("GET", "/v1/check?route=api&_optional_header.user=X-Missing").status, 200u);
  ASSERT_EQ(request_.check().checks(0).descriptors_size(), 1);
  ASSERT_EQ(ask("GET", "/v1/check?route=api&_optional_header.user=X-User").status, 429u);
}

TEST(PercentDecodeTest, DecodesAndRefusesBadEscapes) {
  std::string out;
  EXPECT_TRUE(percent_decode("a%2Fb%2fc+d", out));
  EXPECT_EQ(out, "a/b/c d");
  EXPECT_FALSE(percent_decode("%", out));
  EXPECT_FALSE(percent_decode("%a", out));
  EXPECT_FALSE(percent_decode("%g0", out));
  EXPECT_TRUE(percent_decode("", out));
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace rlimit::shell
