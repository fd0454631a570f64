// The algorithms through the protocol, against the real daemon: leases of a
// concurrency rule released by the client, a shaper's delays, reserve on a
// token bucket, peek, reset (and reset refused), the C ABI's equivalents and
// the rlimitctl verbs. Timings are never asserted tightly (shared machine).
#include <chrono>

#include "fixture.h"
#include "rlimit/rlimit.h"

namespace rlimit::testing {
namespace {

const char* kRules = R"(
[[rule]]
name = "slots"
match = { job = { each = true } }
algorithm = "concurrency"
limit = 1
lease_ttl = "1h"

[[rule]]
name = "shaped"
match = { stream = { each = true } }
algorithm = "leaky_bucket"
shaper = true
limit = 10
period = "1s"
burst = 20

[[rule]]
name = "bucket"
match = { user = { each = true } }
limit = 2
period = "1h"
)";

CheckRequest request_of(std::string key, std::string value) {
  CheckRequest request;
  request.descriptors = {{std::move(key), std::move(value)}};
  return request;
}

TEST_F(DaemonTest, ConcurrencyLeaseIsReleasedByTheClient) {
  start(kRules);
  Client c = client();
  const Decision first = c.check(request_of("job", "build"));
  ASSERT_TRUE(first.allowed) << first.error;
  ASSERT_EQ(first.rules.size(), 1u);
  EXPECT_EQ(first.rules[0].algorithm, "concurrency");
  ASSERT_EQ(first.leases().size(), 1u);
  const std::string lease = first.leases()[0];

  const Decision full = c.check(request_of("job", "build"));
  EXPECT_FALSE(full.allowed);  // the one slot is held
  EXPECT_TRUE(full.leases().empty());

  std::string error;
  EXPECT_EQ(c.extend(lease, &error), LeaseStatus::kDone) << error;
  EXPECT_EQ(c.release(lease, &error), LeaseStatus::kDone) << error;
  EXPECT_EQ(c.release(lease, &error), LeaseStatus::kUnknown) << error;
  EXPECT_EQ(c.release("x", &error), LeaseStatus::kMalformed) << error;

  const Decision again = c.check(request_of("job", "build"));
  EXPECT_TRUE(again.allowed);
  EXPECT_EQ(c.release_leases(again.leases()), std::vector<LeaseStatus>{LeaseStatus::kDone});
  EXPECT_EQ(counter(c, "release_requests"), 5);
  EXPECT_EQ(counter(c, "leases_malformed"), 1);
}

TEST_F(DaemonTest, ShaperDelayIsReportedAndAcquireWaitsIt) {
  start(kRules);
  Client c = client();
  std::int64_t last = -1;
  for (int i = 0; i < 4; ++i) {
    const Decision d = c.check(request_of("stream", "s"));
    ASSERT_TRUE(d.allowed) << d.error;
    EXPECT_EQ(d.rules[0].algorithm, "leaky_bucket");
    EXPECT_EQ(d.delay_us, d.rules[0].delay_us);
    EXPECT_GE(d.delay_us, last);
    last = d.delay_us;
  }
  EXPECT_GT(last, 0);
  // acquire() sleeps the delay it was given before returning.
  const auto before = std::chrono::steady_clock::now();
  const Decision waited = c.acquire(request_of("stream", "s"));
  const auto slept = std::chrono::steady_clock::now() - before;
  ASSERT_TRUE(waited.allowed) << waited.error;
  EXPECT_GT(waited.delay_us, 0);
  EXPECT_GE(slept, std::chrono::microseconds(waited.delay_us));
}

TEST_F(DaemonTest, ReserveOnATokenBucketHandsOutGrowingDelays) {
  start(kRules);
  Client c = client();
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 4; ++i) {
    const Decision d = c.reserve(request_of("user", "res"));
    ASSERT_TRUE(d.allowed) << d.error;
    delays.push_back(d.delay_us);
  }
  EXPECT_EQ(delays[0], 0);
  EXPECT_EQ(delays[1], 0);
  EXPECT_GT(delays[2], 0);
  EXPECT_GT(delays[3], delays[2]);
  // Bounded by max_wait: refused, nothing charged.
  EXPECT_FALSE(c.reserve(request_of("user", "res"), std::chrono::microseconds(1)).allowed);
}

// A reserve's bound is on the whole wait, through the daemon too: for the
// rules that hand out waits, a next permit an hour away is refused under a
// bound a second short of it (charging nothing), and admitted under a bound
// at the wait measured a moment earlier.
TEST_F(DaemonTest, ReserveRefusesAWaitOverItsBoundOnEveryWaitingRule) {
  start(R"(
[[rule]]
name = "bursty"
match = { bursty = { each = true } }
algorithm = "smooth_bursty"
limit = 1
period = "1h"
burst = 0

[[rule]]
name = "warming"
match = { warming = { each = true } }
algorithm = "smooth_warming_up"
limit = 1
period = "1h"

[[rule]]
name = "shaper"
match = { shaper = { each = true } }
algorithm = "leaky_bucket"
shaper = true
limit = 1
period = "1h"
burst = 10
)");
  Client c = client();
  using us = std::chrono::microseconds;
  for (const std::string rule : {"bursty", "warming", "shaper"}) {
    SCOPED_TRACE(rule);
    ASSERT_TRUE(c.check(request_of(rule, "k")).allowed);
    const Decision probe = c.peek(request_of(rule, "k"));
    // A peek with no bound of its own: the rule hands out any wait.
    ASSERT_TRUE(probe.allowed) << probe.error;
    const std::int64_t wait_us = probe.delay_us;
    ASSERT_GT(wait_us, 3'000'000'000);  // most of an hour
    const Decision under = c.reserve(request_of(rule, "k"), us(wait_us - 1'000'000));
    EXPECT_FALSE(under.allowed) << "delay " << under.delay_us;
    EXPECT_EQ(under.delay_us, 0);
    const Decision at = c.reserve(request_of(rule, "k"), us(wait_us));
    ASSERT_TRUE(at.allowed) << at.error;
    EXPECT_GT(at.delay_us, wait_us - 1'000'000);
    EXPECT_LE(at.delay_us, wait_us);
  }
}

TEST_F(DaemonTest, PeekConsumesNothingAndResetRefills) {
  start(kRules);
  Client c = client();
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(c.peek(request_of("user", "pat")).allowed);
  EXPECT_TRUE(c.check(request_of("user", "pat")).allowed);
  EXPECT_TRUE(c.check(request_of("user", "pat")).allowed);
  EXPECT_FALSE(c.check(request_of("user", "pat")).allowed);
  EXPECT_FALSE(c.peek(request_of("user", "pat")).allowed);

  std::string error;
  const std::vector<Descriptor> pat = user("pat");
  const auto reset = c.reset(pat, &error);
  ASSERT_TRUE(reset) << error;
  EXPECT_EQ(reset->keys_reset, 1u);
  EXPECT_EQ(reset->rules, std::vector<std::string>{"bucket"});
  EXPECT_TRUE(c.check(request_of("user", "pat")).allowed);  // full again
  EXPECT_TRUE(c.check(request_of("user", "pat")).allowed);
  EXPECT_FALSE(c.check(request_of("user", "pat")).allowed);
  EXPECT_EQ(counter(c, "reset_requests"), 1);
}

TEST_F(DaemonTest, ResetIsRefusedWhenTheDaemonDisallowsIt) {
  // The fixture's [daemon] table comes first; this one adds to it.
  config_path_ = dir_.write("rlimitd.toml", "[daemon]\nsocket = \"" + socket_path() +
                                                "\"\nnode_id = \"test\"\nallow_reset = false\n" +
                                                kRules);
  daemon_ = std::make_unique<DaemonProcess>(
      dir_, std::vector<std::string>{"--config", config_path_, "--log-level", "debug"});
  ASSERT_TRUE(daemon_->wait_ready(socket_path())) << daemon_->log();
  Client c = client();
  std::string error;
  EXPECT_FALSE(c.reset(user("x"), &error));
  EXPECT_NE(error.find("NOT_ALLOWED"), std::string::npos) << error;
  EXPECT_NE(error.find("allow_reset"), std::string::npos) << error;
  EXPECT_EQ(counter(c, "resets_refused"), 1);
  EXPECT_TRUE(c.check(request_of("user", "x")).allowed);  // the connection still works
}

TEST_F(DaemonTest, TheLoadGaugeIsReported) {
  start(kRules);
  Client c = client();
  // Sampled every sweep (100 ms): present from the first status on.
  EXPECT_GE(counter(c, "load_permille"), 0);
}

TEST_F(DaemonTest, CAbiPeekReserveLeasesAndReset) {
  start(kRules);
  rlimit_options_t options;
  rlimit_options_init(&options);
  const std::string path = socket_path();
  options.socket_path = path.c_str();
  options.timeout_ms = 2000;
  rlimit_client_t* c = rlimit_client_new(&options);
  ASSERT_NE(c, nullptr);

  const rlimit_descriptor_t job[] = {{"job", "c-abi"}};
  rlimit_decision_t d;
  rlimit_leases_t* leases = nullptr;
  ASSERT_EQ(rlimit_check_leased(c, job, 1, 1, &d, &leases), RLIMIT_OK);
  EXPECT_TRUE(d.allowed);
  ASSERT_NE(leases, nullptr);
  EXPECT_EQ(rlimit_leases_count(leases), 1u);
  ASSERT_EQ(rlimit_check(c, job, 1, 1, &d), RLIMIT_OK);
  EXPECT_FALSE(d.allowed);
  std::size_t done = 0;
  EXPECT_EQ(rlimit_extend(c, leases, &done), RLIMIT_OK);
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(rlimit_release(c, leases, &done), RLIMIT_OK);
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(rlimit_release(c, leases, &done), RLIMIT_OK);
  EXPECT_EQ(done, 0u);  // released already
  rlimit_leases_free(leases);

  const rlimit_descriptor_t u[] = {{"user", "c-abi"}};
  ASSERT_EQ(rlimit_peek(c, u, 1, 1, &d), RLIMIT_OK);
  EXPECT_TRUE(d.allowed);
  std::int64_t delay_us = -1;
  leases = reinterpret_cast<rlimit_leases_t*>(&d);  // overwritten with NULL: no leases
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(rlimit_reserve(c, u, 1, 1, -1, &d, &delay_us, &leases), RLIMIT_OK);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(leases, nullptr);
  }
  EXPECT_GT(delay_us, 0);  // the third waits for a refill
  ASSERT_EQ(rlimit_reserve(c, u, 1, 1, 0, &d, &delay_us, nullptr), RLIMIT_OK);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(delay_us, 0);

  std::uint64_t keys = 0;
  char error[64];
  EXPECT_EQ(rlimit_reset(c, u, 1, &keys, error, sizeof(error)), RLIMIT_OK) << error;
  EXPECT_EQ(keys, 1u);
  const rlimit_descriptor_t twice[] = {{"user", "a"}, {"user", "b"}};
  EXPECT_EQ(rlimit_reset(c, twice, 2, &keys, error, sizeof(error)), RLIMIT_ERR_DAEMON);
  EXPECT_NE(std::string(error).find("INVALID_REQUEST"), std::string::npos) << error;
  rlimit_client_free(c);
}

class AlgorithmVerbsTest : public DaemonTest {
 protected:
  RunResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {program_path("rlimitctl"), "--socket", socket_path()});
    return run_program(args);
  }
};

// The lease line rlimitctl prints: "lease slots: <hex>".
std::string lease_in(const std::string& output) {
  const std::string marker = "lease slots: ";
  const auto at = output.find(marker);
  if (at == std::string::npos) return "";
  const auto end = output.find('\n', at);
  return output.substr(at + marker.size(), end - at - marker.size());
}

TEST_F(AlgorithmVerbsTest, AcquireReleasePeekReserveReset) {
  start(kRules);
  // A concurrency lease comes from a check or an acquire (decided now: a
  // slot cannot be scheduled for later).
  const RunResult acquired = ctl({"check", "job=ctl"});
  EXPECT_EQ(acquired.exit_code, 0) << acquired.output;
  const std::string lease = lease_in(acquired.output);
  ASSERT_FALSE(lease.empty()) << acquired.output;
  EXPECT_NE(acquired.output.find("concurrency"), std::string::npos) << acquired.output;
  EXPECT_EQ(ctl({"check", "job=ctl"}).exit_code, 1);  // held
  const RunResult no_slot = ctl({"acquire", "job=ctl"});
  EXPECT_EQ(no_slot.exit_code, 1) << no_slot.output;  // refused now, not delayed
  const RunResult released = ctl({"release", lease});
  EXPECT_EQ(released.exit_code, 0) << released.output;
  EXPECT_NE(released.output.find("done"), std::string::npos) << released.output;
  const RunResult again = ctl({"release", lease, "--json"});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("\"status\": \"unknown\""), std::string::npos) << again.output;
  EXPECT_EQ(ctl({"release", "not-hex"}).exit_code, 2);
  EXPECT_EQ(ctl({"check", "job=ctl"}).exit_code, 0);
  const RunResult acquire = ctl({"acquire", "stream=ctl"});
  EXPECT_EQ(acquire.exit_code, 0) << acquire.output;
  EXPECT_NE(acquire.output.find("leaky_bucket"), std::string::npos) << acquire.output;

  EXPECT_EQ(ctl({"peek", "user=cli"}).exit_code, 0);
  const RunResult peek_json = ctl({"peek", "user=cli", "--json"});
  EXPECT_NE(peek_json.output.find("\"algorithm\": \"token_bucket\""), std::string::npos)
      << peek_json.output;
  EXPECT_EQ(ctl({"reserve", "user=cli"}).exit_code, 0);
  EXPECT_EQ(ctl({"reserve", "user=cli"}).exit_code, 0);
  const RunResult waits = ctl({"reserve", "user=cli", "--json"});
  EXPECT_EQ(waits.exit_code, 0) << waits.output;
  EXPECT_EQ(waits.output.find("\"delay_us\": 0,"), std::string::npos) << waits.output;
  EXPECT_EQ(ctl({"reserve", "user=cli", "--max-wait-us", "0"}).exit_code, 1);

  const RunResult reset = ctl({"reset", "user=cli", "--json"});
  EXPECT_EQ(reset.exit_code, 0) << reset.output;
  EXPECT_NE(reset.output.find("\"keys_reset\": 1"), std::string::npos) << reset.output;
  EXPECT_EQ(ctl({"check", "user=cli"}).exit_code, 0);
  const RunResult shaped = ctl({"check", "stream=cli"});
  EXPECT_EQ(shaped.exit_code, 0) << shaped.output;
  EXPECT_NE(shaped.output.find("DELAY"), std::string::npos) << shaped.output;
}

}  // namespace
}  // namespace rlimit::testing
