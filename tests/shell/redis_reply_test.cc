// Hash replies decoded from RESP as a server sends them (bad fields skipped
// and counted) and a reply's size on the wire.
#include "shell/redis_reply.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <utility>

#include "support/redis_resp.h"

namespace rlimit::shell {
namespace {

using testing::parse_resp;

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

TEST(RedisReply, DecodesAHashReply) {
  const std::string resp = "*6\r\n" + bulk(encode_field("a", 3)) + bulk("7") + bulk("bad") +
                           bulk("1") + bulk(encode_field("b", 1)) + bulk("18446744073709551615");
  const auto reply = parse_resp(resp);
  ASSERT_TRUE(reply);
  const auto decoded = decode_hash_reply(reply.get());
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->entries.size(), 2u);
  EXPECT_EQ(decoded->entries[0], (core::StoreEntry{"a", 3, 7}));
  EXPECT_EQ(decoded->entries[1].consumed, 18446744073709551615ULL);
  EXPECT_EQ(decoded->skipped, 1u);
  EXPECT_EQ(resp_encoded_size(reply.get()), resp.size());
}

TEST(RedisReply, EmptyArrayIsAnEmptyHash) {
  const auto reply = parse_resp("*0\r\n");
  const auto decoded = decode_hash_reply(reply.get());
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->entries.empty());
  EXPECT_EQ(decoded->skipped, 0u);
}

TEST(RedisReply, ElementsThatAreNotStringsAreSkipped) {
  const std::string resp =
      "*5\r\n:1\r\n" + bulk("2") + bulk(encode_field("a", 1)) + "*1\r\n:1\r\n" + bulk("lone");
  const auto reply = parse_resp(resp);
  ASSERT_TRUE(reply);
  const auto decoded = decode_hash_reply(reply.get());
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->entries.empty());
  EXPECT_EQ(decoded->skipped, 3u);
  EXPECT_EQ(resp_encoded_size(reply.get()), resp.size());
}

TEST(RedisReply, NotAnArrayIsRefused) {
  for (const char* resp : {"+OK\r\n", "-ERR x\r\n", ":5\r\n", "$-1\r\n", "$3\r\nabc\r\n"}) {
    const auto reply = parse_resp(resp);
    ASSERT_TRUE(reply) << resp;
    EXPECT_FALSE(decode_hash_reply(reply.get())) << resp;
    EXPECT_EQ(resp_encoded_size(reply.get()), std::string(resp).size()) << resp;
  }
  EXPECT_FALSE(decode_hash_reply(nullptr));
  EXPECT_EQ(resp_encoded_size(nullptr), 0u);
  EXPECT_EQ(resp_encoded_size(parse_resp(":-12\r\n").get()), 6u);
}

// Found by fuzz_redis_reply: "*163844282\r\n" (12 bytes from the server) made
// hiredis allocate 1.3 GB of element pointers before any element arrived.
TEST(RedisReplyTest, AnArrayAboveTheBoundIsRefusedBeforeItIsAllocated) {
  const auto read_one = [](const std::string& resp, void** reply) {
    redisReader* reader = redisReaderCreate();
    bound_reply_arrays(reader);
    EXPECT_EQ(redisReaderFeed(reader, resp.data(), resp.size()), REDIS_OK);
    const int status = redisReaderGetReply(reader, reply);
    const int err = reader->err;
    redisReaderFree(reader);
    return std::pair{status, err};
  };
  void* reply = nullptr;
  const auto [refused, refused_err] =
      read_one("*" + std::to_string(kMaxReplyArrayElements + 1) + "\r\n", &reply);
  EXPECT_EQ(refused, REDIS_ERR);
  EXPECT_EQ(refused_err, REDIS_ERR_OOM);
  EXPECT_EQ(reply, nullptr);
  EXPECT_EQ(read_one("*163844282\r\n", &reply).first, REDIS_ERR);

  // Below the bound, arrays read as before.
  const auto [read, read_err] = read_one("*2\r\n:1\r\n$1\r\nx\r\n", &reply);
  ASSERT_EQ(read, REDIS_OK);
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(static_cast<redisReply*>(reply)->elements, 2u);
  freeReplyObject(reply);
}

}  // namespace
}  // namespace rlimit::shell
