#include "core/glob.h"

#include <gtest/gtest.h>

namespace rlimit::core {
namespace {

bool glob_matches(const char* pattern, const char* text) {
  std::string error;
  auto glob = Glob::compile(pattern, &error);
  EXPECT_TRUE(glob.has_value()) << pattern << ": " << error;
  return glob && glob->matches(text);
}

TEST(GlobTest, Basics) {
  EXPECT_TRUE(glob_matches("/v1/*/login", "/v1/accounts/login"));
  EXPECT_TRUE(glob_matches("/v1/*/login", "/v1//login"));
  EXPECT_FALSE(glob_matches("/v1/*/login", "/v1/accounts/logout"));
  EXPECT_TRUE(glob_matches("*", ""));
  EXPECT_TRUE(glob_matches("a?c", "abc"));
  EXPECT_FALSE(glob_matches("a?c", "ac"));
  EXPECT_TRUE(glob_matches("*.example.com", "api.example.com"));
  EXPECT_FALSE(glob_matches("*.example.com", "example.com"));
  EXPECT_TRUE(glob_matches("a*b*c", "aXXbYYbc"));
  EXPECT_FALSE(glob_matches("abc", "abcd"));
}

TEST(GlobTest, SetsAndEscapes) {
  EXPECT_TRUE(glob_matches("10.0.0.[0-9]", "10.0.0.7"));
  EXPECT_FALSE(glob_matches("10.0.0.[0-9]", "10.0.0.a"));
  EXPECT_TRUE(glob_matches("[!a]x", "bx"));
  EXPECT_FALSE(glob_matches("[!a]x", "ax"));
  EXPECT_TRUE(glob_matches("[]]", "]"));
  EXPECT_TRUE(glob_matches("\\*", "*"));
  EXPECT_FALSE(glob_matches("\\*", "a"));
  EXPECT_TRUE(glob_matches("[a\\-z]", "-"));
}

TEST(GlobTest, PathologicalPatternStaysFast) {
  // Backtracking matchers go exponential here; ours resumes from the last star.
  const std::string text(10000, 'a');
  EXPECT_FALSE(glob_matches("*a*a*a*a*a*a*a*a*b", text.c_str()));
}

TEST(GlobTest, RejectsBadPatterns) {
  for (const char* bad : {"[abc", "abc\\", "[z-a]", "[!"}) {
    std::string error;
    EXPECT_FALSE(Glob::compile(bad, &error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

}  // namespace
}  // namespace rlimit::core
