// The daemon's life cycle: start, limits, reload, shutdown, sockets.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "fixture.h"

namespace rlimit::testing {
namespace {

const char* kPerUserHourly = R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 5
period = "1h"
)";

TEST_F(DaemonTest, LimitsHoldPerDistinctValue) {
  start(kPerUserHourly);
  Client c = client();
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += c.check(user("alice")).allowed;
  EXPECT_EQ(allowed, 5);
  const Decision denied = c.check(user("alice"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.status, DecisionStatus::kOk);
  ASSERT_EQ(denied.rules.size(), 1u);
  EXPECT_EQ(denied.rules[0].name, "per-user");
  EXPECT_EQ(denied.rules[0].limit, 5u);
  EXPECT_EQ(denied.rules[0].period_ms, 3'600'000u);
  EXPECT_EQ(denied.rules[0].remaining, 0u);
  // One token per 12 minutes.
  EXPECT_GT(denied.rules[0].retry_after_us, 700'000'000);
  EXPECT_LE(denied.rules[0].retry_after_us, 720'000'000);
  EXPECT_TRUE(c.check(user("bob")).allowed);
}

// busy_poll reaches the event loop: limits hold as before, and the poll
// windows are counted. How many checks one window catches depends on timing
// (the poll that finds a request also answers whatever arrives while it
// runs), so the count asked for is only "some": every idle moment opens a
// window, and the 100 ms sweep makes idle moments without any client.
TEST_F(DaemonTest, BusyPollingDecidesAlikeAndIsCounted) {
  config_path_ = write_config(std::string("busy_poll = \"2ms\"\n") + kPerUserHourly);
  daemon_ = std::make_unique<DaemonProcess>(
      dir_, std::vector<std::string>{"--config", config_path_, "--log-level", "debug"});
  ASSERT_TRUE(daemon_->wait_ready(socket_path())) << daemon_->log();
  Client c = client();
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += c.check(user("alice")).allowed;
  EXPECT_EQ(allowed, 5);
  EXPECT_TRUE(eventually([&] {
    return counter(c, "busy_poll_hits") > 0 && counter(c, "busy_poll_misses") > 0 &&
           counter(c, "busy_poll_cpu_us") > 0;
  })) << counter(c, "busy_poll_hits") << " hits, " << counter(c, "busy_poll_misses")
      << " misses, " << counter(c, "busy_poll_cpu_us") << " us";
}

TEST_F(DaemonTest, WithoutBusyPollingNoWindowOpens) {
  start(kPerUserHourly);
  Client c = client();
  for (int i = 0; i < 5; ++i) c.check(user("alice"));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // sweeps, idle moments
  EXPECT_EQ(counter(c, "busy_poll_hits"), 0);
  EXPECT_EQ(counter(c, "busy_poll_misses"), 0);
  EXPECT_EQ(counter(c, "busy_poll_cpu_us"), 0);
}

TEST_F(DaemonTest, ConcurrentClientsShareOneBucketExactly) {
  start(R"(
[[rule]]
name = "global"
match = {}
limit = 100
period = "1h"
)");
  constexpr int kThreads = 8;
  constexpr int kChecksPerThread = 60;
  std::vector<int> allowed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client c = client(5000);
      for (int i = 0; i < kChecksPerThread; ++i) {
        const Decision d = c.check({{"k", "v"}});
        EXPECT_EQ(d.status, DecisionStatus::kOk);
        allowed[t] += d.allowed;
      }
    });
  }
  for (auto& t : threads) t.join();
  int total = 0;
  for (int a : allowed) total += a;
  EXPECT_EQ(total, 100);
}

TEST_F(DaemonTest, MultiRuleChecksAreAllOrNothing) {
  start(R"(
[[rule]]
name = "per-second"
match = { user = { each = true } }
limit = 100
period = "1h"

[[rule]]
name = "daily"
match = { user = { each = true } }
limit = 3
period = "1d"
)");
  Client c = client();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.check(user("u")).allowed);
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(c.check(user("u")).allowed);
  const Decision d = c.check(user("u"));
  ASSERT_EQ(d.rules.size(), 2u);
  EXPECT_EQ(d.rules[0].name, "per-second");
  EXPECT_TRUE(d.rules[0].allowed);
  EXPECT_EQ(d.rules[0].remaining, 97u);  // the denied checks charged nothing
  EXPECT_FALSE(d.rules[1].allowed);
}

TEST_F(DaemonTest, TierOverrideAndExemption) {
  start(R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1h"
  [[rule.override]]
  match = { tier = "premium" }
  multiplier = 10

[[exempt]]
match = { user = "healthcheck" }
)");
  Client c = client();
  int basic = 0, premium = 0, health = 0;
  for (int i = 0; i < 30; ++i) {
    basic += c.check(user("a")).allowed;
    premium += c.check({{"user", "b"}, {"tier", "premium"}}).allowed;
    const Decision h = c.check(user("healthcheck"));
    health += h.allowed;
    EXPECT_EQ(h.status, DecisionStatus::kExempt);
  }
  EXPECT_EQ(basic, 2);
  EXPECT_EQ(premium, 20);
  EXPECT_EQ(health, 30);
}

TEST_F(DaemonTest, ReloadKeepsStateOfUnchangedRulesAndRejectsBadFiles) {
  start(kPerUserHourly);
  Client c = client();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.check(user("alice")).allowed);
  ASSERT_FALSE(c.check(user("alice")).allowed);

  // Same rule plus a new one: the spent bucket survives the reload.
  write_config(std::string(kPerUserHourly) + R"(
[[rule]]
name = "per-ip"
match = { ip = { each = true } }
limit = 1
period = "1h"
)");
  daemon_->signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return counter(c, "reloads") == 1; })) << daemon_->log();
  EXPECT_FALSE(c.check(user("alice")).allowed);
  EXPECT_TRUE(c.check({{"ip", "1.1.1.1"}}).allowed);
  EXPECT_FALSE(c.check({{"ip", "1.1.1.1"}}).allowed);

  // A broken file is rejected with its location; the old rules stay.
  write_config("[[rule]]\nname = \"x\"\nlimit = -1\nperiod = \"1s\"\nmatch = {}\n");
  daemon_->signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return counter(c, "reload_failures") == 1; })) << daemon_->log();
  EXPECT_NE(daemon_->log().find("rlimitd.toml:6:"), std::string::npos) << daemon_->log();
  EXPECT_FALSE(c.check(user("alice")).allowed);
  EXPECT_FALSE(c.check({{"ip", "1.1.1.1"}}).allowed);
  EXPECT_TRUE(c.check(user("carol")).allowed);
}

TEST_F(DaemonTest, SigtermAnswersAndRemovesSocket) {
  start(kPerUserHourly);
  Client c = client();
  ASSERT_TRUE(c.check(user("a")).allowed);
  EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
  // Fail open by default, closed when asked, with the status saying why.
  const Decision open = c.check(user("a"));
  EXPECT_TRUE(open.allowed);
  EXPECT_EQ(open.status, DecisionStatus::kUnavailable);
  Client closed = client(50, FailMode::kClosed);
  const Decision shut = closed.check(user("a"));
  EXPECT_FALSE(shut.allowed);
  EXPECT_EQ(shut.status, DecisionStatus::kUnavailable);
}

TEST_F(DaemonTest, SigintAlsoStopsCleanly) {
  start(kPerUserHourly);
  // An answer first: the event loop runs. Under TSan (g++ 12's libtsan), a
  // signal sent in the instant between listen() and the loop's first turn
  // was lost about once in 50 runs on a loaded machine (the Release build:
  // none in 150); what this test checks is the stop, not that instant.
  ASSERT_TRUE(client().check(user("a")).allowed);
  EXPECT_EQ(daemon_->stop(SIGINT), 0) << daemon_->log();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
}

TEST_F(DaemonTest, ClientReconnectsAfterRestart) {
  start(kPerUserHourly);
  Client c = client(500);
  ASSERT_EQ(c.check(user("a")).status, DecisionStatus::kOk);
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);
  EXPECT_EQ(c.check(user("a")).status, DecisionStatus::kUnavailable);
  daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config_path_},
                                            "rlimitd2.log");
  ASSERT_TRUE(daemon_->wait_ready(socket_path())) << daemon_->log();
  EXPECT_TRUE(eventually([&] { return c.check(user("a")).status == DecisionStatus::kOk; },
                         std::chrono::seconds(5)));
}

TEST_F(DaemonTest, StaleSocketIsReplacedLiveOneIsNot) {
  // A socket file nobody listens on, as a crashed daemon leaves behind.
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path().c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  ASSERT_TRUE(std::filesystem::exists(socket_path()));
  start(kPerUserHourly);
  Client c = client();
  EXPECT_EQ(c.check(user("a")).status, DecisionStatus::kOk);

  struct stat st {};
  ASSERT_EQ(::stat(socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  DaemonProcess second(dir_, {"--config", config_path_}, "second.log");
  const auto code = second.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(second.log().find("another rlimitd"), std::string::npos) << second.log();
  // The first daemon is untouched.
  EXPECT_EQ(c.check(user("a")).status, DecisionStatus::kOk);
}

TEST_F(DaemonTest, CheckConfigReportsLocationAndExitCode) {
  const std::string good = write_config(kPerUserHourly, "good.toml");
  RunResult ok = run_program({program_path("rlimitd"), "--check-config", "--config", good});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;

  const std::string bad =
      dir_.write("bad.toml", "[[rule]]\nname = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"5x\"\n");
  RunResult result = run_program({program_path("rlimitd"), "--check-config", "--config", bad});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("bad.toml:5:"), std::string::npos) << result.output;

  // Starting on a bad file fails the same way instead of running.
  RunResult start_bad = run_program({program_path("rlimitd"), "--config", bad});
  EXPECT_EQ(start_bad.exit_code, 2) << start_bad.output;
}

TEST_F(DaemonTest, RunsOnBuiltInDefaultsWithoutConfig) {
  daemon_ = std::make_unique<DaemonProcess>(
      dir_, std::vector<std::string>{"--socket", socket_path(), "--node-id", "solo"});
  ASSERT_TRUE(daemon_->wait_ready(socket_path())) << daemon_->log();
  Client c = client();
  auto status = c.status();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->node_id, "solo");
  ASSERT_EQ(status->rules.size(), 1u);
  EXPECT_EQ(status->config_source, "<built-in>");
  int allowed = 0;
  for (int i = 0; i < 40; ++i) allowed += c.check(user("x")).allowed;
  EXPECT_GE(allowed, 20);  // burst 20 at 10/s: a few more may refill meanwhile
  EXPECT_LT(allowed, 40);
}

}  // namespace
}  // namespace rlimit::testing
