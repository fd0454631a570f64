// config::load_rules: a rules document is checked by the config loader
// itself, only [[rule]] and [[exempt]] allowed, every error located, and the
// canonical text its digest is taken over.
#include <gtest/gtest.h>

#include "config/config.h"

namespace rlimit::config {
namespace {

TEST(RulesDocumentTest, LoadsRulesAndExemptions) {
  const LoadResult r = load_rules(
      "[[rule]]\r\nname = \"a\"\r\nmatch = { user = { each = true } }\r\nlimit = 5\r\n"
      "period = \"1s\"\r\n\r\n[[exempt]]\r\nmatch = { user = \"root\" }\r\n\n\n",
      "doc.toml", {});
  ASSERT_TRUE(r.ok()) << r.errors[0].to_string();
  ASSERT_EQ(r.config.rules.rules.size(), 1u);
  EXPECT_EQ(r.config.rules.rules[0].name, "a");
  EXPECT_EQ(r.config.rules.exemptions.size(), 1u);
  // CRLF made LF, exactly one final newline.
  EXPECT_EQ(r.config.rules_text,
            "[[rule]]\nname = \"a\"\nmatch = { user = { each = true } }\nlimit = 5\n"
            "period = \"1s\"\n\n[[exempt]]\nmatch = { user = \"root\" }\n");
  EXPECT_EQ(canonical_rules_text(r.config.rules_text), r.config.rules_text);
}

// Found by fuzz_config: "\r" became "\r\n" and "a\r\r\nb" became
// "a\r\nb", texts a second pass changed again, so one document had two
// "canonical" texts and two digests.
TEST(RulesDocumentTest, CanonicalTextIsCanonicalForStrayCarriageReturns) {
  EXPECT_EQ(canonical_rules_text("\r"), "");
  EXPECT_EQ(canonical_rules_text("a\r"), "a\n");
  EXPECT_EQ(canonical_rules_text("a\r\r\nb"), "a\nb\n");
  EXPECT_EQ(canonical_rules_text("a\n\r\n\r"), "a\n");
  EXPECT_EQ(canonical_rules_text("a\rb\n"), "a\rb\n");  // a CR inside a line stays
  for (const std::string text : {"\r", "a\r", "a\r\r\nb", "x\r\n\r\r", "\r\r\n\n\r"}) {
    const std::string once = canonical_rules_text(text);
    EXPECT_EQ(canonical_rules_text(once), once) << "text of " << text.size() << " bytes";
  }
  const LoadResult r = load_rules("\r", "doc.toml", {});
  ASSERT_TRUE(r.ok()) << r.errors[0].to_string();
  EXPECT_EQ(r.config.rules_text, "");
}

TEST(RulesDocumentTest, EveryErrorLocatedAndOtherSectionsRefused) {
  const LoadResult r = load_rules(
      "[daemon]\nlog_level = \"debug\"\n\n[[rule]]\nname = \"a\"\nlimit = -1\nperiod = \"1s\"\n"
      "match = { user = { each = true } }\n",
      "doc.toml", {});
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].line, 1u);
  EXPECT_NE(r.errors[0].message.find("only [[rule]] and [[exempt]]"), std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[1].line, 6u);
  EXPECT_GT(r.errors[1].column, 0u);
  EXPECT_TRUE(r.config.rules.rules.empty());
}

TEST(RulesDocumentTest, SyntaxErrorLocated) {
  const LoadResult r = load_rules("[[rule]\nname = 1\n", "doc.toml", {});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 1u);
  EXPECT_NE(r.errors[0].to_string().find("doc.toml:1:"), std::string::npos);
}

TEST(RulesDocumentTest, TheDaemonsBoundsAndClusterModeApply) {
  const std::string two =
      "[[rule]]\nname = \"a\"\nmatch = { u = { each = true } }\nlimit = 1\nperiod = \"1s\"\n"
      "[[rule]]\nname = \"b\"\nmatch = { v = { each = true } }\nlimit = 1\nperiod = \"1s\"\n";
  EXPECT_TRUE(load_rules(two, "doc", {}).ok());
  EXPECT_FALSE(load_rules(two, "doc", {.max_rules = 1}).ok());
  const std::string concurrency =
      "[[rule]]\nname = \"c\"\nalgorithm = \"concurrency\"\nmatch = { u = { each = true } }\n"
      "limit = 2\nlease_ttl = \"30s\"\n";
  EXPECT_TRUE(load_rules(concurrency, "doc", {.mode = ClusterMode::kNone}).ok());
  EXPECT_FALSE(load_rules(concurrency, "doc", {.mode = ClusterMode::kGossip}).ok());
}

TEST(RulesDocumentTest, AConfigFilesRulesAsADocument) {
  const LoadResult c = load_config(
      "[daemon]\nmax_rules = 7\n\n# comment\n[[rule]]\nname = \"a\"\n"
      "match = { user = { each = true } }\nlimit = 5\nperiod = \"1s\"\n",
      "rlimitd.toml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.config.daemon.max_rules, 7u);
  EXPECT_EQ(c.config.rules_text.find("daemon"), std::string::npos) << c.config.rules_text;
  // The extracted document loads as a rules document with the same rules.
  const LoadResult again = load_rules(c.config.rules_text, "extracted", {});
  ASSERT_TRUE(again.ok()) << again.errors[0].to_string() << "\n" << c.config.rules_text;
  ASSERT_EQ(again.config.rules.rules.size(), 1u);
  EXPECT_EQ(again.config.rules.rules[0].name, "a");
  EXPECT_FALSE(default_config().rules_text.empty());
  EXPECT_TRUE(load_rules(default_config().rules_text, "built-in", {}).ok());
}

}  // namespace
}  // namespace rlimit::config
