// The Redis hash layout of Redis mode: fields (incarnation, origin) and
// canonical decimal values, decoded from any bytes.
#include "shell/redis_hash_codec.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace rlimit::shell {
namespace {

TEST(RedisHashCodec, FieldIsSixteenHexDigitsThenTheOrigin) {
  EXPECT_EQ(encode_field("node-a", 1), "0000000000000001node-a");
  EXPECT_EQ(encode_field("", 0xfedcba9876543210ULL), "fedcba9876543210");
  const std::string binary_origin("a\0\xff:{}\r\n", 8);
  const auto decoded = decode_field(encode_field(binary_origin, 42));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->origin, binary_origin);
  EXPECT_EQ(decoded->incarnation, 42u);
  // An origin that itself starts with hex digits stays unambiguous.
  const auto hexy = decode_field(encode_field("0000000000000009x", 7));
  ASSERT_TRUE(hexy);
  EXPECT_EQ(hexy->origin, "0000000000000009x");
  EXPECT_EQ(hexy->incarnation, 7u);
}

TEST(RedisHashCodec, FieldsThatAreNotTheLayoutDoNotDecode) {
  EXPECT_FALSE(decode_field(""));
  EXPECT_FALSE(decode_field("000000000000001"));       // 15 digits
  EXPECT_FALSE(decode_field("000000000000000Anode"));  // upper case: another field
  EXPECT_FALSE(decode_field("00000000000000g0node"));
  EXPECT_TRUE(decode_field("0000000000000000"));  // empty origin
}

TEST(RedisHashCodec, ConsumedIsCanonicalDecimalUpToTwoToTheSixtyFourMinusOne) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(encode_consumed(0), "0");
  EXPECT_EQ(encode_consumed(kMax), "18446744073709551615");
  EXPECT_EQ(decode_consumed("18446744073709551615"), kMax);
  EXPECT_EQ(decode_consumed("9007199254740993"), 9007199254740993ULL);  // 2^53 + 1
  EXPECT_EQ(decode_consumed("0"), 0u);
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999", "01", "-1", "+1",
                          " 1", "1 ", "1e3", "0x10", "00"}) {
    EXPECT_FALSE(decode_consumed(bad)) << bad;
  }
}

TEST(RedisHashCodec, DecodeFieldsSkipsAndCountsWhatDoesNotDecode) {
  const std::string a = encode_field("a", 1);
  const std::string b = encode_field("b", 2);
  const DecodedFields decoded =
      decode_fields({a, "10", "junk", "5", b, "x", b, "20", "lone-field"});
  ASSERT_EQ(decoded.entries.size(), 2u);
  EXPECT_EQ(decoded.entries[0], (core::StoreEntry{"a", 1, 10}));
  EXPECT_EQ(decoded.entries[1], (core::StoreEntry{"b", 2, 20}));
  EXPECT_EQ(decoded.skipped, 3u);  // "junk", b's "x", the lone field
  EXPECT_TRUE(decode_fields({}).entries.empty());
}

}  // namespace
}  // namespace rlimit::shell
