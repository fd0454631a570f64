// libclient against the real daemon: pipelining, batches, inline limits,
// status, timeouts.
#include <signal.h>

#include "fixture.h"
#include "rlimit/retry.h"

namespace rlimit::testing {
namespace {

const char* kShared = R"(
[[rule]]
name = "shared"
match = { path = { prefix = "/api/" } }
limit = 50
period = "1h"
)";

TEST_F(DaemonTest, PipelinedChecksFromOneThread) {
  start(kShared);
  Client c = client(5000);
  CheckRequest request;
  request.descriptors = {{"path", "/api/items"}};
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 200; ++i) tickets.push_back(c.submit(request));
  EXPECT_EQ(c.pending(), 200u);
  int allowed = 0;
  for (int i = 0; i < 200; ++i) {
    auto [ticket, decision] = c.receive();
    EXPECT_EQ(ticket, tickets[static_cast<std::size_t>(i)]);
    EXPECT_EQ(decision.status, DecisionStatus::kOk);
    allowed += decision.allowed;
    // Order is kept: the first 50 pass, the rest do not.
    EXPECT_EQ(decision.allowed, i < 50) << i;
  }
  EXPECT_EQ(allowed, 50);
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(DaemonTest, BatchIsDecidedInOrderInOneFrame) {
  start(kShared);
  Client c = client();
  std::vector<CheckRequest> batch(60);
  for (auto& r : batch) r.descriptors = {{"path", "/api/x"}};
  batch[10].cost = 0;  // a peek
  const std::vector<Decision> decisions = c.check_batch(batch);
  ASSERT_EQ(decisions.size(), 60u);
  int allowed = 0;
  for (const Decision& d : decisions) allowed += d.allowed;
  EXPECT_EQ(allowed, 51);  // 50 tokens + one zero-cost check
  EXPECT_TRUE(decisions[10].allowed);
  EXPECT_FALSE(decisions[59].allowed);
}

TEST_F(DaemonTest, InlineLimitWithoutARule) {
  start(kShared);
  Client c = client();
  CheckRequest request;
  request.descriptors = {{"job", "export"}};
  request.inline_limit = InlineLimit{"export-jobs", 3, 60'000, 3};
  int allowed = 0;
  for (int i = 0; i < 10; ++i) {
    const Decision d = c.check(request);
    allowed += d.allowed;
    ASSERT_EQ(d.rules.size(), 1u);
    EXPECT_EQ(d.rules[0].name, "export-jobs");
  }
  EXPECT_EQ(allowed, 3);
}

TEST_F(DaemonTest, CostLargerThanBurstIsNeverAllowed) {
  start(kShared);
  Client c = client();
  const Decision d = c.check({{"path", "/api/bulk"}}, 51);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_us(), -1);
  // The retry helper gives up at once on "never".
  Backoff backoff(RetryPolicy{}, 1);
  CheckRequest request;
  request.descriptors = {{"path", "/api/bulk"}};
  request.cost = 51;
  int sleeps = 0;
  const Decision last = check_with_retry(c, request, backoff, [&](auto) { ++sleeps; });
  EXPECT_FALSE(last.allowed);
  EXPECT_EQ(sleeps, 0);
}

TEST_F(DaemonTest, StatusReportsRulesKeysAndCounters) {
  start(kShared);
  Client c = client();
  for (int i = 0; i < 3; ++i) c.check({{"path", "/api/a"}});
  auto status = c.status();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->node_id, "test");
  EXPECT_EQ(status->keys, 1u);
  ASSERT_EQ(status->rules.size(), 1u);
  EXPECT_EQ(status->rules[0].name, "shared");
  EXPECT_EQ(status->rules[0].limit, 50u);
  EXPECT_EQ(status->rules[0].period_ms, 3'600'000u);
  EXPECT_EQ(counter(c, "checks"), 3);
  EXPECT_EQ(counter(c, "allowed"), 3);
}

TEST_F(DaemonTest, StalledDaemonTimesOutAndFailsOpen) {
  start(kShared);
  Client c = client(100);
  ASSERT_EQ(c.check({{"path", "/api/a"}}).status, DecisionStatus::kOk);
  daemon_->signal(SIGSTOP);
  const auto before = std::chrono::steady_clock::now();
  const Decision d = c.check({{"path", "/api/a"}});
  const auto waited = std::chrono::steady_clock::now() - before;
  daemon_->signal(SIGCONT);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.status, DecisionStatus::kUnavailable);
  EXPECT_LT(waited, std::chrono::seconds(2));
  // Once the daemon runs again, the client recovers on its own.
  EXPECT_TRUE(eventually(
      [&] { return c.check({{"path", "/api/a"}}).status == DecisionStatus::kOk; }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace rlimit::testing
