#include "shell/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "config/config.h"
#include "core/cluster_node.h"
#include "core/limiter.h"
#include "core/time.h"
#include "rlimit/v1/client.pb.h"
#include "rlimit/v1/peer.pb.h"
#include "wire/frame.h"

namespace rlimit::shell {
namespace {

constexpr core::TimeUs kNow = 1'000'000;

core::RuleSet per_user_rules(std::int64_t limit, std::int64_t burst) {
  core::Rule rule;
  rule.name = "per-user";
  core::DescriptorMatch match;
  match.key = "user";
  match.value.each = true;
  rule.match.push_back(std::move(match));
  rule.params = {limit, core::kUsPerSecond * 3600, burst};
  core::RuleSet rules;
  rules.rules.push_back(std::move(rule));
  return rules;
}

class DispatchTest : public ::testing::Test {
 protected:
  DispatchTest()
      : limiter_(core::LimiterOptions{}, per_user_rules(5, 5)),
        dispatcher_(limiter_, settings_, counters_, status_, lease_tokens_) {
    status_.node_id = "node-a";
    status_.config_source = "test.toml";
    status_.started_us = 0;
  }

  static v1::Request check_request(std::uint64_t id) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(id);
    request.mutable_check();
    return request;
  }

  static v1::Check* add_check(v1::Request& request, const std::string& user) {
    v1::Check* check = request.mutable_check()->add_checks();
    v1::Descriptor* d = check->add_descriptors();
    d->set_key("user");
    d->set_value(user);
    return check;
  }

  Dispatcher::Outcome handle(const v1::Request& request) {
    return dispatcher_.handle(request, kNow, response_);
  }

  config::DaemonSettings settings_;
  ShellCounters counters_;
  StatusContext status_;
  core::Limiter limiter_;
  LeaseTokens lease_tokens_{"a lease secret for tests"};
  Dispatcher dispatcher_;
  v1::Response response_;
};

TEST_F(DispatchTest, VersionMismatchIsAnErrorThatKeepsTheConnection) {
  v1::Request request = check_request(41);
  add_check(request, "alice");
  request.set_version(static_cast<v1::Version>(7));
  const Dispatcher::Outcome outcome = handle(request);
  EXPECT_TRUE(outcome.error);
  EXPECT_FALSE(outcome.close);
  EXPECT_EQ(response_.id(), 41u);
  ASSERT_TRUE(response_.has_error());
  EXPECT_EQ(response_.error().code(), v1::Error::UNSUPPORTED_VERSION);
  EXPECT_NE(response_.error().message().find('7'), std::string::npos);
  EXPECT_EQ(counters_.unsupported_version, 1u);
  EXPECT_EQ(limiter_.stats().checks, 0u);  // nothing was decided

  // Unset (0) is not a version either.
  request.clear_version();
  EXPECT_FALSE(handle(request).close);
  EXPECT_EQ(response_.error().code(), v1::Error::UNSUPPORTED_VERSION);
}

TEST_F(DispatchTest, RequestWithoutBodyIsUnknownAndCloses) {
  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.set_id(9);
  const Dispatcher::Outcome outcome = handle(request);
  EXPECT_TRUE(outcome.error);
  EXPECT_TRUE(outcome.close);
  EXPECT_EQ(response_.id(), 9u);
  EXPECT_EQ(response_.error().code(), v1::Error::UNKNOWN_MESSAGE_TYPE);
  EXPECT_EQ(counters_.unknown_message_types, 1u);
}

TEST_F(DispatchTest, UndecodablePayloadIsMalformedAndCloses) {
  v1::Request request;
  const std::string garbage = "\x0a\x7fnot protobuf";
  const Dispatcher::Outcome outcome = dispatcher_.handle_frame(garbage, kNow, request, response_);
  EXPECT_TRUE(outcome.close);
  EXPECT_EQ(response_.error().code(), v1::Error::MALFORMED_FRAME);
  EXPECT_EQ(counters_.malformed_frames, 1u);
  EXPECT_EQ(counters_.frames_received, 1u);
}

TEST_F(DispatchTest, OversizeFrameIsAnErrorThatCloses) {
  const Dispatcher::Outcome outcome = dispatcher_.frame_too_large(1 << 24, response_);
  EXPECT_TRUE(outcome.close);
  EXPECT_EQ(response_.error().code(), v1::Error::FRAME_TOO_LARGE);
  EXPECT_NE(response_.error().message().find("65536"), std::string::npos);
  EXPECT_EQ(counters_.frames_too_large, 1u);
}

TEST_F(DispatchTest, CheckFillsEveryRuleField) {
  v1::Request request = check_request(1);
  add_check(request, "alice");
  const Dispatcher::Outcome outcome = handle(request);
  EXPECT_FALSE(outcome.error);
  ASSERT_TRUE(response_.has_check());
  ASSERT_EQ(response_.check().results_size(), 1);
  const v1::CheckResult& result = response_.check().results(0);
  EXPECT_TRUE(result.allowed());
  EXPECT_EQ(result.status(), v1::CheckResult::OK);
  ASSERT_EQ(result.rules_size(), 1);
  const v1::RuleResult& rule = result.rules(0);
  EXPECT_EQ(rule.name(), "per-user");
  EXPECT_TRUE(rule.allowed());
  EXPECT_EQ(rule.limit(), 5u);
  EXPECT_EQ(rule.period_ms(), 3'600'000u);
  EXPECT_EQ(rule.burst(), 5u);
  EXPECT_EQ(rule.remaining(), 4u);
  EXPECT_EQ(rule.retry_after_us(), 0);
  EXPECT_EQ(rule.reset_after_us(), 720'000'000);  // one token per 12 minutes
  EXPECT_EQ(counters_.check_requests, 1u);
}

TEST_F(DispatchTest, UnsetCostMeansOneAndZeroCostChargesNothing) {
  v1::Request request = check_request(1);
  add_check(request, "alice");               // unset: 1
  add_check(request, "alice")->set_cost(0);  // a peek
  add_check(request, "alice")->set_cost(3);
  add_check(request, "alice")->set_cost(2);  // 1 left: denied
  add_check(request, "alice");               // the denial charged nothing
  ASSERT_FALSE(handle(request).error);
  const auto& results = response_.check().results();
  ASSERT_EQ(results.size(), 5);
  EXPECT_EQ(results[0].rules(0).remaining(), 4u);
  EXPECT_TRUE(results[1].allowed());
  EXPECT_EQ(results[1].rules(0).remaining(), 4u);
  EXPECT_EQ(results[2].rules(0).remaining(), 1u);
  EXPECT_FALSE(results[3].allowed());
  EXPECT_GT(results[3].rules(0).retry_after_us(), 0);
  EXPECT_TRUE(results[4].allowed());
  EXPECT_EQ(results[4].rules(0).remaining(), 0u);
}

TEST_F(DispatchTest, CostAboveTheMaximumIsInvalidAndSparesTheOthers) {
  v1::Request request = check_request(1);
  add_check(request, "alice")->set_cost(static_cast<std::uint64_t>(core::kMaxTokens) + 1);
  add_check(request, "alice")->set_cost(UINT64_MAX);
  add_check(request, "alice");
  ASSERT_FALSE(handle(request).error);
  const auto& results = response_.check().results();
  ASSERT_EQ(results.size(), 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(results[i].allowed());
    EXPECT_EQ(results[i].status(), v1::CheckResult::INVALID);
    EXPECT_NE(results[i].error().find("cost"), std::string::npos) << results[i].error();
  }
  EXPECT_TRUE(results[2].allowed());
  EXPECT_EQ(results[2].rules(0).remaining(), 4u);
  EXPECT_EQ(counters_.invalid_checks, 2u);
}

TEST_F(DispatchTest, InlineLimitIsValidatedPerCheck) {
  v1::Request request = check_request(1);
  auto add_inline = [&](std::uint64_t limit, std::uint64_t period_ms, std::uint64_t burst) {
    v1::InlineLimit* inline_limit = add_check(request, "bob")->mutable_inline_limit();
    inline_limit->set_key("jobs");
    inline_limit->set_limit(limit);
    inline_limit->set_period_ms(period_ms);
    inline_limit->set_burst(burst);
    return inline_limit;
  };
  add_inline(1, 0, 0);                                                    // 0: period 0
  add_inline(static_cast<std::uint64_t>(core::kMaxTokens) + 1, 1000, 0);  // 1: limit too big
  add_inline(2, 1000, static_cast<std::uint64_t>(core::kMaxTokens) + 1);  // 2: burst too big
  add_inline(2, UINT64_MAX, 0);                                           // 3: period overflows
  add_inline(2, 60'000, 0);                                               // 4: valid, burst = limit
  add_inline(0, 0, 0)->set_key("");     // 5: empty InlineLimit: no inline limit
  add_inline(3, 1000, 0)->set_key("");  // 6: numbers without a key
  ASSERT_FALSE(handle(request).error);
  const auto& results = response_.check().results();
  ASSERT_EQ(results.size(), 7);

  for (int i : {0, 1, 2, 3, 6}) {
    EXPECT_EQ(results[i].status(), v1::CheckResult::INVALID) << i;
    EXPECT_FALSE(results[i].allowed()) << i;
    EXPECT_NE(results[i].error().find("inline_limit"), std::string::npos) << results[i].error();
  }
  EXPECT_NE(results[0].error().find("period_ms"), std::string::npos);
  EXPECT_NE(results[1].error().find("limit"), std::string::npos);
  EXPECT_NE(results[2].error().find("burst"), std::string::npos);
  EXPECT_EQ(counters_.invalid_checks, 5u);

  // The valid one: the rule plus the inline bucket, burst defaulting to limit.
  EXPECT_TRUE(results[4].allowed());
  EXPECT_EQ(results[4].status(), v1::CheckResult::OK);
  ASSERT_EQ(results[4].rules_size(), 2);
  bool saw_inline = false;
  for (const v1::RuleResult& rule : results[4].rules()) {
    if (rule.name() == "per-user") continue;
    saw_inline = true;
    EXPECT_EQ(rule.limit(), 2u);
    EXPECT_EQ(rule.period_ms(), 60'000u);
    EXPECT_EQ(rule.burst(), 2u);
    EXPECT_EQ(rule.remaining(), 1u);
  }
  EXPECT_TRUE(saw_inline);

  // The empty InlineLimit is ignored: only the rule applies.
  EXPECT_TRUE(results[5].allowed());
  EXPECT_EQ(results[5].rules_size(), 1);
}

TEST_F(DispatchTest, TooManyChecksIsAnErrorThatKeepsTheConnection) {
  settings_.max_checks_per_frame = 3;
  v1::Request request = check_request(8);
  for (int i = 0; i < 4; ++i) add_check(request, "carol");
  const Dispatcher::Outcome outcome = handle(request);
  EXPECT_TRUE(outcome.error);
  EXPECT_FALSE(outcome.close);
  EXPECT_EQ(response_.id(), 8u);
  EXPECT_EQ(response_.error().code(), v1::Error::TOO_MANY_CHECKS);
  EXPECT_EQ(counters_.too_many_checks, 1u);
  EXPECT_EQ(limiter_.stats().checks, 0u);  // none was decided

  // Exactly the bound is fine.
  request.mutable_check()->mutable_checks()->RemoveLast();
  EXPECT_FALSE(handle(request).error);
  EXPECT_EQ(response_.check().results_size(), 3);
}

TEST_F(DispatchTest, ResponseObjectIsReusedAcrossBodies) {
  v1::Request check = check_request(1);
  add_check(check, "dave");
  ASSERT_FALSE(handle(check).error);
  v1::Request status;
  status.set_version(v1::VERSION_1);
  status.set_id(2);
  status.mutable_status();
  ASSERT_FALSE(handle(status).error);
  EXPECT_FALSE(response_.has_check());
  EXPECT_TRUE(response_.has_status());
  ASSERT_FALSE(handle(check).error);
  EXPECT_EQ(response_.id(), 1u);
  ASSERT_EQ(response_.check().results_size(), 1);  // not appended to old results
  EXPECT_EQ(response_.check().results(0).rules(0).remaining(), 3u);
}

TEST_F(DispatchTest, StatusReportsIdentityRulesAndEveryCounter) {
  v1::Request check = check_request(1);
  add_check(check, "erin");
  ASSERT_FALSE(handle(check).error);

  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.set_id(3);
  request.mutable_status();
  ASSERT_FALSE(handle(request).error);
  ASSERT_TRUE(response_.has_status());
  const v1::StatusResponse& status = response_.status();
  EXPECT_EQ(status.node_id(), "node-a");
  EXPECT_EQ(status.version(), RLIMIT_VERSION);
  EXPECT_EQ(status.config_source(), "test.toml");
  EXPECT_EQ(status.uptime_ms(), 1000u);
  EXPECT_EQ(status.keys(), 1u);
  EXPECT_EQ(status.max_keys(), core::LimiterOptions{}.max_keys);
  ASSERT_EQ(status.rules_size(), 1);
  EXPECT_EQ(status.rules(0).name(), "per-user");
  EXPECT_EQ(status.rules(0).algorithm(), "token_bucket");
  EXPECT_EQ(status.rules(0).limit(), 5u);
  EXPECT_EQ(status.rules(0).period_ms(), 3'600'000u);
  EXPECT_FALSE(status.rules(0).match().empty());
  EXPECT_EQ(status.rules(0).overrides(), 0u);

  std::set<std::string> names;
  std::uint64_t checks = 0;
  std::uint64_t status_requests = 0;
  for (const v1::Counter& counter : status.counters()) {
    EXPECT_TRUE(names.insert(counter.name()).second) << "duplicate " << counter.name();
    if (counter.name() == "checks") checks = counter.value();
    if (counter.name() == "status_requests") status_requests = counter.value();
  }
  for_each_stat(core::LimiterStats{}, [&](std::string_view name, std::uint64_t) {
    EXPECT_TRUE(names.contains(std::string(name))) << name;
  });
  for_each_counter(ShellCounters{}, [&](std::string_view name, std::uint64_t) {
    EXPECT_TRUE(names.contains(std::string(name))) << name;
  });
  for (const char* name :
       {"checks", "allowed", "denied", "invalid", "keys_evicted", "connections_rejected",
        "malformed_frames", "frames_too_large", "unknown_message_types", "too_many_checks",
        "truncated_frames", "reloads", "reload_failures"}) {
    EXPECT_TRUE(names.contains(name)) << name;
  }
  EXPECT_EQ(checks, 1u);
  EXPECT_EQ(status_requests, 1u);
}

// A batch whose answer could exceed max_response_bytes is refused before
// anything is decided: the client is told to send fewer and was charged
// nothing, so its retry is not charged twice.
TEST_F(DispatchTest, AnswerAboveMaxResponseBytesIsRefusedBeforeCharging) {
  settings_.max_response_bytes = 200;
  v1::Request request = check_request(4);
  for (int i = 0; i < 20; ++i) add_check(request, "frank");
  const Dispatcher::Outcome outcome = handle(request);
  EXPECT_TRUE(outcome.error);
  EXPECT_FALSE(outcome.close);
  EXPECT_EQ(response_.id(), 4u);
  EXPECT_EQ(response_.error().code(), v1::Error::TOO_MANY_CHECKS);
  EXPECT_NE(response_.error().message().find("nothing was decided or charged"), std::string::npos)
      << response_.error().message();
  EXPECT_EQ(counters_.responses_too_large, 1u);
  EXPECT_EQ(limiter_.stats().checks, 0u);
  // frank still has all 5 of his tokens.
  v1::Request five = check_request(6);
  for (int i = 0; i < 5; ++i) add_check(five, "frank");
  settings_.max_response_bytes = 16 * 1024;
  ASSERT_FALSE(handle(five).error);
  for (const v1::CheckResult& result : response_.check().results()) EXPECT_TRUE(result.allowed());
  std::string out;
  settings_.max_response_bytes = 200;

  // A small answer goes out as it is.
  v1::Request small = check_request(5);
  add_check(small, "gina");
  ASSERT_FALSE(handle(small).error);
  out.clear();
  EXPECT_TRUE(dispatcher_.append_response(response_, out));
}

v1::Request members_request(std::uint64_t id) {
  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.set_id(id);
  request.mutable_members();
  return request;
}

TEST_F(DispatchTest, MembersWithoutAClusterIsThisNodeAlone) {
  ASSERT_FALSE(handle(members_request(8)).error);
  EXPECT_EQ(response_.id(), 8u);
  ASSERT_TRUE(response_.has_members());
  const v1::MembersResponse& members = response_.members();
  EXPECT_EQ(members.mode(), "none");
  EXPECT_EQ(members.cluster(), "");
  ASSERT_EQ(members.members_size(), 1);
  EXPECT_EQ(members.members(0).node_id(), "node-a");
  EXPECT_EQ(members.members(0).state(), "alive");
  EXPECT_EQ(members.members(0).last_heard_ms_ago(), 0);
  EXPECT_TRUE(members.members(0).self());
  EXPECT_EQ(counters_.members_requests, 1u);
}

TEST_F(DispatchTest, MembersAndStatusInACluster) {
  core::LimiterOptions replicated;
  replicated.replicated = true;
  core::Limiter cluster_limiter(replicated, per_user_rules(5, 5));
  core::ClusterOptions options;
  options.cluster_name = "blue";
  options.membership.node_id = "node-a";
  options.membership.address = "127.0.0.1:7001";
  options.membership.incarnation = 11;
  core::ClusterNode node(options, cluster_limiter, 1);
  node.start(kNow - 10'000);
  // A peer is heard from directly, 2 ms before the request.
  peer::v1::PeerMessage ping;
  ping.set_cluster("blue");
  ping.set_from_id("node-b");
  ping.set_from_address("127.0.0.1:7002");
  ping.set_from_incarnation(22);
  ping.set_seq(1);  // replay protection takes only sequenced, recent messages
  ping.set_sent_at_us(kNow - 2000);
  ping.mutable_ping()->set_probe_id(1);
  node.on_payload(ping.SerializeAsString(), kNow - 2000);
  PeerCounters peer_counters;
  peer_counters.peer_bad_mac = 3;
  status_.cluster_mode = "gossip";
  status_.cluster = &node;
  status_.peer_counters = &peer_counters;

  ASSERT_FALSE(handle(members_request(9)).error);
  const v1::MembersResponse& members = response_.members();
  EXPECT_EQ(members.mode(), "gossip");
  EXPECT_EQ(members.cluster(), "blue");
  ASSERT_EQ(members.members_size(), 2);
  EXPECT_EQ(members.members(0).node_id(), "node-a");
  EXPECT_EQ(members.members(0).address(), "127.0.0.1:7001");
  EXPECT_EQ(members.members(0).incarnation(), 11u);
  EXPECT_TRUE(members.members(0).self());
  EXPECT_EQ(members.members(0).last_heard_ms_ago(), 0);
  EXPECT_EQ(members.members(1).node_id(), "node-b");
  EXPECT_EQ(members.members(1).address(), "127.0.0.1:7002");
  EXPECT_EQ(members.members(1).state(), "alive");
  EXPECT_EQ(members.members(1).incarnation(), 22u);
  EXPECT_FALSE(members.members(1).self());
  EXPECT_EQ(members.members(1).last_heard_ms_ago(), 2);

  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.mutable_status();
  ASSERT_FALSE(handle(request).error);
  std::set<std::string> names;
  std::uint64_t bad_mac = 0;
  std::uint64_t alive = 0;
  for (const v1::Counter& counter : response_.status().counters()) {
    EXPECT_TRUE(names.insert(counter.name()).second) << "duplicate " << counter.name();
    if (counter.name() == "peer_bad_mac") bad_mac = counter.value();
    if (counter.name() == "members_alive") alive = counter.value();
  }
  auto expect_listed = [&](std::string_view name, std::uint64_t) {
    EXPECT_TRUE(names.contains(std::string(name))) << name;
  };
  for_each_cluster_stat(core::ClusterStats{}, expect_listed);
  for_each_membership_stat(core::MembershipStats{}, expect_listed);
  for_each_peer_counter(PeerCounters{}, expect_listed);
  EXPECT_EQ(bad_mac, 3u);
  EXPECT_EQ(alive, 2u);
  EXPECT_TRUE(names.contains("members_suspect"));
  EXPECT_TRUE(names.contains("cluster_packets_in"));
}

TEST(MemberInfoTest, NeverHeardIsMinusOne) {
  core::Member member;
  member.id = "c";
  member.last_heard_us = 0;
  v1::MemberInfo info;
  fill_member_info(member, /*self=*/false, 5'000'000, info);
  EXPECT_EQ(info.last_heard_ms_ago(), -1);
  member.last_heard_us = 1'000'000;
  fill_member_info(member, /*self=*/false, 5'000'000, info);
  EXPECT_EQ(info.last_heard_ms_ago(), 4000);
  member.state = core::MemberState::kSuspect;
  fill_member_info(member, /*self=*/false, 5'000'000, info);
  EXPECT_EQ(info.state(), "suspect");
}

// The algorithms' fields through the protocol: a concurrency rule (leases),
// a leaky shaper (delays), an elastic token bucket (over_limit, load).
class AlgorithmDispatchTest : public ::testing::Test {
 protected:
  static constexpr core::TimeUs kStart = 1000 * core::kUsPerSecond + 1;

  static core::Rule rule_of(std::string name, std::string key, core::Algorithm algorithm,
                            std::int64_t limit, std::int64_t burst,
                            core::AlgorithmOptions options = {}) {
    core::Rule rule;
    rule.name = std::move(name);
    core::DescriptorMatch match;
    match.key = std::move(key);
    match.value.each = true;
    rule.match.push_back(std::move(match));
    rule.params = {limit, core::kUsPerSecond, burst};
    rule.algorithm = algorithm;
    rule.options = options;
    return rule;
  }

  static core::RuleSet rules() {
    core::AlgorithmOptions lease;
    lease.lease_ttl_us = 10 * core::kUsPerSecond;
    core::AlgorithmOptions shaper;
    shaper.shaper = true;
    core::AlgorithmOptions elastic;
    elastic.throttle.mode = core::algorithms::ThrottleMode::kElastic;
    elastic.throttle.elastic_threshold_permille = 500;
    core::RuleSet set;
    set.rules.push_back(rule_of("slots", "job", core::Algorithm::kConcurrency, 1, 1, lease));
    set.rules.push_back(rule_of("shaped", "stream", core::Algorithm::kLeakyBucket, 10, 5, shaper));
    set.rules.push_back(rule_of("elastic", "tenant", core::Algorithm::kTokenBucket, 1, 1, elastic));
    set.rules.push_back(rule_of("bucket", "user", core::Algorithm::kTokenBucket, 2, 2));
    return set;
  }

  AlgorithmDispatchTest()
      : limiter_(core::LimiterOptions{}, rules()),
        dispatcher_(limiter_, settings_, counters_, status_, lease_tokens_) {}

  static v1::Request check_of(std::string key, std::string value,
                              v1::Check::Mode mode = v1::Check::CHECK,
                              std::optional<std::int64_t> max_wait_us = std::nullopt) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(1);
    v1::Check* check = request.mutable_check()->add_checks();
    v1::Descriptor* d = check->add_descriptors();
    d->set_key(std::move(key));
    d->set_value(std::move(value));
    check->set_mode(mode);
    if (max_wait_us) check->set_max_wait_us(*max_wait_us);
    return request;
  }

  // The one CheckResult of a one-check request.
  v1::CheckResult result_of(const v1::Request& request, core::TimeUs now = kStart) {
    dispatcher_.handle(request, now, response_);
    EXPECT_TRUE(response_.has_check()) << response_.DebugString();
    if (!response_.has_check() || response_.check().results_size() != 1) return {};
    return response_.check().results(0);
  }

  v1::ReleaseResponse release(const std::vector<std::string>& leases, bool extend = false,
                              core::TimeUs now = kStart) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(2);
    for (const std::string& lease : leases) request.mutable_release()->add_leases(lease);
    request.mutable_release()->set_extend(extend);
    const Dispatcher::Outcome outcome = dispatcher_.handle(request, now, response_);
    EXPECT_FALSE(outcome.error) << response_.DebugString();
    EXPECT_EQ(response_.id(), 2u);
    return response_.release();
  }

  Dispatcher::Outcome reset(const std::vector<std::pair<std::string, std::string>>& descriptors) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(3);
    v1::ResetRequest* body = request.mutable_reset();
    for (const auto& [key, value] : descriptors) {
      v1::Descriptor* d = body->add_descriptors();
      d->set_key(key);
      d->set_value(value);
    }
    return dispatcher_.handle(request, kStart, response_);
  }

  config::DaemonSettings settings_;
  ShellCounters counters_;
  StatusContext status_;
  core::Limiter limiter_;
  LeaseTokens lease_tokens_{"a lease secret for tests"};
  Dispatcher dispatcher_;
  v1::Response response_;
};

TEST_F(AlgorithmDispatchTest, ConcurrencyLeaseIsATokenThatReleases) {
  const v1::CheckResult first = result_of(check_of("job", "build"));
  ASSERT_TRUE(first.allowed());
  ASSERT_EQ(first.rules_size(), 1);
  EXPECT_EQ(first.rules(0).algorithm(), "concurrency");
  const std::string lease = first.rules(0).lease();
  ASSERT_GT(lease.size(), LeaseTokens::kIdBytes + LeaseTokens::kTagBytes);
  // The token is the key, the id and a tag: decoding gives back what the
  // core made.
  std::string_view key;
  std::uint64_t id = 0;
  ASSERT_EQ(lease_tokens_.decode(lease, key, id), LeaseTokens::Decoded::kOk);
  EXPECT_NE(id, 0u);
  std::string again;
  lease_tokens_.append(again, key, id);
  EXPECT_EQ(again, lease);

  EXPECT_FALSE(result_of(check_of("job", "build")).allowed());  // the one slot is taken
  EXPECT_TRUE(result_of(check_of("job", "build")).rules(0).lease().empty());

  const v1::ReleaseResponse released = release({lease});
  ASSERT_EQ(released.statuses_size(), 1);
  EXPECT_EQ(released.statuses(0), v1::ReleaseResponse::DONE);
  EXPECT_EQ(counters_.release_requests, 1u);
  EXPECT_EQ(limiter_.stats().leases_released, 1u);
  const v1::CheckResult after = result_of(check_of("job", "build"));
  EXPECT_TRUE(after.allowed());
  EXPECT_FALSE(after.rules(0).lease().empty());
}

TEST_F(AlgorithmDispatchTest, EveryLeaseGetsAClearStatusAndBadTokensNeverCrash) {
  const std::string lease = result_of(check_of("job", "a")).rules(0).lease();
  const std::string bucket_key_token = [&] {
    // A token bucket's key, signed: a genuine token naming no lease.
    const v1::CheckResult r = result_of(check_of("user", "bob"));
    EXPECT_TRUE(r.rules(0).lease().empty());
    std::string token;
    lease_tokens_.append(token, std::string(40, 'k'), 1);
    return token;
  }();
  const v1::ReleaseResponse answer = release({"", "short", std::string(24, '\0'), bucket_key_token,
                                              lease, lease, std::string(5000, '\xff')});
  ASSERT_EQ(answer.statuses_size(), 7);
  EXPECT_EQ(answer.statuses(0), v1::ReleaseResponse::MALFORMED_LEASE);
  EXPECT_EQ(answer.statuses(1), v1::ReleaseResponse::MALFORMED_LEASE);
  EXPECT_EQ(answer.statuses(2), v1::ReleaseResponse::MALFORMED_LEASE);  // id and tag, no key
  EXPECT_EQ(answer.statuses(3), v1::ReleaseResponse::NOT_A_LEASE);
  EXPECT_EQ(answer.statuses(4), v1::ReleaseResponse::DONE);
  EXPECT_EQ(answer.statuses(5), v1::ReleaseResponse::UNKNOWN_LEASE);  // released already
  EXPECT_EQ(answer.statuses(6), v1::ReleaseResponse::UNKNOWN_LEASE);  // forged
  EXPECT_EQ(counters_.leases_malformed, 3u);
  EXPECT_EQ(counters_.leases_forged, 1u);

  // Extend restarts the TTL: a lease extended at 9 s outlives the first 10 s.
  const std::string held = result_of(check_of("job", "b")).rules(0).lease();
  EXPECT_EQ(release({held}, /*extend=*/true, kStart + 9 * core::kUsPerSecond).statuses(0),
            v1::ReleaseResponse::DONE);
  EXPECT_FALSE(result_of(check_of("job", "b"), kStart + 12 * core::kUsPerSecond).allowed());
  EXPECT_EQ(release({held}, false, kStart + 12 * core::kUsPerSecond).statuses(0),
            v1::ReleaseResponse::DONE);

  // More leases than a frame may carry checks: refused, connection kept.
  settings_.max_checks_per_frame = 2;
  v1::Request request;
  request.set_version(v1::VERSION_1);
  for (int i = 0; i < 3; ++i) request.mutable_release()->add_leases(lease);
  const Dispatcher::Outcome outcome = dispatcher_.handle(request, kStart, response_);
  EXPECT_TRUE(outcome.error);
  EXPECT_FALSE(outcome.close);
  EXPECT_EQ(response_.error().code(), v1::Error::TOO_MANY_CHECKS);
}

// A lease token cannot be forged: another client who knows the key (it is in
// every token of the key) and guesses, alters or predicts the id, or signs
// with another secret, releases nothing, and the holder's lease stays held.
// A replayed token releases nothing either: release is idempotent.
TEST_F(AlgorithmDispatchTest, ForgedAndReplayedLeaseTokensReleaseNothing) {
  const std::string lease = result_of(check_of("job", "forge")).rules(0).lease();
  std::string_view key;
  std::uint64_t id = 0;
  ASSERT_EQ(lease_tokens_.decode(lease, key, id), LeaseTokens::Decoded::kOk);
  const std::string key_bytes(key);
  // The id the next lease would get, and the ones nearby, unsigned.
  std::vector<std::string> forged;
  for (std::uint64_t guess : {id, id + 1, id - 1}) {
    std::string token = key_bytes;
    for (int shift = 56; shift >= 0; shift -= 8) token.push_back(static_cast<char>(guess >> shift));
    token.append(LeaseTokens::kTagBytes, '\0');
    forged.push_back(token);
  }
  // Signed under another daemon's secret.
  LeaseTokens other("another daemon's secret");
  std::string foreign;
  other.append(foreign, key_bytes, id);
  forged.push_back(foreign);
  // One bit of the id or of the tag flipped.
  for (std::size_t at : {key_bytes.size() + 7, lease.size() - 1}) {
    std::string flipped = lease;
    flipped[at] = static_cast<char>(flipped[at] ^ 1);
    forged.push_back(flipped);
  }
  const v1::ReleaseResponse refused = release(forged);
  ASSERT_EQ(refused.statuses_size(), static_cast<int>(forged.size()));
  for (int i = 0; i < refused.statuses_size(); ++i) {
    EXPECT_EQ(refused.statuses(i), v1::ReleaseResponse::UNKNOWN_LEASE) << i;
  }
  EXPECT_EQ(counters_.leases_forged, forged.size());
  EXPECT_EQ(limiter_.stats().leases_released, 0u);
  EXPECT_FALSE(result_of(check_of("job", "forge")).allowed());  // still held
  // Extending with a forged token does nothing either.
  EXPECT_EQ(release({forged[0]}, /*extend=*/true).statuses(0), v1::ReleaseResponse::UNKNOWN_LEASE);

  // The holder's own token releases once; replayed, it releases nothing
  // (not even a later lease of the same key).
  EXPECT_EQ(release({lease}).statuses(0), v1::ReleaseResponse::DONE);
  const std::string next = result_of(check_of("job", "forge")).rules(0).lease();
  ASSERT_FALSE(next.empty());
  EXPECT_NE(next, lease);
  EXPECT_EQ(release({lease}).statuses(0), v1::ReleaseResponse::UNKNOWN_LEASE);
  EXPECT_FALSE(result_of(check_of("job", "forge")).allowed());  // next is still held
  EXPECT_EQ(release({next}).statuses(0), v1::ReleaseResponse::DONE);
}

// The bound that refuses a batch before deciding it is an upper bound: over
// random batches (leases with long keys, inline limits, invalid checks) and
// limits, a batch is either refused with nothing decided, or decided and
// answered within max_response_bytes; never decided and then refused.
TEST_F(AlgorithmDispatchTest, AnAnswerIsNeverRefusedAfterItsChecksWereDecided) {
  std::mt19937_64 rng(18);
  const auto text = [&](std::size_t max_bytes) {
    return std::string(rng() % (max_bytes + 1), static_cast<char>('a' + rng() % 26));
  };
  const char* keys[] = {"job", "stream", "tenant", "user", "other"};
  int refused = 0;
  int decided = 0;
  for (int n = 0; n < 2000; ++n) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(static_cast<std::uint64_t>(n));
    const int checks = 1 + static_cast<int>(rng() % 12);
    for (int c = 0; c < checks; ++c) {
      v1::Check* check = request.mutable_check()->add_checks();
      for (const char* key : keys) {
        if (rng() % 2 != 0) continue;
        v1::Descriptor* d = check->add_descriptors();
        d->set_key(key);
        d->set_value(text(60));
      }
      if (rng() % 8 == 0) {  // a duplicate key: invalid, and its error quotes it
        v1::Descriptor* d = check->add_descriptors();
        d->set_key(check->descriptors_size() > 0 ? check->descriptors(0).key() : text(80));
      }
      if (rng() % 4 == 0) {
        v1::InlineLimit* limit = check->mutable_inline_limit();
        limit->set_key(text(50));
        limit->set_limit(1 + rng() % 10);
        limit->set_period_ms(rng() % 3 == 0 ? 0 : 1000);  // 0: invalid
      }
      if (rng() % 16 == 0) check->set_mode(static_cast<v1::Check::Mode>(7));
      if (rng() % 4 == 0) check->set_cost(rng() % 3);
    }
    settings_.max_response_bytes = static_cast<std::uint32_t>(60 + rng() % 4000);
    const std::uint64_t checks_before = limiter_.stats().checks + counters_.invalid_checks;
    // Half through the fast path (when it takes the frame), half the other.
    std::string out;
    Dispatcher::Outcome outcome;
    const bool fast = n % 2 == 0 && dispatcher_.answer_checks(request.SerializeAsString(), kStart,
                                                              response_, out, outcome);
    if (!fast) outcome = dispatcher_.handle(request, kStart, response_);
    if (outcome.error) {
      ASSERT_EQ(response_.error().code(), v1::Error::TOO_MANY_CHECKS) << response_.DebugString();
      EXPECT_EQ(limiter_.stats().checks + counters_.invalid_checks, checks_before);
      ++refused;
      continue;
    }
    ++decided;
    if (!fast) {
      ASSERT_TRUE(dispatcher_.append_response(response_, out))
          << "decided, then too large for " << settings_.max_response_bytes;
    }
    EXPECT_LE(out.size(), settings_.max_response_bytes + wire::kFrameHeaderBytes);
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(decided, 100);
  EXPECT_EQ(counters_.responses_too_large, static_cast<std::uint64_t>(refused));
}
TEST_F(AlgorithmDispatchTest, ShaperDelaysAreReportedPerRuleAndPerCheck) {
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 4; ++i) {
    const v1::CheckResult r = result_of(check_of("stream", "s"));
    ASSERT_TRUE(r.allowed());
    EXPECT_EQ(r.rules(0).algorithm(), "leaky_bucket");
    EXPECT_EQ(r.delay_us(), r.rules(0).delay_us());
    delays.push_back(r.delay_us());
  }
  EXPECT_EQ(delays.front(), 0);
  EXPECT_GT(delays.back(), 0);
  EXPECT_TRUE(std::is_sorted(delays.begin(), delays.end()));
  // A request's own max_wait_us replaces the shaper's (none): a wait above
  // it is refused.
  const v1::CheckResult bounded = result_of(check_of("stream", "s", v1::Check::CHECK, 1));
  EXPECT_FALSE(bounded.allowed());
}

TEST_F(AlgorithmDispatchTest, PeekConsumesNothingAndReserveHandsOutGrowingDelays) {
  for (int i = 0; i < 5; ++i) {
    const v1::CheckResult peek = result_of(check_of("user", "carol", v1::Check::PEEK));
    EXPECT_TRUE(peek.allowed());
    EXPECT_EQ(peek.rules(0).remaining(), 1u);  // as if one were taken; nothing is
  }
  EXPECT_EQ(limiter_.stats().peeks, 5u);
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 5; ++i) {
    const v1::CheckResult r = result_of(check_of("user", "carol", v1::Check::RESERVE));
    ASSERT_TRUE(r.allowed()) << r.error();
    delays.push_back(r.delay_us());
  }
  EXPECT_EQ(delays[0], 0);
  EXPECT_EQ(delays[1], 0);
  EXPECT_GT(delays[2], 0);
  EXPECT_GT(delays[3], delays[2]);
  EXPECT_GT(delays[4], delays[3]);
  // Bounded: a reservation longer than max_wait_us is refused and charges nothing.
  const v1::CheckResult refused =
      result_of(check_of("user", "carol", v1::Check::RESERVE, delays[4]));
  EXPECT_FALSE(refused.allowed());
  EXPECT_EQ(refused.delay_us(), 0);
}

TEST_F(AlgorithmDispatchTest, UnknownModeAndBadMaxWaitAreInvalid) {
  const v1::CheckResult mode =
      result_of(check_of("user", "dave", static_cast<v1::Check::Mode>(7)));
  EXPECT_EQ(mode.status(), v1::CheckResult::INVALID);
  EXPECT_NE(mode.error().find("mode 7"), std::string::npos) << mode.error();
  const v1::CheckResult wait = result_of(check_of("user", "dave", v1::Check::CHECK, -5));
  EXPECT_EQ(wait.status(), v1::CheckResult::INVALID);
  EXPECT_NE(wait.error().find("max_wait_us"), std::string::npos) << wait.error();
  // -1 is "none", as unset.
  EXPECT_TRUE(result_of(check_of("user", "dave", v1::Check::CHECK, -1)).allowed());
}

TEST_F(AlgorithmDispatchTest, ElasticRulesReadTheDaemonsLoad) {
  EXPECT_TRUE(result_of(check_of("tenant", "t")).allowed());
  // Over the limit, under the load threshold: admitted, marked over_limit.
  counters_.load_permille = 100;
  const v1::CheckResult over = result_of(check_of("tenant", "t"));
  EXPECT_TRUE(over.allowed());
  EXPECT_TRUE(over.rules(0).over_limit());
  // Loaded: refused.
  counters_.load_permille = 900;
  const v1::CheckResult loaded = result_of(check_of("tenant", "t"));
  EXPECT_FALSE(loaded.allowed());
  EXPECT_FALSE(loaded.rules(0).over_limit());
}

TEST_F(AlgorithmDispatchTest, ResetForgetsTheKeysOfTheCheck) {
  EXPECT_TRUE(result_of(check_of("user", "erin")).allowed());
  EXPECT_TRUE(result_of(check_of("user", "erin")).allowed());
  EXPECT_FALSE(result_of(check_of("user", "erin")).allowed());
  EXPECT_FALSE(reset({{"user", "erin"}}).error);
  ASSERT_TRUE(response_.has_reset()) << response_.DebugString();
  EXPECT_EQ(response_.id(), 3u);
  EXPECT_EQ(response_.reset().keys_reset(), 1u);
  ASSERT_EQ(response_.reset().rules_size(), 1);
  EXPECT_EQ(response_.reset().rules(0), "bucket");
  EXPECT_TRUE(result_of(check_of("user", "erin")).allowed());
  // Nothing held for this one: zero keys, the rule still named.
  EXPECT_FALSE(reset({{"user", "nobody"}}).error);
  EXPECT_EQ(response_.reset().keys_reset(), 0u);
  EXPECT_EQ(counters_.reset_requests, 2u);

  // Bad input: an Error with the core's reason; the connection stays.
  const Dispatcher::Outcome bad = reset({{"user", "a"}, {"user", "b"}});
  EXPECT_TRUE(bad.error);
  EXPECT_FALSE(bad.close);
  EXPECT_EQ(response_.error().code(), v1::Error::INVALID_REQUEST);
  EXPECT_NE(response_.error().message().find("user"), std::string::npos);
}

TEST_F(AlgorithmDispatchTest, ResetIsRefusedWhenDisabled) {
  EXPECT_TRUE(result_of(check_of("user", "fay")).allowed());
  EXPECT_TRUE(result_of(check_of("user", "fay")).allowed());
  settings_.allow_reset = false;
  const Dispatcher::Outcome outcome = reset({{"user", "fay"}});
  EXPECT_TRUE(outcome.error);
  EXPECT_FALSE(outcome.close);
  EXPECT_EQ(response_.error().code(), v1::Error::NOT_ALLOWED);
  EXPECT_NE(response_.error().message().find("allow_reset"), std::string::npos);
  EXPECT_EQ(counters_.resets_refused, 1u);
  EXPECT_FALSE(result_of(check_of("user", "fay")).allowed());  // nothing was reset
}

// The fast path (wire/check_codec.h) against the protobuf path: two
// dispatchers over identical limiters get the same frames; every answer must
// be the same bytes, and every counter the same number.
class FastPathTest : public ::testing::Test {
 protected:
  struct Side {
    explicit Side(const config::DaemonSettings& settings, const StatusContext& status)
        : limiter(core::LimiterOptions{}, rules()),
          dispatcher(limiter, settings, counters, status, lease_tokens) {}
    // per-user, and a concurrency rule on the same descriptor (leases).
    static core::RuleSet rules() {
      core::RuleSet set = per_user_rules(3, 3);
      core::Rule slots = set.rules[0];
      slots.name = "slots";
      slots.algorithm = core::Algorithm::kConcurrency;
      slots.params = {2, core::kUsPerSecond, 2};
      slots.options.lease_ttl_us = core::kUsPerSecond;
      set.rules.push_back(std::move(slots));
      return set;
    }
    ShellCounters counters;
    core::Limiter limiter;
    // One secret on both sides: their tokens are alike.
    LeaseTokens lease_tokens{"a lease secret for tests"};
    Dispatcher dispatcher;
    v1::Request request;
    v1::Response response;
    std::string out;
  };

  FastPathTest() : fast_(settings_, status_), slow_(settings_, status_) {}

  // Answers `payload` both ways; returns whether the fast path took it.
  bool both(const std::string& payload, core::TimeUs now) {
    Dispatcher::Outcome fast_outcome;
    const bool taken =
        fast_.dispatcher.answer_checks(payload, now, fast_.response, fast_.out, fast_outcome);
    if (!taken) {
      fast_outcome = fast_.dispatcher.handle_frame(payload, now, fast_.request, fast_.response);
      if (!fast_.dispatcher.append_response(fast_.response, fast_.out)) fast_outcome.error = true;
    }
    Dispatcher::Outcome slow_outcome =
        slow_.dispatcher.handle_frame(payload, now, slow_.request, slow_.response);
    if (!slow_.dispatcher.append_response(slow_.response, slow_.out)) slow_outcome.error = true;
    EXPECT_EQ(fast_outcome.error, slow_outcome.error);
    EXPECT_EQ(fast_outcome.close, slow_outcome.close);
    return taken;
  }

  void expect_same_state() {
    EXPECT_EQ(fast_.out, slow_.out);
    std::vector<std::uint64_t> a, b;
    for_each_counter(fast_.counters, [&](std::string_view, std::uint64_t v) { a.push_back(v); });
    for_each_counter(slow_.counters, [&](std::string_view, std::uint64_t v) { b.push_back(v); });
    EXPECT_EQ(a, b);
    EXPECT_EQ(fast_.limiter.stats().allowed, slow_.limiter.stats().allowed);
    EXPECT_EQ(fast_.limiter.stats().denied, slow_.limiter.stats().denied);
    EXPECT_EQ(fast_.limiter.stats().invalid, slow_.limiter.stats().invalid);
  }

  config::DaemonSettings settings_;
  StatusContext status_;
  Side fast_;
  Side slow_;
};

TEST_F(FastPathTest, AnswersExactlyAsTheProtobufPath) {
  std::mt19937_64 rng(11);
  int taken = 0;
  for (int n = 0; n < 3000; ++n) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(rng() % 1000);
    v1::CheckRequest* body = request.mutable_check();
    const int checks = static_cast<int>(rng() % 4);
    for (int i = 0; i < checks; ++i) {
      v1::Check* check = body->add_checks();
      const int descriptors = static_cast<int>(rng() % 3);
      for (int d = 0; d < descriptors; ++d) {
        v1::Descriptor* descriptor = check->add_descriptors();
        descriptor->set_key(rng() % 4 == 0 ? "tier" : "user");  // duplicates are INVALID
        descriptor->set_value("u" + std::to_string(rng() % 20));
      }
      switch (rng() % 6) {
        case 0:
          check->set_cost(0);
          break;
        case 1:
          check->set_cost(rng() % 5);
          break;
        case 2:
          check->set_cost(std::uint64_t{1} << 60);  // above kMaxTokens: INVALID
          break;
        default:
          break;
      }
      if (rng() % 4 == 0) {
        v1::InlineLimit* limit = check->mutable_inline_limit();
        if (rng() % 4 != 0) limit->set_key("inline-" + std::to_string(rng() % 3));
        limit->set_limit(rng() % 3 == 0 ? 0 : rng() % 10);
        limit->set_period_ms(rng() % 5 == 0 ? 0 : 1000);
        if (rng() % 2 == 0) limit->set_burst(rng() % 10);
      }
      check->set_mode(static_cast<v1::Check::Mode>(rng() % 3));
      if (rng() % 3 == 0) {
        check->set_max_wait_us(rng() % 4 == 0 ? -1 : static_cast<std::int64_t>(rng() % 5'000'000));
      }
    }
    if (rng() % 50 == 0) request.set_version(static_cast<v1::Version>(2));
    if (rng() % 50 == 0) request.mutable_status();
    taken += both(request.SerializeAsString(), kNow + n * 1000) ? 1 : 0;
  }
  expect_same_state();
  EXPECT_GT(taken, 2500);
}

TEST_F(FastPathTest, TooManyChecksAndTooLargeAnswersMatch) {
  settings_.max_checks_per_frame = 5;
  settings_.max_response_bytes = 150;
  for (int checks : {1, 3, 5, 6, 20}) {
    v1::Request request;
    request.set_version(v1::VERSION_1);
    request.set_id(static_cast<std::uint64_t>(checks));
    for (int i = 0; i < checks; ++i) {
      v1::Descriptor* d = request.mutable_check()->add_checks()->add_descriptors();
      d->set_key("user");
      d->set_value("frank");
    }
    const bool taken = both(request.SerializeAsString(), kNow);
    EXPECT_EQ(taken, checks <= 5) << checks;
  }
  expect_same_state();
  EXPECT_EQ(fast_.counters.too_many_checks, 2u);
  EXPECT_GE(fast_.counters.responses_too_large, 1u);
}

TEST_F(FastPathTest, LeavesOtherFramesAloneAndCountsNothing) {
  Dispatcher::Outcome outcome;
  for (const std::string& payload :
       {std::string("\x0a\x7fnot protobuf"), std::string(), members_request(3).SerializeAsString()}) {
    EXPECT_FALSE(fast_.dispatcher.answer_checks(payload, kNow, fast_.response, fast_.out, outcome));
  }
  EXPECT_TRUE(fast_.out.empty());
  EXPECT_EQ(fast_.counters.frames_received, 0u);
}

}  // namespace
}  // namespace rlimit::shell
