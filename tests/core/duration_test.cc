#include "core/duration.h"

#include <gtest/gtest.h>

#include "core/time.h"

namespace rlimit::core {
namespace {

TEST(DurationTest, ParsesEveryUnit) {
  EXPECT_EQ(parse_duration("1us").us, 1);
  EXPECT_EQ(parse_duration("250ms").us, 250 * kUsPerMs);
  EXPECT_EQ(parse_duration("1s").us, kUsPerSecond);
  EXPECT_EQ(parse_duration("30s").us, 30 * kUsPerSecond);
  EXPECT_EQ(parse_duration("5m").us, 300 * kUsPerSecond);
  EXPECT_EQ(parse_duration("1h").us, 3600 * kUsPerSecond);
  EXPECT_EQ(parse_duration("1d").us, 86400 * kUsPerSecond);
  EXPECT_EQ(parse_duration("1h30m").us, 5400 * kUsPerSecond);
}

TEST(DurationTest, RejectsBadInput) {
  for (const char* bad : {"", "10", "5x", "s", "1.5s", "-1s", "1 s", "1s2"}) {
    const DurationParse parsed = parse_duration(bad);
    EXPECT_FALSE(parsed.us.has_value()) << bad;
    EXPECT_FALSE(parsed.error.empty()) << bad;
  }
  EXPECT_NE(parse_duration("5x").error.find("unknown unit \"x\""), std::string::npos);
  EXPECT_FALSE(parse_duration("99999999999d").us.has_value());
  EXPECT_FALSE(parse_duration("36600d1d").us.has_value());
}

TEST(DurationTest, FormatsExactly) {
  EXPECT_EQ(format_duration(kUsPerSecond), "1s");
  EXPECT_EQ(format_duration(1500 * kUsPerMs), "1500ms");
  EXPECT_EQ(format_duration(3600 * kUsPerSecond), "1h");
  EXPECT_EQ(format_duration(86400 * kUsPerSecond), "1d");
  EXPECT_EQ(format_duration(7), "7us");
  EXPECT_EQ(format_duration(0), "0s");
}

}  // namespace
}  // namespace rlimit::core
