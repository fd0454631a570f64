// Redis Cluster routing: key slots as Redis computes them, CLUSTER SLOTS
// replies and MOVED/ASK errors, malformed ones refused.
#include "shell/redis_cluster.h"

#include <gtest/gtest.h>

#include "support/redis_resp.h"

namespace rlimit::shell {
namespace {

using testing::parse_resp;

TEST(RedisCluster, Crc16IsXmodem) {
  EXPECT_EQ(redis_crc16("123456789"), 0x31C3);  // the check value in Redis' crc16.c
  EXPECT_EQ(redis_crc16(""), 0);
}

TEST(RedisCluster, KeySlotsMatchRedis) {
  // Slots Redis' cluster tutorial shows for these keys.
  EXPECT_EQ(redis_key_slot("foo"), 12182);
  EXPECT_EQ(redis_key_slot("hello"), 866);
  EXPECT_EQ(redis_key_slot("somekey"), 11058);
}

TEST(RedisCluster, HashTagsFollowRedisRules) {
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("user1000"));
  EXPECT_EQ(redis_key_slot("x{user1000}y{z}"), redis_key_slot("user1000"));  // first pair only
  EXPECT_EQ(redis_key_slot("foo{{bar}}zap"), redis_key_slot("{bar"));        // first '}' after '{'
  EXPECT_EQ(redis_key_slot("foo{}{bar}"), redis_crc16("foo{}{bar}") % 16384);  // empty tag: whole
  EXPECT_EQ(redis_key_slot("foo{bar"), redis_crc16("foo{bar") % 16384);        // no '}'
  EXPECT_EQ(redis_key_slot("}foo{bar}"), redis_key_slot("bar"));
  const std::string binary("\0{\xff}\n", 5);
  EXPECT_EQ(redis_key_slot(binary), redis_key_slot(std::string("\xff")));
}

TEST(RedisCluster, ParsesRedirects) {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, RedisRedirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->target, (RedisNodeAddress{"127.0.0.1", 6381}));
  auto ask = parse_redirect("ASK 16383 ::1:7000");
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, RedisRedirect::Kind::kAsk);
  EXPECT_EQ(ask->target, (RedisNodeAddress{"::1", 7000}));
  auto empty_host = parse_redirect("MOVED 1 :7001");
  ASSERT_TRUE(empty_host);
  EXPECT_EQ(empty_host->target.host, "");
  for (const char* bad : {"", "MOVED", "MOVED 16384 a:1", "MOVED x a:1", "MOVED 1 a", "MOVED 1 a:0",
                          "MOVED 1 a:65536", "ERR MOVED 1 a:1", "ASK 1  a:1x", "NOSCRIPT x"}) {
    EXPECT_FALSE(parse_redirect(bad)) << bad;
  }
  EXPECT_EQ(format_node_address({"::1", 7000}), "[::1]:7000");
  EXPECT_EQ(format_node_address({"10.0.0.1", 1}), "10.0.0.1:1");
}

TEST(RedisCluster, ParsesClusterSlots) {
  // Two ranges, the second with a replica; the master's host "" stays "".
  const auto reply = parse_resp(
      "*2\r\n"
      "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
      "*4\r\n:5461\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n*2\r\n$9\r\n127.0.0.1\r\n:7002\r\n");
  ASSERT_TRUE(reply);
  std::string error;
  const auto ranges = parse_cluster_slots(reply.get(), &error);
  ASSERT_TRUE(ranges) << error;
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].first, 0);
  EXPECT_EQ((*ranges)[0].last, 5460);
  EXPECT_EQ((*ranges)[0].master, (RedisNodeAddress{"127.0.0.1", 7000}));
  EXPECT_EQ((*ranges)[1].first, 5461);
  EXPECT_EQ((*ranges)[1].last, 16383);
  EXPECT_EQ((*ranges)[1].master, (RedisNodeAddress{"", 7001}));
}

TEST(RedisCluster, RefusesMalformedClusterSlots) {
  for (const char* bad : {
           "-ERR This instance has cluster support disabled\r\n", ":1\r\n", "*1\r\n:1\r\n",
           "*1\r\n*2\r\n:0\r\n:1\r\n",                              // no master
           "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",       // reversed
           "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",   // past the last slot
           "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",       // port 0
           "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",            // host not a string
           "*1\r\n*3\r\n$1\r\n0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n",  // slot not an integer
       }) {
    const auto reply = parse_resp(bad);
    ASSERT_TRUE(reply) << bad;
    std::string error;
    EXPECT_FALSE(parse_cluster_slots(reply.get(), &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
  std::string error;
  EXPECT_FALSE(parse_cluster_slots(nullptr, &error));
}

}  // namespace
}  // namespace rlimit::shell
