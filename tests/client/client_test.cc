// rlimit::Client against an in-process fake daemon: decisions, errors,
// timeouts and fail modes, reconnection, batching, pipelining and status.
#include "rlimit/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fake_server.h"

namespace rlimit {
namespace {

using testing::FakeServer;
using Action = FakeServer::Action;
using Clock = std::chrono::steady_clock;

ClientOptions options_for(const FakeServer& server, std::uint32_t timeout_ms = 1000) {
  ClientOptions options;
  options.socket_path = server.socket_path();
  options.timeout_ms = timeout_ms;
  return options;
}

// Marks each answer with its request's id, so a test can tell whose it is.
Action echo_id(const v1::Request& request, v1::Response& response) {
  for (int i = 0; i < request.check().checks_size(); ++i) {
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(true);
    v1::RuleResult* rule = result->add_rules();
    rule->set_name("echo");
    rule->set_allowed(true);
    rule->set_remaining(request.id());
  }
  return Action::kReply;
}

const std::vector<Descriptor> kAlice = {{"user", "alice"}};

CheckRequest alice_request() {
  CheckRequest request;
  request.descriptors = kAlice;
  return request;
}

TEST(ClientTest, AllowedDecisionCarriesRules) {
  FakeServer server([](const v1::Request& request, v1::Response& response) {
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(true);
    result->set_status(v1::CheckResult::OK);
    v1::RuleResult* rule = result->add_rules();
    rule->set_name("per-user");
    rule->set_allowed(true);
    rule->set_limit(10);
    rule->set_period_ms(1000);
    rule->set_burst(20);
    rule->set_remaining(19);
    rule->set_reset_after_us(100'000);
    return Action::kReply;
  });
  Client client(options_for(server));
  EXPECT_FALSE(client.connected());  // lazy

  const Decision d = client.check(kAlice);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.status, DecisionStatus::kOk);
  EXPECT_TRUE(client.connected());
  ASSERT_EQ(d.rules.size(), 1u);
  EXPECT_EQ(d.rules[0].name, "per-user");
  EXPECT_EQ(d.rules[0].limit, 10u);
  EXPECT_EQ(d.rules[0].period_ms, 1000u);
  EXPECT_EQ(d.rules[0].burst, 20u);
  EXPECT_EQ(d.rules[0].remaining, 19u);
  EXPECT_EQ(d.rules[0].reset_after_us, 100'000);
  EXPECT_EQ(d.retry_after_us(), 0);
}

TEST(ClientTest, RequestsCarryVersionIncreasingIdsAndDescriptors) {
  FakeServer server;
  Client client(options_for(server));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(client.check(kAlice).allowed);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].version(), v1::VERSION_1);
    if (i > 0) {
      EXPECT_GT(requests[i].id(), requests[i - 1].id());
    }
    ASSERT_TRUE(requests[i].has_check());
    ASSERT_EQ(requests[i].check().checks_size(), 1);
    const v1::Check& check = requests[i].check().checks(0);
    ASSERT_EQ(check.descriptors_size(), 1);
    EXPECT_EQ(check.descriptors(0).key(), "user");
    EXPECT_EQ(check.descriptors(0).value(), "alice");
    EXPECT_FALSE(check.has_cost());  // 1 is the wire default
    EXPECT_FALSE(check.has_inline_limit());
  }
  EXPECT_EQ(server.connections(), 1);  // one connection reused
}

TEST(ClientTest, CostAndInlineLimitAreSent) {
  FakeServer server;
  Client client(options_for(server));
  CheckRequest request;
  request.descriptors = kAlice;
  request.cost = 0;
  EXPECT_TRUE(client.check(request).allowed);
  request.cost = 5;
  request.inline_limit = InlineLimit{"tenant:42", 100, 60'000, 150};
  EXPECT_TRUE(client.check(request).allowed);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  const v1::Check& zero = requests[0].check().checks(0);
  EXPECT_TRUE(zero.has_cost());
  EXPECT_EQ(zero.cost(), 0u);
  const v1::Check& five = requests[1].check().checks(0);
  EXPECT_EQ(five.cost(), 5u);
  ASSERT_TRUE(five.has_inline_limit());
  EXPECT_EQ(five.inline_limit().key(), "tenant:42");
  EXPECT_EQ(five.inline_limit().limit(), 100u);
  EXPECT_EQ(five.inline_limit().period_ms(), 60'000u);
  EXPECT_EQ(five.inline_limit().burst(), 150u);
}

TEST(ClientTest, DeniedDecisionReportsLongestRetryAfter) {
  FakeServer server([](const v1::Request&, v1::Response& response) {
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(false);
    for (auto [name, allowed, retry] :
         {std::tuple{"a", true, 0}, std::tuple{"b", false, 1500}, std::tuple{"c", false, 700}}) {
      v1::RuleResult* rule = result->add_rules();
      rule->set_name(name);
      rule->set_allowed(allowed);
      rule->set_retry_after_us(retry);
    }
    return Action::kReply;
  });
  Client client(options_for(server));
  const Decision d = client.check(kAlice);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.status, DecisionStatus::kOk);
  ASSERT_EQ(d.rules.size(), 3u);
  EXPECT_EQ(d.retry_after_us(), 1500);
}

TEST(ClientTest, RetryAfterIsMinusOneWhenARuleNeverAllows) {
  Decision d;
  d.allowed = false;
  d.rules = {{"a", false, 1, 1000, 1, 0, 900, 0, "token_bucket", 0, "", false},
             {"b", false, 1, 1000, 1, 0, -1, 0, "token_bucket", 0, "", false}};
  EXPECT_EQ(d.retry_after_us(), -1);
  d.allowed = true;
  EXPECT_EQ(d.retry_after_us(), 0);
}

TEST(ClientTest, StatusesMapFromTheWire) {
  std::atomic<int> which{0};
  FakeServer server([&](const v1::Request&, v1::Response& response) {
    v1::CheckResult* result = response.mutable_check()->add_results();
    switch (which.load()) {
      case 0:
        result->set_allowed(true);
        result->set_status(v1::CheckResult::EXEMPT);
        break;
      case 1:
        result->set_allowed(false);
        result->set_status(v1::CheckResult::INVALID);
        result->set_error("too many descriptors");
        break;
      default:
        result->set_allowed(true);
        result->set_status(v1::CheckResult::KEY_TABLE_FULL);
        break;
    }
    return Action::kReply;
  });
  Client client(options_for(server));
  which = 0;
  Decision d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kExempt);
  EXPECT_TRUE(d.allowed);
  which = 1;
  d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kInvalid);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.error, "too many descriptors");
  which = 2;
  d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kKeyTableFull);
  EXPECT_TRUE(d.allowed);
}

TEST(ClientTest, ErrorReplyIsProtocolErrorByFailMode) {
  FakeServer server([](const v1::Request&, v1::Response& response) {
    response.mutable_error()->set_code(v1::Error::UNSUPPORTED_VERSION);
    response.mutable_error()->set_message("speaks version 1 only");
    return Action::kReply;
  });
  for (FailMode mode : {FailMode::kOpen, FailMode::kClosed}) {
    ClientOptions options = options_for(server);
    options.fail_mode = mode;
    Client client(options);
    const Decision d = client.check(kAlice);
    EXPECT_EQ(d.status, DecisionStatus::kProtocolError);
    EXPECT_EQ(d.allowed, mode == FailMode::kOpen);
    EXPECT_NE(d.error.find("UNSUPPORTED_VERSION"), std::string::npos) << d.error;
    EXPECT_NE(d.error.find("speaks version 1 only"), std::string::npos) << d.error;
    // An error for one request does not condemn the connection.
    EXPECT_TRUE(client.connected());
  }
}

TEST(ClientTest, TimeoutFailsOpenOrClosed) {
  FakeServer server([](const v1::Request&, v1::Response&) { return Action::kIgnore; });
  for (FailMode mode : {FailMode::kOpen, FailMode::kClosed}) {
    ClientOptions options = options_for(server, 50);
    options.fail_mode = mode;
    Client client(options);
    const auto start = Clock::now();
    const Decision d = client.check(kAlice);
    const auto elapsed = Clock::now() - start;
    EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
    EXPECT_EQ(d.allowed, mode == FailMode::kOpen);
    EXPECT_NE(d.error.find("50 ms"), std::string::npos) << d.error;
    EXPECT_GE(elapsed, std::chrono::milliseconds(45));
    EXPECT_LT(elapsed, std::chrono::seconds(2));
    EXPECT_FALSE(client.connected());  // closed, so a late reply cannot be misread
  }
}

TEST(ClientTest, LateReplyIsNeverTakenForALaterAnswer) {
  std::atomic<bool> first{true};
  FakeServer server([&](const v1::Request& request, v1::Response& response) {
    if (first.exchange(false)) {
      // Answer the first request long after the client gave up on it.
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    return echo_id(request, response);
  });
  Client client(options_for(server, 50));
  const Decision late = client.check(kAlice);
  EXPECT_EQ(late.status, DecisionStatus::kUnavailable);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  const Decision next = client.check(kAlice);
  ASSERT_EQ(next.status, DecisionStatus::kOk) << next.error;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(next.rules.size(), 1u);
  EXPECT_EQ(next.rules[0].remaining, requests[1].id());
}

TEST(ClientTest, ClosedConnectionIsUnavailableThenReconnects) {
  std::atomic<bool> first{true};
  FakeServer server([&](const v1::Request& request, v1::Response& response) {
    if (first.exchange(false)) return Action::kClose;
    return FakeServer::allow_all(request, response);
  });
  ClientOptions options = options_for(server);
  options.fail_mode = FailMode::kClosed;
  Client client(options);
  const Decision d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.error.find("closed"), std::string::npos) << d.error;
  EXPECT_FALSE(client.connected());

  const Decision again = client.check(kAlice);
  EXPECT_EQ(again.status, DecisionStatus::kOk) << again.error;
  EXPECT_TRUE(again.allowed);
  EXPECT_EQ(server.connections(), 2);
}

TEST(ClientTest, IdleConnectionClosedByDaemonIsReplacedWithoutFailing) {
  FakeServer server([](const v1::Request& request, v1::Response& response) {
    FakeServer::allow_all(request, response);
    return Action::kReplyThenClose;  // e.g. a daemon restarting between calls
  });
  Client client(options_for(server));
  EXPECT_EQ(client.check(kAlice).status, DecisionStatus::kOk);
  // Let the close reach the client's socket.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Decision d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kOk) << d.error;
  EXPECT_EQ(server.connections(), 2);
}

TEST(ClientTest, ConnectionClosedJustAfterAReplyIsReplacedWithoutFailing) {
  // Too soon for the idle probe: send() meets the closed peer (EPIPE) before
  // anything was sent, and the client sends again on a new connection.
  FakeServer server([](const v1::Request& request, v1::Response& response) {
    FakeServer::allow_all(request, response);
    return Action::kReplyThenClose;
  });
  Client client(options_for(server));
  for (int i = 0; i < 5; ++i) {
    const Decision d = client.check(kAlice);
    EXPECT_EQ(d.status, DecisionStatus::kOk) << i << ": " << d.error;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server.connections(), 5);
}

TEST(ClientTest, NoDaemonFailsOpenByDefaultAndClosedWhenAsked) {
  FakeServer server;  // only for its temporary directory
  ClientOptions options;
  options.socket_path = server.missing_socket_path();
  Client open_client(options);
  Decision d = open_client.check(kAlice);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
  EXPECT_FALSE(d.error.empty());

  options.fail_mode = FailMode::kClosed;
  Client closed_client(options);
  d = closed_client.check(kAlice);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
}

TEST(ClientTest, FailedConnectBacksOffThenReconnects) {
  FakeServer server;
  ClientOptions options;
  options.socket_path = server.missing_socket_path();
  options.timeout_ms = 1000;
  options.reconnect_backoff_min_ms = 300;
  options.reconnect_backoff_max_ms = 1000;
  Client client(options);

  EXPECT_EQ(client.check(kAlice).status, DecisionStatus::kUnavailable);
  // Make the socket appear where the client looks: a hard link to the live one.
  ASSERT_EQ(::link(server.socket_path().c_str(), options.socket_path.c_str()), 0);

  // Within the backoff: fails fast, without trying to connect.
  const auto start = Clock::now();
  const Decision fast = client.check(kAlice);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(fast.status, DecisionStatus::kUnavailable);
  EXPECT_NE(fast.error.find("waiting to reconnect"), std::string::npos) << fast.error;
  EXPECT_EQ(server.connections(), 0);

  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const Decision d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kOk) << d.error;
  EXPECT_EQ(server.connections(), 1);
  ::unlink(options.socket_path.c_str());
}

TEST(ClientTest, WrongReplyIdIsProtocolErrorAndRecovers) {
  std::atomic<bool> first{true};
  FakeServer server([&](const v1::Request& request, v1::Response& response) {
    FakeServer::allow_all(request, response);
    if (first.exchange(false)) response.set_id(request.id() + 1000);
    return Action::kReply;
  });
  Client client(options_for(server));
  const Decision d = client.check(kAlice);
  EXPECT_EQ(d.status, DecisionStatus::kProtocolError);
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.check(kAlice).status, DecisionStatus::kOk);
}

TEST(ClientTest, OversizedRequestIsRejectedWithoutSending) {
  FakeServer server;
  ClientOptions options = options_for(server);
  options.max_frame_bytes = 64;
  Client client(options);
  const Decision d = client.check({{"user", std::string(200, 'x')}});
  EXPECT_EQ(d.status, DecisionStatus::kProtocolError);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(server.frames(), 0u);
  EXPECT_EQ(client.check(kAlice).status, DecisionStatus::kOk);
}

TEST(ClientTest, BatchSendsOneFrameAndKeepsOrder) {
  FakeServer server([](const v1::Request& request, v1::Response& response) {
    for (const v1::Check& check : request.check().checks()) {
      v1::CheckResult* result = response.mutable_check()->add_results();
      result->set_allowed(check.descriptors(0).value() != "mallory");
      result->add_rules()->set_name(check.descriptors(0).value());
    }
    return Action::kReply;
  });
  Client client(options_for(server));
  std::vector<CheckRequest> batch(3);
  batch[0].descriptors = {{"user", "alice"}};
  batch[1].descriptors = {{"user", "mallory"}};
  batch[2].descriptors = {{"user", "bob"}};
  const std::vector<Decision> decisions = client.check_batch(batch);
  ASSERT_EQ(decisions.size(), 3u);
  EXPECT_TRUE(decisions[0].allowed);
  EXPECT_FALSE(decisions[1].allowed);
  EXPECT_TRUE(decisions[2].allowed);
  EXPECT_EQ(decisions[1].rules.at(0).name, "mallory");
  EXPECT_EQ(decisions[2].rules.at(0).name, "bob");
  EXPECT_EQ(server.frames(), 1u);
  EXPECT_TRUE(client.check_batch({}).empty());
}

TEST(ClientTest, BatchWithWrongResultCountIsProtocolError) {
  FakeServer server([](const v1::Request&, v1::Response& response) {
    response.mutable_check()->add_results()->set_allowed(true);
    return Action::kReply;
  });
  ClientOptions options = options_for(server);
  options.fail_mode = FailMode::kClosed;
  Client client(options);
  const std::vector<CheckRequest> batch(2, alice_request());
  const auto decisions = client.check_batch(batch);
  ASSERT_EQ(decisions.size(), 2u);
  for (const Decision& d : decisions) {
    EXPECT_EQ(d.status, DecisionStatus::kProtocolError);
    EXPECT_FALSE(d.allowed);
  }
}

TEST(ClientTest, PipelinedHundredInFlightComeBackInOrder) {
  FakeServer server(echo_id);
  Client client(options_for(server));
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 100; ++i) tickets.push_back(client.submit(alice_request()));
  EXPECT_EQ(client.pending(), 100u);
  for (std::size_t i = 0; i < tickets.size(); ++i) {
    EXPECT_NE(tickets[i], 0u);
    if (i > 0) {
      EXPECT_GT(tickets[i], tickets[i - 1]);
    }
  }
  for (int i = 0; i < 100; ++i) {
    auto [ticket, decision] = client.receive();
    ASSERT_EQ(ticket, tickets[static_cast<std::size_t>(i)]);
    ASSERT_EQ(decision.status, DecisionStatus::kOk) << decision.error;
    ASSERT_EQ(decision.rules.size(), 1u);
    EXPECT_EQ(decision.rules[0].remaining, ticket);  // the daemon's answer to this very request
  }
  EXPECT_EQ(client.pending(), 0u);
  EXPECT_EQ(server.frames(), 100u);
  EXPECT_EQ(server.connections(), 1);

  const auto [ticket, nothing] = client.receive();
  EXPECT_EQ(ticket, 0u);
  EXPECT_EQ(nothing.status, DecisionStatus::kInvalid);
}

TEST(ClientTest, SubmitsBeyondMaxPendingAreAnsweredAtOnceAndNotSent) {
  FakeServer server(echo_id);
  ClientOptions options = options_for(server);
  options.max_pending = 3;
  options.fail_mode = FailMode::kClosed;
  Client client(options);
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 5; ++i) tickets.push_back(client.submit(alice_request()));
  EXPECT_EQ(client.pending(), 5u);
  for (int i = 0; i < 5; ++i) {
    auto [ticket, decision] = client.receive();
    ASSERT_EQ(ticket, tickets[static_cast<std::size_t>(i)]);
    if (i < 3) {
      EXPECT_EQ(decision.status, DecisionStatus::kOk) << decision.error;
    } else {
      EXPECT_EQ(decision.status, DecisionStatus::kUnavailable);
      EXPECT_FALSE(decision.allowed);  // fail closed
      EXPECT_NE(decision.error.find("max_pending (3)"), std::string::npos) << decision.error;
    }
  }
  EXPECT_EQ(server.frames(), 3u);
  EXPECT_EQ(client.refused_over_max_pending(), 2u);
  // With the tickets received there is room again.
  const std::uint64_t again = client.submit(alice_request());
  EXPECT_EQ(client.receive().first, again);
}

TEST(ClientTest, SyncCallBetweenSubmitsKeepsTicketAnswers) {
  FakeServer server(echo_id);
  Client client(options_for(server));
  const std::uint64_t a = client.submit(alice_request());
  const std::uint64_t b = client.submit(alice_request());
  const Decision sync = client.check(kAlice);
  ASSERT_EQ(sync.status, DecisionStatus::kOk);
  EXPECT_GT(sync.rules.at(0).remaining, b);
  EXPECT_EQ(client.pending(), 2u);
  auto [ta, da] = client.receive();
  auto [tb, db] = client.receive();
  EXPECT_EQ(ta, a);
  EXPECT_EQ(da.rules.at(0).remaining, a);
  EXPECT_EQ(tb, b);
  EXPECT_EQ(db.rules.at(0).remaining, b);
}

TEST(ClientTest, LargePipelineAutoFlushesAndCompletes) {
  FakeServer server(echo_id);
  Client client(options_for(server, 5000));
  CheckRequest request;
  request.descriptors = {{"user", std::string(500, 'u')}, {"path", "/api/items"}};
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 400; ++i) tickets.push_back(client.submit(request));  // ~200 KiB
  EXPECT_GT(server.connections() + static_cast<int>(client.connected()), 0);
  for (std::uint64_t expected : tickets) {
    auto [ticket, d] = client.receive();
    ASSERT_EQ(ticket, expected);
    ASSERT_EQ(d.status, DecisionStatus::kOk) << d.error;
    ASSERT_EQ(d.rules.at(0).remaining, ticket);
  }
}

TEST(ClientTest, PipelineFailureAnswersEveryTicketInOrder) {
  FakeServer server([](const v1::Request&, v1::Response&) { return Action::kClose; });
  ClientOptions options = options_for(server);
  options.fail_mode = FailMode::kClosed;
  Client client(options);
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 5; ++i) tickets.push_back(client.submit(alice_request()));
  client.flush();
  for (std::uint64_t expected : tickets) {
    auto [ticket, d] = client.receive();
    EXPECT_EQ(ticket, expected);
    EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
    EXPECT_FALSE(d.allowed);
  }
  EXPECT_EQ(client.pending(), 0u);
}

TEST(ClientTest, PipelineTimeoutFailsOpen) {
  FakeServer server([](const v1::Request&, v1::Response&) { return Action::kIgnore; });
  Client client(options_for(server, 50));
  const std::uint64_t t1 = client.submit(alice_request());
  const std::uint64_t t2 = client.submit(alice_request());
  auto [a, da] = client.receive();
  auto [b, db] = client.receive();
  EXPECT_EQ(a, t1);
  EXPECT_EQ(b, t2);
  EXPECT_EQ(da.status, DecisionStatus::kUnavailable);
  EXPECT_TRUE(da.allowed);
  EXPECT_EQ(db.status, DecisionStatus::kUnavailable);
}

TEST(ClientTest, StatusIsDecoded) {
  FakeServer server([](const v1::Request& request, v1::Response& response) {
    if (!request.has_status()) return Action::kClose;
    v1::StatusResponse* s = response.mutable_status();
    s->set_node_id("node-a");
    s->set_version("0.1.0");
    s->set_uptime_ms(12345);
    s->set_keys(7);
    s->set_max_keys(1000);
    s->set_config_source("/etc/rlimitd.toml");
    v1::RuleInfo* rule = s->add_rules();
    rule->set_name("per-user");
    rule->set_algorithm("token_bucket");
    rule->set_limit(10);
    rule->set_period_ms(1000);
    rule->set_burst(20);
    rule->set_match("user=* (each)");
    rule->set_overrides(1);
    v1::Counter* counter = s->add_counters();
    counter->set_name("checks");
    counter->set_value(99);
    return Action::kReply;
  });
  Client client(options_for(server));
  std::string error = "stale";
  const auto status = client.status(&error);
  ASSERT_TRUE(status.has_value()) << error;
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(status->node_id, "node-a");
  EXPECT_EQ(status->version, "0.1.0");
  EXPECT_EQ(status->uptime_ms, 12345u);
  EXPECT_EQ(status->keys, 7u);
  EXPECT_EQ(status->max_keys, 1000u);
  EXPECT_EQ(status->config_source, "/etc/rlimitd.toml");
  ASSERT_EQ(status->rules.size(), 1u);
  EXPECT_EQ(status->rules[0].name, "per-user");
  EXPECT_EQ(status->rules[0].algorithm, "token_bucket");
  EXPECT_EQ(status->rules[0].burst, 20u);
  EXPECT_EQ(status->rules[0].match, "user=* (each)");
  EXPECT_EQ(status->rules[0].overrides, 1u);
  ASSERT_EQ(status->counters.size(), 1u);
  EXPECT_EQ(status->counters[0].first, "checks");
  EXPECT_EQ(status->counters[0].second, 99u);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_TRUE(server.requests()[0].has_status());
}

TEST(ClientTest, StatusUnavailableSaysWhy) {
  FakeServer server;
  ClientOptions options;
  options.socket_path = server.missing_socket_path();
  Client client(options);
  std::string error;
  EXPECT_FALSE(client.status(&error).has_value());
  EXPECT_FALSE(error.empty());
}

// A daemon in a gossip cluster of three: itself, a suspect and one never heard.
Action three_members(const v1::Request& request, v1::Response& response) {
  if (!request.has_members()) return FakeServer::allow_all(request, response);
  v1::MembersResponse* m = response.mutable_members();
  m->set_cluster("prod");
  m->set_mode("gossip");
  v1::MemberInfo* self = m->add_members();
  self->set_node_id("node-a");
  self->set_address("10.0.0.1:7946");
  self->set_state("alive");
  self->set_incarnation(3);
  self->set_seq(41);
  self->set_last_heard_ms_ago(0);
  self->set_self(true);
  v1::MemberInfo* suspect = m->add_members();
  suspect->set_node_id("node-b");
  suspect->set_address("[fd00::2]:7946");
  suspect->set_state("suspect");
  suspect->set_incarnation(7);
  suspect->set_seq(std::uint64_t{1} << 40);
  suspect->set_last_heard_ms_ago(1'500);
  v1::MemberInfo* unheard = m->add_members();
  unheard->set_node_id("node-c");
  unheard->set_address("node-c.internal:7946");
  unheard->set_state("alive");
  unheard->set_last_heard_ms_ago(-1);
  return Action::kReply;
}

TEST(ClientTest, MembersAreDecoded) {
  FakeServer server(three_members);
  Client client(options_for(server));
  std::string error = "stale";
  const auto members = client.members(&error);
  ASSERT_TRUE(members.has_value()) << error;
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(members->cluster, "prod");
  EXPECT_EQ(members->mode, "gossip");
  ASSERT_EQ(members->members.size(), 3u);
  const ClusterMember& a = members->members[0];
  EXPECT_EQ(a.node_id, "node-a");
  EXPECT_EQ(a.address, "10.0.0.1:7946");
  EXPECT_EQ(a.state, "alive");
  EXPECT_EQ(a.incarnation, 3u);
  EXPECT_EQ(a.seq, 41u);
  EXPECT_EQ(a.last_heard_ms_ago, 0);
  EXPECT_TRUE(a.self);
  const ClusterMember& b = members->members[1];
  EXPECT_EQ(b.node_id, "node-b");
  EXPECT_EQ(b.address, "[fd00::2]:7946");
  EXPECT_EQ(b.state, "suspect");
  EXPECT_EQ(b.incarnation, 7u);
  EXPECT_EQ(b.seq, std::uint64_t{1} << 40);
  EXPECT_EQ(b.last_heard_ms_ago, 1'500);
  EXPECT_FALSE(b.self);
  EXPECT_EQ(members->members[2].last_heard_ms_ago, -1);
  EXPECT_EQ(members->members[2].incarnation, 0u);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].has_members());
  EXPECT_EQ(requests[0].version(), v1::VERSION_1);

  // The connection carries on with checks afterwards.
  EXPECT_EQ(client.check(kAlice).status, DecisionStatus::kOk);
  EXPECT_EQ(server.connections(), 1);
}

TEST(ClientTest, MembersOfASingleNode) {
  FakeServer server([](const v1::Request&, v1::Response& response) {
    response.mutable_members()->set_mode("none");
    return Action::kReply;
  });
  Client client(options_for(server));
  const auto members = client.members();
  ASSERT_TRUE(members.has_value());
  EXPECT_EQ(members->cluster, "");
  EXPECT_EQ(members->mode, "none");
  EXPECT_TRUE(members->members.empty());
}

TEST(ClientTest, MembersFailuresSayWhy) {
  {
    // A daemon that predates the request.
    FakeServer server([](const v1::Request&, v1::Response& response) {
      response.mutable_error()->set_code(v1::Error::UNKNOWN_MESSAGE_TYPE);
      response.mutable_error()->set_message("no body");
      return Action::kReply;
    });
    Client client(options_for(server));
    std::string error;
    EXPECT_FALSE(client.members(&error).has_value());
    EXPECT_NE(error.find("UNKNOWN_MESSAGE_TYPE"), std::string::npos) << error;
  }
  {
    FakeServer server([](const v1::Request&, v1::Response& response) {
      response.mutable_status();
      return Action::kReply;
    });
    Client client(options_for(server));
    std::string error;
    EXPECT_FALSE(client.members(&error).has_value());
    EXPECT_NE(error.find("carries no members"), std::string::npos) << error;
  }
  {
    FakeServer server;
    ClientOptions options;
    options.socket_path = server.missing_socket_path();
    Client client(options);
    std::string error;
    EXPECT_FALSE(client.members(&error).has_value());
    EXPECT_FALSE(error.empty());
    EXPECT_FALSE(client.members().has_value());  // error is optional
  }
}

TEST(ClientTest, MovedClientKeepsItsConnection) {
  FakeServer server;
  Client a(options_for(server));
  EXPECT_TRUE(a.check(kAlice).allowed);
  Client b(std::move(a));
  EXPECT_TRUE(b.connected());
  EXPECT_EQ(b.check(kAlice).status, DecisionStatus::kOk);
  EXPECT_EQ(server.connections(), 1);
}

TEST(ClientTest, LiteralDescriptorsCompileAndArrive) {
  FakeServer server;
  Client client(options_for(server));
  // One literal descriptor: would be ambiguous without the initializer_list overload.
  EXPECT_EQ(client.check({{"user", "alice"}}).status, DecisionStatus::kOk);
  EXPECT_EQ(client.check({{"user", "alice"}, {"path", "/x"}}, 2).status, DecisionStatus::kOk);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(requests[0].check().checks(0).descriptors_size(), 1);
  EXPECT_EQ(requests[0].check().checks(0).descriptors(0).value(), "alice");
  EXPECT_EQ(requests[1].check().checks(0).descriptors_size(), 2);
  EXPECT_EQ(requests[1].check().checks(0).cost(), 2u);
}

TEST(ClientTest, StatusNames) {
  EXPECT_STREQ(to_string(DecisionStatus::kOk), "ok");
  EXPECT_STREQ(to_string(DecisionStatus::kExempt), "exempt");
  EXPECT_STREQ(to_string(DecisionStatus::kInvalid), "invalid");
  EXPECT_STREQ(to_string(DecisionStatus::kKeyTableFull), "key_table_full");
  EXPECT_STREQ(to_string(DecisionStatus::kUnavailable), "unavailable");
  EXPECT_STREQ(to_string(DecisionStatus::kProtocolError), "protocol_error");
}

}  // namespace
}  // namespace rlimit
