// RedisStore against a real redis-server (and a real three-master Redis
// Cluster) started by the test on loopback ports: max-merge, TTL, binary
// keys, uint64 values, failure and recovery, AUTH, the queue bound, and
// cluster routing with MOVED and ASK. Skipped when redis-server is absent.
#include "shell/redis_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shell/redis_cluster.h"
#include "shell/redis_hash_codec.h"
#include "support/daemon_process.h"
#include "support/redis_cluster_process.h"
#include "support/redis_inspector.h"
#include "support/redis_process.h"
#include "support/redis_resp.h"

namespace rlimit::shell {
namespace {

using namespace std::chrono_literals;
using rlimit::testing::eventually;
using rlimit::testing::free_port;
using rlimit::testing::RedisProcess;
using rlimit::testing::Reply;
using rlimit::testing::TempDir;

constexpr auto kResultTimeout = 10s;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Submits and waits (bounded) for the result.
core::StoreResult run(RedisStore& store, core::StoreBatch batch) {
  auto promise = std::make_shared<std::promise<core::StoreResult>>();
  std::future<core::StoreResult> future = promise->get_future();
  std::optional<core::StoreResult> refused =
      store.submit(std::move(batch), [promise](core::StoreResult r) { promise->set_value(r); });
  if (refused) return *refused;
  if (future.wait_for(kResultTimeout) != std::future_status::ready) {
    ADD_FAILURE() << "no result within " << kResultTimeout.count() << " s";
    return {};
  }
  return future.get();
}

core::StoreWrite write(std::string key, std::vector<core::StoreEntry> entries,
                       std::int64_t ttl_ms = 60'000) {
  return core::StoreWrite{std::move(key), ttl_ms, std::move(entries)};
}

core::StoreBatch batch(std::vector<core::StoreWrite> writes, std::vector<std::string> reads = {}) {
  static std::uint64_t next_id = 1;
  return core::StoreBatch{next_id++, std::move(writes), std::move(reads)};
}

std::vector<core::StoreEntry> sorted(std::vector<core::StoreEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.origin, a.incarnation) < std::tie(b.origin, b.incarnation);
  });
  return entries;
}

const core::StoreKey* find_key(const core::StoreResult& result, const std::string& key) {
  for (const core::StoreKey& k : result.keys) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

using Inspector = rlimit::testing::RedisInspector;

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rlimit::testing::redis_available()) GTEST_SKIP() << "redis-server not installed";
    port_ = free_port();
    ASSERT_GT(port_, 0);
  }

  void start_redis(std::vector<std::string> extra = {}) {
    redis_ = std::make_unique<RedisProcess>(dir_.path(), port_, std::move(extra));
    ASSERT_TRUE(redis_->wait_ready()) << redis_->log();
  }

  RedisStoreOptions options() const {
    RedisStoreOptions o;
    o.addresses = {"127.0.0.1:" + std::to_string(port_)};
    o.command_timeout_ms = 2'000;
    o.connect_timeout_ms = 2'000;
    o.reconnect_backoff_min_ms = 50;
    o.reconnect_backoff_max_ms = 200;
    return o;
  }

  TempDir dir_;
  int port_ = -1;
  std::unique_ptr<RedisProcess> redis_;
};

TEST_F(RedisStoreTest, WritesRaiseByMaxAndARetryChangesNothing) {
  start_redis();
  RedisStore store(options());
  core::StoreResult first = run(store, batch({write("k", {{"a", 1, 10}})}));
  ASSERT_TRUE(first.ok) << first.error;
  ASSERT_EQ(first.keys.size(), 1u);
  EXPECT_EQ(first.keys[0].key, "k");
  EXPECT_EQ(first.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 10}}));
  EXPECT_TRUE(first.failed_writes.empty());

  // A lower value does not lower it.
  core::StoreResult lower = run(store, batch({write("k", {{"a", 1, 5}})}));
  ASSERT_TRUE(lower.ok) << lower.error;
  EXPECT_EQ(lower.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 10}}));

  // The same batch twice: the same outcome, the same hash.
  const core::StoreBatch raise = batch({write("k", {{"a", 1, 25}, {"a", 2, 3}})}, {"other"});
  core::StoreResult once = run(store, raise);
  core::StoreResult twice = run(store, raise);
  ASSERT_TRUE(once.ok && twice.ok) << once.error << twice.error;
  EXPECT_EQ(sorted(once.keys[0].entries), sorted(twice.keys[0].entries));
  EXPECT_EQ(sorted(twice.keys[0].entries),
            (std::vector<core::StoreEntry>{{"a", 1, 25}, {"a", 2, 3}}));
  EXPECT_EQ(twice.id, raise.id);

  Inspector redis(port_);
  EXPECT_EQ(redis.text({"HGET", "rlimit:k", encode_field("a", 1)}), "25");
  EXPECT_EQ(redis.integer({"HLEN", "rlimit:k"}), 2);

  // Healthy and connected: one round trip, one command per key.
  EXPECT_EQ(twice.round_trips, 1u);
  EXPECT_EQ(twice.commands, 2u);
  EXPECT_GT(twice.bytes_out, 0u);
  EXPECT_GT(twice.bytes_in, 0u);
  const RedisStoreStats stats = store.stats();
  EXPECT_EQ(stats.connects, 1u);
  EXPECT_EQ(stats.batches_completed, 4u);
  EXPECT_EQ(stats.batches_failed, 0u);
}

TEST_F(RedisStoreTest, WritesSetTheTtl) {
  start_redis();
  RedisStore store(options());
  ASSERT_TRUE(run(store, batch({write("t", {{"a", 1, 1}}, 60'000)})).ok);
  Inspector redis(port_);
  const long long ttl_ms = redis.integer({"PTTL", "rlimit:t"});
  EXPECT_GT(ttl_ms, 50'000);
  EXPECT_LE(ttl_ms, 60'000);
  // The latest write's TTL holds, even when nothing was raised.
  ASSERT_TRUE(run(store, batch({write("t", {{"a", 1, 1}}, 5'000)})).ok);
  const long long shorter_ms = redis.integer({"PTTL", "rlimit:t"});
  EXPECT_GT(shorter_ms, 0);
  EXPECT_LE(shorter_ms, 5'000);
}

TEST_F(RedisStoreTest, KeysAndOriginsAreBinarySafe) {
  start_redis();
  RedisStoreOptions o = options();
  o.key_prefix = std::string("p\0:", 3);
  RedisStore store(o);
  const std::string key("user\0\xff\r\n {x} %s", 16);
  const std::string origin("node\0\n", 6);
  core::StoreResult result = run(store, batch({write(key, {{origin, 9, 77}})}));
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_EQ(result.keys.size(), 1u);
  EXPECT_EQ(result.keys[0].key, key);
  EXPECT_EQ(result.keys[0].entries, (std::vector<core::StoreEntry>{{origin, 9, 77}}));
  Inspector redis(port_);
  EXPECT_EQ(redis.text({"HGET", std::string("p\0:", 3) + key, encode_field(origin, 9)}), "77");
  core::StoreResult read = run(store, batch({}, {key}));
  ASSERT_TRUE(read.ok) << read.error;
  ASSERT_EQ(read.keys.size(), 1u);
  EXPECT_EQ(read.keys[0].entries, (std::vector<core::StoreEntry>{{origin, 9, 77}}));
}

TEST_F(RedisStoreTest, ReadsOfUnknownKeysAreEmptyAndSucceed) {
  start_redis();
  RedisStore store(options());
  core::StoreResult result = run(store, batch({}, {"never-written", "neither"}));
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_EQ(result.keys.size(), 2u);
  EXPECT_EQ(result.keys[0].key, "never-written");
  EXPECT_TRUE(result.keys[0].entries.empty());
  EXPECT_EQ(result.keys[1].key, "neither");
  Inspector redis(port_);
  EXPECT_EQ(redis.integer({"EXISTS", "rlimit:never-written"}), 0);  // a read creates nothing

  // Connected, one read: exactly the bytes on the wire.
  core::StoreResult again = run(store, batch({}, {"k"}));
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(again.commands, 1u);
  EXPECT_EQ(again.round_trips, 1u);
  EXPECT_EQ(again.bytes_out, std::string("*2\r\n$7\r\nHGETALL\r\n$8\r\nrlimit:k\r\n").size());
  EXPECT_EQ(again.bytes_in, std::string("*0\r\n").size());
  const RedisStoreStats stats = store.stats();
  EXPECT_EQ(stats.round_trips, 3u);  // AUTH-less connect (SCRIPT LOAD), then the two batches
  EXPECT_EQ(stats.bytes_in, result.bytes_in + again.bytes_in);
}

TEST_F(RedisStoreTest, TwoOriginsEachSeeBoth) {
  start_redis();
  RedisStoreOptions o = options();
  RedisStore node_a(o);
  RedisStore node_b(o);
  ASSERT_TRUE(run(node_a, batch({write("shared", {{"a", 1, 40}})})).ok);
  core::StoreResult b = run(node_b, batch({write("shared", {{"b", 5, 2}})}));
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(sorted(b.keys[0].entries), (std::vector<core::StoreEntry>{{"a", 1, 40}, {"b", 5, 2}}));
  core::StoreResult a = run(node_a, batch({}, {"shared"}));
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(sorted(a.keys[0].entries), sorted(b.keys[0].entries));
}

TEST_F(RedisStoreTest, ValuesNearTwoToTheSixtyFourCompareExactly) {
  start_redis();
  RedisStore store(options());
  // Above 2^53 a Lua number cannot tell these apart.
  const std::uint64_t big = (1ULL << 53) + 1;
  ASSERT_TRUE(run(store, batch({write("u", {{"a", 1, big - 1}, {"b", 1, kMax - 1}})})).ok);
  core::StoreResult raised = run(store, batch({write("u", {{"a", 1, big}, {"b", 1, kMax}})}));
  ASSERT_TRUE(raised.ok) << raised.error;
  EXPECT_EQ(sorted(raised.keys[0].entries),
            (std::vector<core::StoreEntry>{{"a", 1, big}, {"b", 1, kMax}}));
  core::StoreResult not_lowered =
      run(store, batch({write("u", {{"a", 1, big - 1}, {"b", 1, kMax - 1}})}));
  ASSERT_TRUE(not_lowered.ok) << not_lowered.error;
  EXPECT_EQ(sorted(not_lowered.keys[0].entries), sorted(raised.keys[0].entries));
  // Shorter decimals are smaller even when they compare larger as strings.
  ASSERT_TRUE(run(store, batch({write("u", {{"c", 1, 99}})})).ok);
  ASSERT_TRUE(run(store, batch({write("u", {{"c", 1, 100}})})).ok);
  Inspector redis(port_);
  EXPECT_EQ(redis.text({"HGET", "rlimit:u", encode_field("b", 1)}), "18446744073709551615");
  EXPECT_EQ(redis.text({"HGET", "rlimit:u", encode_field("c", 1)}), "100");
}

TEST_F(RedisStoreTest, MalformedFieldsAreSkippedAndCountedAndAWrongTypeFailsOnlyItsKey) {
  start_redis();
  RedisStore store(options());
  Inspector redis(port_);
  redis.command({"HSET", "rlimit:m", encode_field("a", 1), "12", "junk", "1", encode_field("b", 1),
                 "not-a-number", encode_field("c", 1), "012"});
  redis.command({"SET", "rlimit:s", "a string"});
  core::StoreResult result = run(store, batch({write("s", {{"a", 1, 1}})}, {"m", "s"}));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("WRONGTYPE"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find(redis_->address()), std::string::npos) << result.error;
  EXPECT_EQ(result.failed_writes, (std::vector<std::string>{"s"}));
  ASSERT_EQ(result.keys.size(), 1u);  // m; neither s
  EXPECT_EQ(result.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 12}}));
  EXPECT_EQ(store.stats().fields_skipped, 3u);
  // The script overwrites a field holding a non-canonical value.
  core::StoreResult rewrite = run(store, batch({write("m", {{"c", 1, 5}})}));
  ASSERT_TRUE(rewrite.ok) << rewrite.error;
  EXPECT_EQ(redis.text({"HGET", "rlimit:m", encode_field("c", 1)}), "5");
}

TEST_F(RedisStoreTest, RedisKilledFailsFastAndRestartedRecovers) {
  start_redis();
  RedisStoreOptions o = options();  // command timeout 2 s: a fast failure did not wait for it
  o.reconnect_backoff_min_ms = 1'000;
  o.reconnect_backoff_max_ms = 1'000;
  RedisStore store(o);
  ASSERT_TRUE(run(store, batch({write("x", {{"a", 1, 1}})})).ok);
  redis_->kill();

  const auto started = std::chrono::steady_clock::now();
  core::StoreResult failed =
      run(store, batch({write("x", {{"a", 1, 2}}), write("y", {{"a", 1, 3}})}, {"z"}));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.failed_writes, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(failed.keys.empty());
  EXPECT_NE(failed.error.find(redis_->address()), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("refused"), std::string::npos) << failed.error;
  EXPECT_LT(elapsed, 1s);

  // In backoff: no connect attempt at all.
  const std::uint64_t connects = store.stats().connects;
  core::StoreResult deferred = run(store, batch({write("x", {{"a", 1, 2}})}));
  EXPECT_FALSE(deferred.ok);
  EXPECT_EQ(deferred.failed_writes, (std::vector<std::string>{"x"}));
  EXPECT_NE(deferred.error.find("next connect attempt"), std::string::npos) << deferred.error;
  EXPECT_EQ(store.stats().connects, connects);
  EXPECT_GE(store.stats().connects_deferred, 1u);
  EXPECT_EQ(deferred.round_trips, 0u);

  start_redis();                         // empty: no persistence
  std::this_thread::sleep_for(1'100ms);  // past the backoff
  core::StoreResult recovered = run(store, batch({write("x", {{"a", 1, 2}})}));
  ASSERT_TRUE(recovered.ok) << recovered.error;
  EXPECT_EQ(recovered.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 2}}));
  EXPECT_GE(store.stats().connections_lost, 1u);
}

TEST_F(RedisStoreTest, ARestartBetweenBatchesCostsNoFailure) {
  start_redis();
  RedisStore store(options());
  ASSERT_TRUE(run(store, batch({write("x", {{"a", 1, 1}})})).ok);
  redis_->kill();
  start_redis();
  // The open connection is dead; one fresh connection is tried at once.
  core::StoreResult result = run(store, batch({write("x", {{"a", 1, 4}})}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 4}}));
}

TEST_F(RedisStoreTest, AHungRedisCostsTheCommandTimeoutThenBacksOff) {
  start_redis();
  RedisStoreOptions o = options();
  o.command_timeout_ms = 300;
  o.reconnect_backoff_min_ms = 1'000;
  o.reconnect_backoff_max_ms = 1'000;
  RedisStore store(o);
  ASSERT_TRUE(run(store, batch({write("x", {{"a", 1, 1}})})).ok);
  redis_->signal(SIGSTOP);  // accepts connections (the kernel does), answers nothing

  auto started = std::chrono::steady_clock::now();
  core::StoreResult hung = run(store, batch({write("x", {{"a", 1, 2}})}));
  const auto first_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  EXPECT_FALSE(hung.ok);
  EXPECT_EQ(hung.failed_writes, (std::vector<std::string>{"x"}));
  EXPECT_NE(hung.error.find("timed out after 300 ms"), std::string::npos) << hung.error;
  EXPECT_GE(first_ms.count(), 290);
  EXPECT_LT(first_ms.count(), 1'500);  // one timeout: no retry of a timed-out connection

  // The connection is dropped; the next connect happens after the backoff.
  const std::uint64_t connects = store.stats().connects;
  started = std::chrono::steady_clock::now();
  core::StoreResult hung_again = run(store, batch({write("x", {{"a", 1, 2}})}));
  EXPECT_FALSE(hung_again.ok);
  EXPECT_EQ(store.stats().connects,
            connects + 1);  // connected (backlog), then SCRIPT LOAD timed out
  EXPECT_NE(hung_again.error.find("timed out"), std::string::npos) << hung_again.error;
  core::StoreResult deferred = run(store, batch({write("x", {{"a", 1, 2}})}));
  EXPECT_FALSE(deferred.ok);
  EXPECT_NE(deferred.error.find("next connect attempt"), std::string::npos) << deferred.error;
  EXPECT_EQ(store.stats().connects, connects + 1);

  redis_->signal(SIGCONT);
  std::this_thread::sleep_for(1'100ms);
  core::StoreResult recovered = run(store, batch({write("x", {{"a", 1, 3}})}));
  ASSERT_TRUE(recovered.ok) << recovered.error;
  EXPECT_EQ(recovered.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 3}}));
}

TEST_F(RedisStoreTest, ScriptFlushedIsSentAgain) {
  start_redis();
  RedisStore store(options());
  ASSERT_TRUE(run(store, batch({write("x", {{"a", 1, 1}})})).ok);
  Inspector(port_).command({"SCRIPT", "FLUSH"});
  core::StoreResult result = run(store, batch({write("x", {{"a", 1, 2}})}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.keys[0].entries, (std::vector<core::StoreEntry>{{"a", 1, 2}}));
  EXPECT_EQ(store.stats().noscript, 1u);
  EXPECT_EQ(result.round_trips, 2u);
}

TEST_F(RedisStoreTest, AuthWithAPassword) {
  start_redis({"--requirepass", "s3cret"});
  {
    RedisStore no_password(options());
    core::StoreResult refused = run(no_password, batch({write("x", {{"a", 1, 1}})}));
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("NOAUTH"), std::string::npos) << refused.error;
  }
  {
    RedisStoreOptions o = options();
    o.password = "wrong";
    RedisStore wrong(o);
    core::StoreResult refused = run(wrong, batch({write("x", {{"a", 1, 1}})}));
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("AUTH"), std::string::npos) << refused.error;
    EXPECT_EQ(wrong.stats().connect_failures, 1u);
  }
  RedisStoreOptions o = options();
  o.password = "s3cret";
  RedisStore store(o);
  core::StoreResult result = run(store, batch({write("x", {{"a", 1, 1}})}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(Inspector(port_, "s3cret").text({"HGET", "rlimit:x", encode_field("a", 1)}), "1");
}

TEST_F(RedisStoreTest, AuthAsAnAclUser) {
  // The default user is off: only rlimit's user, limited to rlimit:* keys.
  start_redis({"--user", "default", "off", "--user", "rlimit", "on", ">pw", "~rlimit:*", "+@all"});
  RedisStoreOptions o = options();
  o.username = "rlimit";
  o.password = "pw";
  {
    RedisStore store(o);
    core::StoreResult result = run(store, batch({write("x", {{"a", 1, 3}})}, {"y"}));
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.keys.size(), 2u);
  }
  {
    RedisStoreOptions other_prefix = o;
    other_prefix.key_prefix = "other:";  // outside the user's keys
    RedisStore store(other_prefix);
    core::StoreResult result = run(store, batch({write("x", {{"a", 1, 3}})}));
    EXPECT_FALSE(result.ok);
    EXPECT_NE(result.error.find("NOPERM"), std::string::npos) << result.error;
  }
  RedisStoreOptions wrong = o;
  wrong.password = "nope";
  RedisStore store(wrong);
  core::StoreResult result = run(store, batch({write("x", {{"a", 1, 3}})}));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("WRONGPASS"), std::string::npos) << result.error;
}

TEST_F(RedisStoreTest, HostNameAndIpv6Literal) {
  start_redis({"--bind", "127.0.0.1", "-::1"});
  RedisStoreOptions o = options();
  o.addresses = {"localhost:" + std::to_string(port_)};
  {
    RedisStore store(o);
    core::StoreResult result = run(store, batch({write("h", {{"a", 1, 1}})}));
    ASSERT_TRUE(result.ok) << result.error;
  }
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback6{};
  loopback6.sin6_family = AF_INET6;
  loopback6.sin6_addr = in6addr_loopback;
  const bool has_ipv6 =
      probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loopback6), sizeof(loopback6)) == 0;
  if (probe >= 0) ::close(probe);
  if (!has_ipv6) GTEST_SKIP() << "no IPv6 loopback here";
  o.addresses = {"[::1]:" + std::to_string(port_)};
  RedisStore store(o);
  core::StoreResult result = run(store, batch({write("h", {{"b", 1, 1}})}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.keys[0].entries.size(), 2u);
}

// Holds the worker inside `done` of the first batch until released.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool entered = false;
  bool open = false;
  void enter_and_wait() {
    std::unique_lock<std::mutex> lock(mutex);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, kResultTimeout, [&] { return open; });
  }
  bool wait_entered() {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, kResultTimeout, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    cv.notify_all();
  }
};

TEST_F(RedisStoreTest, QueueBoundRefusesAndCounts) {
  start_redis();
  RedisStoreOptions o = options();
  o.max_queued_batches = 1;
  RedisStore store(o);
  Gate gate;
  std::promise<core::StoreResult> second;
  ASSERT_FALSE(store.submit(batch({write("a", {{"n", 1, 1}})}),
                            [&](core::StoreResult) { gate.enter_and_wait(); }));
  ASSERT_TRUE(gate.wait_entered());
  ASSERT_FALSE(store.submit(batch({write("b", {{"n", 1, 1}})}),
                            [&](core::StoreResult r) { second.set_value(r); }));
  std::optional<core::StoreResult> refused =
      store.submit(batch({write("c", {{"n", 1, 1}})}, {"d"}), [](core::StoreResult) { FAIL(); });
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->ok);
  EXPECT_EQ(refused->failed_writes, (std::vector<std::string>{"c"}));
  EXPECT_NE(refused->error.find("max_queued_batches"), std::string::npos) << refused->error;
  EXPECT_EQ(store.stats().batches_refused_queue_full, 1u);
  gate.release();
  auto future = second.get_future();
  ASSERT_EQ(future.wait_for(kResultTimeout), std::future_status::ready);
  EXPECT_TRUE(future.get().ok);
}

TEST_F(RedisStoreTest, StopCompletesQueuedBatchesAsFailed) {
  start_redis();
  RedisStore store(options());
  Gate gate;
  std::promise<core::StoreResult> queued;
  ASSERT_FALSE(store.submit(batch({write("a", {{"n", 1, 1}})}),
                            [&](core::StoreResult) { gate.enter_and_wait(); }));
  ASSERT_TRUE(gate.wait_entered());
  ASSERT_FALSE(store.submit(batch({write("b", {{"n", 1, 1}})}),
                            [&](core::StoreResult r) { queued.set_value(r); }));
  std::thread stopper([&] { store.stop(); });
  // Once stop() has begun, a submit is refused as stopped (before, as busy).
  EXPECT_TRUE(eventually([&] {
    auto refused = store.submit(batch({}), [](core::StoreResult) {});
    return refused && refused->error.find("stopped") != std::string::npos;
  }));
  gate.release();
  stopper.join();
  auto future = queued.get_future();
  ASSERT_EQ(future.wait_for(0s), std::future_status::ready);
  const core::StoreResult cancelled = future.get();
  EXPECT_FALSE(cancelled.ok);
  EXPECT_EQ(cancelled.failed_writes, (std::vector<std::string>{"b"}));
  const RedisStoreStats stats = store.stats();
  EXPECT_EQ(stats.batches_cancelled, 1u);
  EXPECT_EQ(stats.batches_completed, 2u);
  EXPECT_GE(stats.batches_refused_stopped, 1u);
  store.stop();  // idempotent
}

TEST(RedisStoreOptionsTest, BadOptionsAreRefusedWithAReason) {
  RedisStoreOptions o;
  EXPECT_NE(RedisStore::check_options(o), "");
  o.addresses = {"127.0.0.1:6379"};
  EXPECT_EQ(RedisStore::check_options(o), "");
  o.addresses = {"127.0.0.1:6379", "127.0.0.1:6380"};
  EXPECT_NE(RedisStore::check_options(o).find("exactly one"), std::string::npos);
  o.cluster = true;
  EXPECT_EQ(RedisStore::check_options(o), "");
  o.addresses = {"127.0.0.1"};
  EXPECT_NE(RedisStore::check_options(o).find("127.0.0.1"), std::string::npos);
  o.addresses = {"[::1]:6379", "redis.example:6379"};
  EXPECT_EQ(RedisStore::check_options(o), "");
  o.username = "u";
  EXPECT_NE(RedisStore::check_options(o).find("password"), std::string::npos);
  o.password = "p";
  o.max_queued_batches = 0;
  EXPECT_NE(RedisStore::check_options(o).find("max_queued_batches"), std::string::npos);
  EXPECT_THROW(RedisStore{o}, std::invalid_argument);
}

TEST(RedisStoreOptionsTest, NothingListeningFailsFastWithTheAddress) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  RedisStoreOptions o;
  o.addresses = {"127.0.0.1:" + std::to_string(port)};
  RedisStore store(o);
  core::StoreResult result = run(store, batch({write("k", {{"a", 1, 1}})}, {"r"}));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.failed_writes, (std::vector<std::string>{"k"}));
  EXPECT_NE(result.error.find(o.addresses[0]), std::string::npos) << result.error;
  EXPECT_TRUE(result.keys.empty());
  // An empty batch costs nothing.
  core::StoreResult empty = run(store, batch({}));
  EXPECT_TRUE(empty.ok);
  EXPECT_EQ(empty.round_trips, 0u);
}

// ---- Redis Cluster ----

// Three masters on loopback ports, created with redis-cli --cluster create.
class RedisClusterStoreTest : public ::testing::Test {
 protected:
  static constexpr int kMasters = 3;

  void SetUp() override {
    if (!rlimit::testing::redis_available()) GTEST_SKIP() << "redis-server not installed";
    cluster_ = std::make_unique<rlimit::testing::RedisClusterProcess>(dir_.path(), kMasters, 0);
    ASSERT_EQ(cluster_->start(), "");
    ports_ = cluster_->ports();
  }

  RedisStoreOptions options() const {
    RedisStoreOptions o;
    o.cluster = true;
    o.addresses = {"127.0.0.1:" + std::to_string(ports_[0])};  // one seed; the rest learned
    o.command_timeout_ms = 2'000;
    o.connect_timeout_ms = 2'000;
    o.slots_refresh_min_interval_ms = 0;
    return o;
  }

  // The port of the master serving the store key `key` (prefix "rlimit:").
  int owner_port(const std::string& key) {
    return cluster_->owner_of_slot(redis_key_slot("rlimit:" + key), ports_[0]);
  }

  std::string node_id(int port) { return Inspector(port).text({"CLUSTER", "MYID"}); }

  TempDir dir_;
  std::unique_ptr<rlimit::testing::RedisClusterProcess> cluster_;
  std::vector<int> ports_;
};

TEST_F(RedisClusterStoreTest, KeySlotsAgreeWithRedis) {
  Inspector redis(ports_[0]);
  for (const std::string& key :
       std::vector<std::string>{"foo", "rlimit:{tag}x", std::string("a\0{\xff}\r\n", 7), "{}x"}) {
    EXPECT_EQ(redis.integer({"CLUSTER", "KEYSLOT", key}), redis_key_slot(key)) << key;
  }
}

TEST_F(RedisClusterStoreTest, KeysOnEveryMasterOneRoundTripEach) {
  RedisStore store(options());
  std::vector<core::StoreWrite> writes;
  std::set<int> owners;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "key" + std::to_string(i);
    owners.insert(owner_port(key));
    writes.push_back(write(key, {{"a", 1, static_cast<std::uint64_t>(i + 1)}}));
  }
  ASSERT_EQ(owners.size(), 3u);  // the keys span all three masters
  core::StoreResult first = run(store, batch(writes, {"unknown"}));
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_EQ(first.keys.size(), 31u);
  for (int i = 0; i < 30; ++i) {
    const std::string key = "key" + std::to_string(i);
    EXPECT_EQ(Inspector(owner_port(key)).text({"HGET", "rlimit:" + key, encode_field("a", 1)}),
              std::to_string(i + 1));
  }
  core::StoreResult second = run(store, batch(writes, {"unknown"}));
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_EQ(second.round_trips, 3u);
  EXPECT_EQ(second.commands, 31u);
  const RedisStoreStats stats = store.stats();
  EXPECT_EQ(stats.moved, 0u);
  EXPECT_EQ(stats.slot_refreshes, 1u);

  // The map is read again every slots_refresh_interval_ms.
  RedisStoreOptions often = options();
  often.slots_refresh_interval_ms = 1;
  RedisStore refreshing(often);
  ASSERT_TRUE(run(refreshing, batch({}, {"x"})).ok);
  std::this_thread::sleep_for(5ms);
  core::StoreResult refreshed = run(refreshing, batch({}, {"x"}));
  ASSERT_TRUE(refreshed.ok) << refreshed.error;
  EXPECT_EQ(refreshing.stats().slot_refreshes, 2u);
  EXPECT_EQ(refreshed.round_trips, 2u);  // CLUSTER SLOTS, then the read
}

TEST_F(RedisClusterStoreTest, AskDuringAMigrationAndMovedAfterIt) {
  RedisStore store(options());
  RedisStoreOptions no_redirects = options();
  no_redirects.max_redirects = 0;
  RedisStore strict(no_redirects);
  // Keys with one hash tag share a slot.
  const std::string old_key = "{mig}old";
  const std::string new_key = "{mig}new";
  ASSERT_TRUE(run(store, batch({write(old_key, {{"a", 1, 7}})})).ok);
  ASSERT_TRUE(run(strict, batch({}, {old_key})).ok);  // its map, soon stale
  const int slot = redis_key_slot("rlimit:" + old_key);
  const int source = owner_port(old_key);
  const int target = source == ports_[0] ? ports_[1] : ports_[0];
  const std::string source_id = node_id(source);
  const std::string target_id = node_id(target);
  Inspector from(source);
  Inspector to(target);
  ASSERT_EQ(to.text({"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", source_id}), "OK");
  ASSERT_EQ(from.text({"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", target_id}), "OK");

  // Migrating: the source still serves old_key, and sends new_key (absent
  // there) to the target with ASK.
  core::StoreResult during =
      run(store, batch({write(old_key, {{"a", 1, 8}}), write(new_key, {{"a", 1, 1}})}));
  ASSERT_TRUE(during.ok) << during.error;
  EXPECT_GE(store.stats().ask, 1u);
  to.command({"ASKING"});  // the target answers for an importing slot only after ASKING
  EXPECT_EQ(to.text({"HGET", "rlimit:" + new_key, encode_field("a", 1)}), "1");
  EXPECT_EQ(from.text({"HGET", "rlimit:" + old_key, encode_field("a", 1)}), "8");

  // Finish: move old_key, then give the slot to the target everywhere.
  ASSERT_EQ(from.text({"MIGRATE", "127.0.0.1", std::to_string(target), "", "0", "5000", "KEYS",
                       "rlimit:" + old_key}),
            "OK");
  for (const int port : ports_) {
    EXPECT_EQ(Inspector(port).text({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", target_id}),
              "OK");
  }
  const std::uint64_t moved_before = store.stats().moved;
  core::StoreResult after = run(store, batch({write(old_key, {{"a", 1, 9}})}, {new_key}));
  ASSERT_TRUE(after.ok) << after.error;
  EXPECT_GT(store.stats().moved, moved_before);
  EXPECT_EQ(to.text({"HGET", "rlimit:" + old_key, encode_field("a", 1)}), "9");
  ASSERT_NE(find_key(after, new_key), nullptr);
  EXPECT_EQ(find_key(after, new_key)->entries, (std::vector<core::StoreEntry>{{"a", 1, 1}}));
  // Not following redirects: the key fails, counted.
  core::StoreResult refused = run(strict, batch({write(old_key, {{"a", 1, 11}})}));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.failed_writes, (std::vector<std::string>{old_key}));
  EXPECT_NE(refused.error.find("max_redirects"), std::string::npos) << refused.error;
  EXPECT_EQ(strict.stats().redirects_exhausted, 1u);

  // The map learned the move: the next batch goes straight to the target.
  const std::uint64_t moved_after = store.stats().moved;
  core::StoreResult direct = run(store, batch({write(old_key, {{"a", 1, 10}})}));
  ASSERT_TRUE(direct.ok) << direct.error;
  EXPECT_EQ(store.stats().moved, moved_after);
}

TEST_F(RedisClusterStoreTest, AMasterDownFailsOnlyItsKeys) {
  RedisStore store(options());
  std::vector<core::StoreWrite> writes;
  for (int i = 0; i < 30; ++i) writes.push_back(write("key" + std::to_string(i), {{"a", 1, 1}}));
  ASSERT_TRUE(run(store, batch(writes)).ok);
  const int dead = ports_[2];
  std::set<std::string> dead_keys;
  for (const auto& w : writes) {
    if (owner_port(w.key) == dead) dead_keys.insert(w.key);
  }
  ASSERT_FALSE(dead_keys.empty());
  cluster_->server(dead).kill();
  core::StoreResult result = run(store, batch(writes));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(std::set<std::string>(result.failed_writes.begin(), result.failed_writes.end()),
            dead_keys);
  EXPECT_EQ(result.keys.size(), writes.size() - dead_keys.size());
  EXPECT_NE(result.error.find(std::to_string(dead)), std::string::npos) << result.error;
  // A connection failure asks for the map again at the next batch.
  EXPECT_EQ(store.stats().slot_refreshes, 1u);
  run(store, batch(writes));
  EXPECT_EQ(store.stats().slot_refreshes, 2u);
}

}  // namespace
}  // namespace rlimit::shell
