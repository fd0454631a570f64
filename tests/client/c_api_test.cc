// The C ABI (rlimit/rlimit.h) against the fake daemon.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "fake_server.h"
#include "rlimit/rlimit.h"

namespace rlimit {
namespace {

using testing::FakeServer;
using Action = FakeServer::Action;

// Two rules: "wide" allows with 50 left of 100/s; "narrow" (a 200-byte name)
// denies with 2 left of 5/min and retry 3 ms.
Action two_rules(const v1::Request&, v1::Response& response) {
  v1::CheckResult* result = response.mutable_check()->add_results();
  result->set_allowed(false);
  v1::RuleResult* wide = result->add_rules();
  wide->set_name("wide");
  wide->set_allowed(true);
  wide->set_limit(100);
  wide->set_period_ms(1000);
  wide->set_burst(100);
  wide->set_remaining(50);
  v1::RuleResult* narrow = result->add_rules();
  narrow->set_name(std::string(200, 'n'));
  narrow->set_allowed(false);
  narrow->set_limit(5);
  narrow->set_period_ms(60'000);
  narrow->set_burst(5);
  narrow->set_remaining(2);
  narrow->set_retry_after_us(3000);
  narrow->set_reset_after_us(40'000'000);
  return Action::kReply;
}

struct ClientDeleter {
  void operator()(rlimit_client_t* c) const { rlimit_client_free(c); }
};
using ClientPtr = std::unique_ptr<rlimit_client_t, ClientDeleter>;

ClientPtr make_client(const std::string& path, rlimit_fail_mode_t mode = RLIMIT_FAIL_OPEN) {
  rlimit_options_t options;
  rlimit_options_init(&options);
  options.socket_path = path.c_str();
  options.timeout_ms = 1000;
  options.fail_mode = mode;
  return ClientPtr(rlimit_client_new(&options));
}

const rlimit_descriptor_t kDescs[] = {{"user", "alice"}, {"path", "/api/items"}};

TEST(CApiTest, OptionsInitFillsDefaults) {
  rlimit_options_t options;
  std::memset(&options, 0xff, sizeof(options));
  rlimit_options_init(&options);
  EXPECT_EQ(options.socket_path, nullptr);
  EXPECT_EQ(options.timeout_ms, 5u);
  EXPECT_EQ(options.fail_mode, RLIMIT_FAIL_OPEN);
  EXPECT_EQ(options.reconnect_backoff_min_ms, 10u);
  EXPECT_EQ(options.reconnect_backoff_max_ms, 1000u);
  EXPECT_EQ(options.max_frame_bytes, 65536u);
}

TEST(CApiTest, CheckSummarizesRules) {
  FakeServer server(two_rules);
  ClientPtr client = make_client(server.socket_path());
  ASSERT_NE(client, nullptr);
  rlimit_decision_t d;
  ASSERT_EQ(rlimit_check(client.get(), kDescs, 2, 1, &d), RLIMIT_OK);
  EXPECT_EQ(d.allowed, 0);
  EXPECT_EQ(d.status, RLIMIT_STATUS_OK);
  EXPECT_EQ(d.retry_after_us, 3000);
  EXPECT_EQ(d.remaining, 2u);  // the least
  EXPECT_EQ(d.limit, 5u);      // of the tightest rule
  EXPECT_EQ(d.period_ms, 60'000u);
  EXPECT_EQ(d.rule_count, 2u);
  EXPECT_STREQ(d.error, "");

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const v1::Check& check = requests[0].check().checks(0);
  ASSERT_EQ(check.descriptors_size(), 2);
  EXPECT_EQ(check.descriptors(1).key(), "path");
  EXPECT_EQ(check.descriptors(1).value(), "/api/items");
}

TEST(CApiTest, DetailedCopiesUpToCapacityAndTruncatesNames) {
  FakeServer server(two_rules);
  ClientPtr client = make_client(server.socket_path());
  rlimit_decision_t d;
  rlimit_rule_status_t rules[2];
  std::memset(rules, 0x7f, sizeof(rules));
  ASSERT_EQ(rlimit_check_detailed(client.get(), kDescs, 2, 1, &d, rules, 1), RLIMIT_OK);
  EXPECT_EQ(d.rule_count, 2u);
  EXPECT_STREQ(rules[0].name, "wide");
  EXPECT_EQ(rules[0].allowed, 1);
  EXPECT_EQ(rules[0].remaining, 50u);
  EXPECT_EQ(rules[1].name[0], 0x7f);  // beyond the capacity: untouched

  ASSERT_EQ(rlimit_check_detailed(client.get(), kDescs, 2, 1, &d, rules, 2), RLIMIT_OK);
  EXPECT_EQ(std::strlen(rules[1].name), RLIMIT_NAME_BYTES - 1u);
  EXPECT_EQ(rules[1].name[0], 'n');
  EXPECT_EQ(rules[1].allowed, 0);
  EXPECT_EQ(rules[1].limit, 5u);
  EXPECT_EQ(rules[1].period_ms, 60'000u);
  EXPECT_EQ(rules[1].burst, 5u);
  EXPECT_EQ(rules[1].retry_after_us, 3000);
  EXPECT_EQ(rules[1].reset_after_us, 40'000'000);
}

TEST(CApiTest, NoRulesMeansUnlimitedRemaining) {
  FakeServer server;
  ClientPtr client = make_client(server.socket_path());
  rlimit_decision_t d;
  ASSERT_EQ(rlimit_check(client.get(), nullptr, 0, 0, &d), RLIMIT_OK);
  EXPECT_EQ(d.allowed, 1);
  EXPECT_EQ(d.rule_count, 0u);
  EXPECT_EQ(d.remaining, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(d.limit, 0u);
  EXPECT_EQ(server.requests().at(0).check().checks(0).cost(), 0u);
}

TEST(CApiTest, UnavailableFollowsFailMode) {
  FakeServer server;
  for (auto mode : {RLIMIT_FAIL_OPEN, RLIMIT_FAIL_CLOSED}) {
    ClientPtr client = make_client(server.missing_socket_path(), mode);
    rlimit_decision_t d;
    ASSERT_EQ(rlimit_check(client.get(), kDescs, 2, 1, &d), RLIMIT_OK);
    EXPECT_EQ(d.allowed, mode == RLIMIT_FAIL_OPEN ? 1 : 0);
    EXPECT_EQ(d.status, RLIMIT_STATUS_UNAVAILABLE);
    EXPECT_NE(std::strlen(d.error), 0u);
  }
}

TEST(CApiTest, NullOptionsGiveDefaults) {
  ClientPtr client(rlimit_client_new(nullptr));
  EXPECT_NE(client, nullptr);
  rlimit_client_free(nullptr);  // a no-op
}

TEST(CApiTest, InvalidArgumentsAreReportedNotCrashed) {
  FakeServer server;
  ClientPtr client = make_client(server.socket_path());
  rlimit_decision_t d;
  EXPECT_EQ(rlimit_check(nullptr, kDescs, 2, 1, &d), RLIMIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(d.allowed, 0);
  EXPECT_EQ(d.status, RLIMIT_STATUS_INVALID);
  EXPECT_EQ(rlimit_check(client.get(), kDescs, 2, 1, nullptr), RLIMIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlimit_check(client.get(), nullptr, 1, 1, &d), RLIMIT_ERR_INVALID_ARGUMENT);
  const rlimit_descriptor_t bad[] = {{"user", nullptr}};
  EXPECT_EQ(rlimit_check(client.get(), bad, 1, 1, &d), RLIMIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlimit_check_detailed(client.get(), kDescs, 2, 1, &d, nullptr, 3),
            RLIMIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(server.frames(), 0u);
}

TEST(CApiTest, StatusStrings) {
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_OK), "ok");
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_EXEMPT), "exempt");
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_INVALID), "invalid");
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_KEY_TABLE_FULL), "key_table_full");
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_UNAVAILABLE), "unavailable");
  EXPECT_STREQ(rlimit_status_string(RLIMIT_STATUS_PROTOCOL_ERROR), "protocol_error");
  EXPECT_STREQ(rlimit_status_string(static_cast<rlimit_status_t>(42)), "unknown");
}

}  // namespace
}  // namespace rlimit
