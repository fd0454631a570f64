#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_util.h"
#include "core/limiter.h"
#include "core/cluster_node.h"
#include "core/membership.h"
#include "core/rule.h"
#include "core/token_bucket.h"

namespace rlimit::config {
namespace {

using core::ValueMatchKind;

using test_util::all_errors;
using test_util::kSecondUs;
using test_util::load;

// Succeeds when loading `text` gives exactly one error, at line:column, whose
// message contains every one of `needles`.
::testing::AssertionResult one_error(std::string_view text, std::uint32_t line,
                                     std::uint32_t column,
                                     std::initializer_list<std::string_view> needles) {
  const LoadResult result = load(text);
  if (result.errors.size() != 1) {
    return ::testing::AssertionFailure()
           << "expected 1 error, got " << result.errors.size() << ":\n"
           << all_errors(result);
  }
  const ConfigError& e = result.errors[0];
  if (e.file != "test.toml" || e.line != line || e.column != column) {
    return ::testing::AssertionFailure() << "expected the error at test.toml:" << line << ":"
                                         << column << ", got " << e.to_string();
  }
  for (std::string_view needle : needles) {
    if (e.message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << e.to_string();
    }
  }
  return ::testing::AssertionSuccess();
}

// A rule that is valid on its own, to append after other text.
constexpr std::string_view kValidRule = R"(
[[rule]]
name = "ok"
match = {}
limit = 1
period = "1s"
)";

// A rule built around `body` lines (which follow the header at line 1).
std::string rule_with(std::string_view body) { return "[[rule]]\n" + std::string(body); }

const core::Rule& rule_named(const Config& config, std::string_view name) {
  for (const core::Rule& rule : config.rules.rules) {
    if (rule.name == name) return rule;
  }
  ADD_FAILURE() << "no rule " << name;
  static const core::Rule kNone;
  return kNone;
}

// ----- valid input ----------------------------------------------------------

TEST(ConfigTest, EmptyFileGivesDefaults) {
  const LoadResult result = load("");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const DaemonSettings& d = result.config.daemon;
  const DaemonSettings defaults;
  EXPECT_EQ(d.node_id, "");
  EXPECT_EQ(d.socket_path, "");
  EXPECT_EQ(d.socket_mode, 0660u);
  EXPECT_EQ(d.log_level, "info");
  EXPECT_EQ(d.max_frame_bytes, 65536u);
  EXPECT_EQ(d.max_checks_per_frame, 1024u);
  EXPECT_EQ(d.max_connections, 1024u);
  EXPECT_EQ(d.sweep_interval_us, 100'000);
  EXPECT_EQ(d.sweep_batch, 10'000u);
  EXPECT_EQ(d.shutdown_grace_us, 2 * kSecondUs);
  EXPECT_EQ(d.limiter.max_keys, defaults.limiter.max_keys);
  EXPECT_EQ(d.limiter.key_table_full, core::KeyTableFullPolicy::kAllow);
  EXPECT_TRUE(d.limiter.allow_inline_limits);
  EXPECT_TRUE(d.allow_reset);
  EXPECT_TRUE(result.config.rules.rules.empty());
  EXPECT_TRUE(result.config.rules.exemptions.empty());
  EXPECT_EQ(result.config.source, "test.toml");
  EXPECT_EQ(result.config.cluster.mode, ClusterMode::kNone);
}

TEST(ConfigTest, EmptyDaemonTableGivesDefaults) {
  const LoadResult result = load("[daemon]\n");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  EXPECT_EQ(result.config.daemon.socket_mode, 0660u);
  EXPECT_EQ(result.config.daemon.log_level, "info");
}

TEST(ConfigTest, EveryDaemonKey) {
  const LoadResult result = load(R"([daemon]
node_id = "web-7"
socket = "/run/rlimit/rlimitd.sock"
socket_mode = "600"
log_level = "debug"
max_frame_bytes = 16777216
max_checks_per_frame = 1
max_connections = 1000000
max_keys = 1000000000
key_table_full = "deny"
inline_limits = false
sweep_interval = "1s"
sweep_batch = 500
shutdown_grace = "0s"
max_rules = 1
max_descriptors_per_check = 8
max_response_bytes = 1024
allow_reset = false
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const DaemonSettings& d = result.config.daemon;
  EXPECT_EQ(d.node_id, "web-7");
  EXPECT_EQ(d.socket_path, "/run/rlimit/rlimitd.sock");
  EXPECT_EQ(d.socket_mode, 0600u);
  EXPECT_EQ(d.log_level, "debug");
  EXPECT_EQ(d.max_frame_bytes, 16777216u);
  EXPECT_EQ(d.max_checks_per_frame, 1u);
  EXPECT_EQ(d.limiter.max_descriptors_per_check, 8u);
  EXPECT_EQ(d.max_response_bytes, 1024u);
  EXPECT_EQ(d.max_connections, 1'000'000u);
  EXPECT_EQ(d.limiter.max_keys, 1'000'000'000u);
  EXPECT_EQ(d.limiter.key_table_full, core::KeyTableFullPolicy::kDeny);
  EXPECT_FALSE(d.limiter.allow_inline_limits);
  EXPECT_EQ(d.sweep_interval_us, kSecondUs);
  EXPECT_EQ(d.sweep_batch, 500u);
  EXPECT_EQ(d.shutdown_grace_us, 0);
  EXPECT_FALSE(d.allow_reset);
}

TEST(ConfigTest, ConnectionTimeouts) {
  const LoadResult defaults = load("");
  ASSERT_TRUE(defaults.ok()) << all_errors(defaults);
  EXPECT_EQ(defaults.config.daemon.write_timeout_us, 10 * kSecondUs);
  EXPECT_EQ(defaults.config.daemon.idle_timeout_us, 0);
  const LoadResult set = load("[daemon]\nwrite_timeout = \"0s\"\nidle_timeout = \"5m\"\n");
  ASSERT_TRUE(set.ok()) << all_errors(set);
  EXPECT_EQ(set.config.daemon.write_timeout_us, 0);
  EXPECT_EQ(set.config.daemon.idle_timeout_us, 300 * kSecondUs);
  EXPECT_TRUE(one_error("[daemon]\nidle_timeout = 5\n", 2, 16,
                        {"daemon: idle_timeout must be a string such as \"1s\", not an integer"}));
}

TEST(ConfigTest, BusyPollIsBounded) {
  const LoadResult defaults = load("");
  ASSERT_TRUE(defaults.ok()) << all_errors(defaults);
  EXPECT_EQ(defaults.config.daemon.busy_poll_us, 0);
  const LoadResult set = load("[daemon]\nbusy_poll = \"50us\"\n");
  ASSERT_TRUE(set.ok()) << all_errors(set);
  EXPECT_EQ(set.config.daemon.busy_poll_us, 50);
  EXPECT_TRUE(one_error("[daemon]\nbusy_poll = \"20ms\"\n", 2, 13,
                        {"daemon: busy_poll \"20ms\": must be at most 10ms"}));
  EXPECT_TRUE(one_error("[daemon]\nbusy_poll = \"-1us\"\n", 2, 13, {"busy_poll \"-1us\""}));
}

TEST(ConfigTest, EveryLogLevelIsAccepted) {
  for (std::string_view level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    const LoadResult result = load("[daemon]\nlog_level = \"" + std::string(level) + "\"\n");
    ASSERT_TRUE(result.ok()) << level << "\n" << all_errors(result);
    EXPECT_EQ(result.config.daemon.log_level, level);
  }
}

TEST(ConfigTest, LogFormatIsTextOrJson) {
  EXPECT_EQ(load("").config.daemon.log_format, "text");
  for (std::string_view format : {"text", "json"}) {
    const LoadResult result = load("[daemon]\nlog_format = \"" + std::string(format) + "\"\n");
    ASSERT_TRUE(result.ok()) << format << "\n" << all_errors(result);
    EXPECT_EQ(result.config.daemon.log_format, format);
  }
}

TEST(ConfigTest, ExampleFileLoadsIntoTheExpectedStructures) {
  const std::string path = std::string(RLIMIT_SOURCE_DIR) + "/config/rlimitd.toml";
  const LoadResult result = load_config_file(path);
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const Config& config = result.config;
  EXPECT_EQ(config.source, path);

  const DaemonSettings& d = config.daemon;
  EXPECT_EQ(d.node_id, "");
  EXPECT_EQ(d.socket_path, "");
  EXPECT_EQ(d.socket_mode, 0660u);
  EXPECT_EQ(d.log_level, "info");
  EXPECT_EQ(d.max_frame_bytes, 65536u);
  EXPECT_EQ(d.max_checks_per_frame, 1024u);
  EXPECT_EQ(d.max_connections, 1024u);
  EXPECT_EQ(d.limiter.max_keys, 1'000'000u);
  EXPECT_EQ(d.limiter.key_table_full, core::KeyTableFullPolicy::kAllow);
  EXPECT_TRUE(d.limiter.allow_inline_limits);
  EXPECT_EQ(d.sweep_interval_us, 100'000);
  EXPECT_EQ(d.sweep_batch, 10'000u);
  EXPECT_EQ(d.shutdown_grace_us, 2 * kSecondUs);

  ASSERT_EQ(config.rules.rules.size(), 5u);
  // File order is kept.
  EXPECT_EQ(config.rules.rules[0].name, "per-user");
  EXPECT_EQ(config.rules.rules[4].name, "login");

  const core::Rule& per_user = rule_named(config, "per-user");
  ASSERT_EQ(per_user.match.size(), 1u);
  EXPECT_EQ(per_user.match[0].key, "user");
  EXPECT_EQ(per_user.match[0].value.kind, ValueMatchKind::kAny);
  EXPECT_TRUE(per_user.match[0].value.each);
  EXPECT_EQ(per_user.params, (core::BucketParams{10, kSecondUs, 20}));
  EXPECT_EQ(per_user.algorithm, core::Algorithm::kTokenBucket);
  ASSERT_EQ(per_user.overrides.size(), 1u);
  ASSERT_EQ(per_user.overrides[0].match.size(), 1u);
  EXPECT_EQ(per_user.overrides[0].match[0].key, "tier");
  EXPECT_EQ(per_user.overrides[0].match[0].value.kind, ValueMatchKind::kExact);
  EXPECT_EQ(per_user.overrides[0].match[0].value.pattern, "premium");
  EXPECT_FALSE(per_user.overrides[0].match[0].value.each);
  EXPECT_EQ(per_user.overrides[0].params, (core::BucketParams{100, kSecondUs, 200}));
  EXPECT_EQ(per_user.where.file, path);
  EXPECT_GT(per_user.where.line, 0u);
  EXPECT_EQ(per_user.where.column, 1u);

  const core::Rule& daily = rule_named(config, "per-user-daily");
  EXPECT_EQ(daily.params, (core::BucketParams{10'000, 86'400 * kSecondUs, 10'000}));
  EXPECT_TRUE(daily.overrides.empty());

  const core::Rule& per_ip = rule_named(config, "per-ip");
  ASSERT_EQ(per_ip.match.size(), 1u);
  EXPECT_EQ(per_ip.match[0].key, "ip");
  EXPECT_TRUE(per_ip.match[0].value.each);
  EXPECT_EQ(per_ip.params, (core::BucketParams{100, kSecondUs, 200}));

  const core::Rule& search = rule_named(config, "search-global");
  ASSERT_EQ(search.match.size(), 1u);
  EXPECT_EQ(search.match[0].key, "path");
  EXPECT_EQ(search.match[0].value.kind, ValueMatchKind::kPrefix);
  EXPECT_EQ(search.match[0].value.pattern, "/api/search");
  EXPECT_FALSE(search.match[0].value.each);
  EXPECT_EQ(search.params, (core::BucketParams{500, kSecondUs, 500}));

  const core::Rule& login = rule_named(config, "login");
  ASSERT_EQ(login.match.size(), 2u);
  EXPECT_EQ(login.match[0].key, "ip");  // sorted by key
  EXPECT_EQ(login.match[0].value.kind, ValueMatchKind::kAny);
  EXPECT_TRUE(login.match[0].value.each);
  EXPECT_EQ(login.match[1].key, "path");
  EXPECT_EQ(login.match[1].value.kind, ValueMatchKind::kGlob);
  ASSERT_TRUE(login.match[1].value.glob.has_value());
  EXPECT_TRUE(login.match[1].value.matches("/v1/web/login"));
  EXPECT_FALSE(login.match[1].value.matches("/v1/web/logout"));
  EXPECT_EQ(login.params, (core::BucketParams{5, 60 * kSecondUs, 5}));

  ASSERT_EQ(config.rules.exemptions.size(), 2u);
  const core::Exemption& health = config.rules.exemptions[0];
  ASSERT_EQ(health.match.size(), 1u);
  EXPECT_EQ(health.match[0].key, "user");
  EXPECT_EQ(health.match[0].value.kind, ValueMatchKind::kExact);
  EXPECT_EQ(health.match[0].value.pattern, "healthcheck");
  EXPECT_TRUE(health.rules.empty());
  EXPECT_GT(health.where.line, 0u);
  const core::Exemption& internal = config.rules.exemptions[1];
  ASSERT_EQ(internal.match.size(), 1u);
  EXPECT_EQ(internal.match[0].value.kind, ValueMatchKind::kPrefix);
  EXPECT_EQ(internal.rules, (std::vector<std::string>{"per-ip"}));

  // The [cluster] example is commented out: a single node.
  EXPECT_EQ(config.cluster.mode, ClusterMode::kNone);
}

TEST(ConfigTest, RuleWhereIsTheRuleHeader) {
  const LoadResult result = load(R"([daemon]
log_level = "warn"

[[rule]]
name = "a"
match = {}
limit = 1
period = "1s"

[[exempt]]
match = { user = "x" }
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const core::Rule& rule = result.config.rules.rules.at(0);
  EXPECT_EQ(rule.where.file, "test.toml");
  EXPECT_EQ(rule.where.line, 4u);
  EXPECT_EQ(rule.where.column, 1u);
  EXPECT_EQ(rule.where.to_string(), "test.toml:4:1");
  const core::Exemption& exemption = result.config.rules.exemptions.at(0);
  EXPECT_EQ(exemption.where.line, 10u);
  EXPECT_EQ(exemption.where.column, 1u);
}

TEST(ConfigTest, BurstDefaultsToLimitAndAlgorithmToTokenBucket) {
  const LoadResult result = load(R"([[rule]]
name = "r"
match = {}
limit = 7
period = "1s"
algorithm = "token_bucket"
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const core::Rule& rule = result.config.rules.rules.at(0);
  EXPECT_EQ(rule.params, (core::BucketParams{7, kSecondUs, 7}));
  EXPECT_EQ(rule.algorithm, core::Algorithm::kTokenBucket);
  EXPECT_TRUE(rule.match.empty());  // every request
}

TEST(ConfigTest, LimitAndBurstMayBeZeroOrTheMaximum) {
  const LoadResult zero = load(rule_with("name = \"r\"\nmatch = {}\nlimit = 0\nperiod = \"1s\"\n"));
  ASSERT_TRUE(zero.ok()) << all_errors(zero);
  EXPECT_EQ(zero.config.rules.rules.at(0).params, (core::BucketParams{0, kSecondUs, 0}));

  const std::string max = std::to_string(core::kMaxTokens);
  const LoadResult big = load(rule_with("name = \"r\"\nmatch = {}\nlimit = " + max +
                                        "\nburst = " + max + "\nperiod = \"1s\"\n"));
  ASSERT_TRUE(big.ok()) << all_errors(big);
  EXPECT_EQ(big.config.rules.rules.at(0).params.burst, core::kMaxTokens);
}

TEST(ConfigTest, Durations) {
  struct Case {
    std::string_view text;
    std::int64_t us;
  };
  for (const Case& c :
       {Case{"250ms", 250'000}, Case{"1s", kSecondUs}, Case{"30s", 30 * kSecondUs},
        Case{"5m", 300 * kSecondUs}, Case{"1h", 3600 * kSecondUs}, Case{"1h30m", 5400 * kSecondUs},
        Case{"1d", 86'400 * kSecondUs}, Case{"1us", 1}, Case{"36600d", core::kMaxPeriodUs}}) {
    const LoadResult result = load(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"" +
                                             std::string(c.text) + "\"\n"));
    ASSERT_TRUE(result.ok()) << c.text << "\n" << all_errors(result);
    EXPECT_EQ(result.config.rules.rules.at(0).params.period_us, c.us) << c.text;
  }
  const LoadResult daemon =
      load("[daemon]\nsweep_interval = \"1m\"\nshutdown_grace = \"1500ms\"\n");
  ASSERT_TRUE(daemon.ok()) << all_errors(daemon);
  EXPECT_EQ(daemon.config.daemon.sweep_interval_us, 60 * kSecondUs);
  EXPECT_EQ(daemon.config.daemon.shutdown_grace_us, 1'500'000);
}

TEST(ConfigTest, MatcherForms) {
  // Keys in TOML order z, a, m, e, g, p; the result is sorted by key.
  const LoadResult result = load(R"([[rule]]
name = "r"
match = { z = "exact", a = {}, m = { each = true }, e = { equals = "x", each = true }, g = { glob = "a*" }, p = { prefix = "/api/", each = false } }
limit = 1
period = "1s"
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const std::vector<core::DescriptorMatch>& match = result.config.rules.rules.at(0).match;
  ASSERT_EQ(match.size(), 6u);
  EXPECT_EQ(match[0].key, "a");
  EXPECT_EQ(match[0].value.kind, ValueMatchKind::kAny);
  EXPECT_FALSE(match[0].value.each);
  EXPECT_EQ(match[1].key, "e");
  EXPECT_EQ(match[1].value.kind, ValueMatchKind::kExact);
  EXPECT_EQ(match[1].value.pattern, "x");
  EXPECT_TRUE(match[1].value.each);
  EXPECT_EQ(match[2].key, "g");
  EXPECT_EQ(match[2].value.kind, ValueMatchKind::kGlob);
  ASSERT_TRUE(match[2].value.glob.has_value());
  EXPECT_EQ(match[2].value.glob->pattern(), "a*");
  EXPECT_EQ(match[3].key, "m");
  EXPECT_EQ(match[3].value.kind, ValueMatchKind::kAny);
  EXPECT_TRUE(match[3].value.each);
  EXPECT_EQ(match[4].key, "p");
  EXPECT_EQ(match[4].value.kind, ValueMatchKind::kPrefix);
  EXPECT_EQ(match[4].value.pattern, "/api/");
  EXPECT_FALSE(match[4].value.each);
  EXPECT_EQ(match[5].key, "z");
  EXPECT_EQ(match[5].value.kind, ValueMatchKind::kExact);
  EXPECT_EQ(match[5].value.pattern, "exact");
  EXPECT_FALSE(match[5].value.each);
}

TEST(ConfigTest, MatchWrittenAsDottedKeysAndSubtables) {
  const LoadResult result = load(R"([[rule]]
name = "r"
limit = 1
period = "1s"
match.user.each = true
[rule.match.path]
prefix = "/x"
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const std::vector<core::DescriptorMatch>& match = result.config.rules.rules.at(0).match;
  ASSERT_EQ(match.size(), 2u);
  EXPECT_EQ(match[0].key, "path");
  EXPECT_EQ(match[0].value.kind, ValueMatchKind::kPrefix);
  EXPECT_EQ(match[1].key, "user");
  EXPECT_TRUE(match[1].value.each);
}

TEST(ConfigTest, Overrides) {
  const LoadResult result = load(R"([[rule]]
name = "r"
match = { user = { each = true } }
limit = 10
period = "1s"
burst = 20

[[rule.override]]
match = { tier = "gold" }
multiplier = 3

[[rule.override]]
match = { tier = "silver" }
limit = 15

[[rule.override]]
match = { tier = "bronze" }
period = "1m"

[[rule.override]]
match = { tier = "iron" }
multiplier = 2
period = "2s"

[[rule.override]]
match = { tier = "wood", region = { prefix = "eu-" } }
limit = 1
period = "1h"
burst = 5
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const core::Rule& rule = result.config.rules.rules.at(0);
  ASSERT_EQ(rule.overrides.size(), 5u);
  // File order is the order they are tried in.
  EXPECT_EQ(rule.overrides[0].match.at(0).value.pattern, "gold");
  EXPECT_EQ(rule.overrides[0].params, (core::BucketParams{30, kSecondUs, 60}));
  // Unspecified values come from the rule, including its explicit burst.
  EXPECT_EQ(rule.overrides[1].params, (core::BucketParams{15, kSecondUs, 20}));
  EXPECT_EQ(rule.overrides[2].params, (core::BucketParams{10, 60 * kSecondUs, 20}));
  EXPECT_EQ(rule.overrides[3].params, (core::BucketParams{20, 2 * kSecondUs, 40}));
  EXPECT_EQ(rule.overrides[4].params, (core::BucketParams{1, 3600 * kSecondUs, 5}));
  ASSERT_EQ(rule.overrides[4].match.size(), 2u);
  EXPECT_EQ(rule.overrides[4].match[0].key, "region");
  EXPECT_EQ(rule.overrides[4].match[1].key, "tier");
}

TEST(ConfigTest, OverrideBurstFollowsItsLimitWhenTheRuleLeftBurstDefault) {
  const LoadResult result = load(R"([[rule]]
name = "r"
match = {}
limit = 10
period = "1s"
[[rule.override]]
match = { tier = "gold" }
limit = 100
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  EXPECT_EQ(result.config.rules.rules.at(0).overrides.at(0).params,
            (core::BucketParams{100, kSecondUs, 100}));
}

TEST(ConfigTest, Exemptions) {
  const LoadResult result = load(R"([[rule]]
name = "a"
match = {}
limit = 1
period = "1s"
[[rule]]
name = "b"
match = {}
limit = 1
period = "1s"

[[exempt]]
match = { user = "healthcheck" }

[[exempt]]
match = { ip = { prefix = "10." } }
rules = ["b", "a"]
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  ASSERT_EQ(result.config.rules.exemptions.size(), 2u);
  EXPECT_TRUE(result.config.rules.exemptions[0].rules.empty());
  EXPECT_EQ(result.config.rules.exemptions[1].rules, (std::vector<std::string>{"b", "a"}));
}

TEST(ConfigTest, RuleNamesMayUseTheWholeAlphabet) {
  const std::string name(128, 'x');
  for (const std::string& ok : {std::string("a.b:c-d_E9"), name}) {
    const LoadResult result = load(rule_with("name = \"" + ok +
                                             "\"\nmatch = {}\nlimit = 1\n"
                                             "period = \"1s\"\n"));
    EXPECT_TRUE(result.ok()) << ok << "\n" << all_errors(result);
  }
}

TEST(ConfigTest, DefaultConfig) {
  const Config config = default_config();
  EXPECT_EQ(config.source, "<built-in>");
  const DaemonSettings defaults;
  EXPECT_EQ(config.daemon.socket_mode, defaults.socket_mode);
  EXPECT_EQ(config.daemon.max_frame_bytes, defaults.max_frame_bytes);
  EXPECT_EQ(config.daemon.log_level, defaults.log_level);
  ASSERT_EQ(config.rules.rules.size(), 1u);
  const core::Rule& rule = config.rules.rules[0];
  EXPECT_EQ(rule.name, "per-user");
  EXPECT_EQ(rule.params, (core::BucketParams{10, kSecondUs, 20}));
  EXPECT_EQ(rule.where.file, "<built-in>");
  EXPECT_TRUE(config.rules.exemptions.empty());

  // The same rule written in TOML is the same definition.
  const LoadResult written = load(R"([[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 10
period = "1s"
burst = 20
)");
  ASSERT_TRUE(written.ok()) << all_errors(written);
  EXPECT_TRUE(rule.same_definition(written.config.rules.rules.at(0)));
}

// ----- files and messages ---------------------------------------------------

TEST(ConfigTest, MissingFileIsOneErrorNamingTheFile) {
  const std::string path = "/nonexistent/rlimit/config.toml";
  const LoadResult result = load_config_file(path);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.errors[0].file, path);
  EXPECT_EQ(result.errors[0].line, 0u);
  EXPECT_NE(result.errors[0].to_string().find(path), std::string::npos);
  EXPECT_NE(result.errors[0].message.find("No such file"), std::string::npos)
      << result.errors[0].message;
}

TEST(ConfigTest, DirectoryIsNotAConfigFile) {
  const LoadResult result = load_config_file(RLIMIT_SOURCE_DIR);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].file, RLIMIT_SOURCE_DIR);
}

TEST(ConfigTest, ErrorToString) {
  const ConfigError located{"rlimitd.toml", 12, 9, "rule \"api\": bad"};
  EXPECT_EQ(located.to_string(), "rlimitd.toml:12:9: rule \"api\": bad");
  const ConfigError whole_file{"/etc/rlimitd.toml", 0, 0, "cannot open"};
  EXPECT_EQ(whole_file.to_string(), "/etc/rlimitd.toml: cannot open");
}

TEST(ConfigTest, PeriodErrorReadsLikeTheExample) {
  const LoadResult result = load(R"([[rule]]
name = "api"
match = {}
limit = 1
period = "5x"
)");
  ASSERT_EQ(result.errors.size(), 1u) << all_errors(result);
  EXPECT_EQ(result.errors[0].to_string().rfind(
                "test.toml:5:10: rule \"api\": period \"5x\": unknown unit \"x\"", 0),
            0u)
      << result.errors[0].to_string();
}

TEST(ConfigTest, AllErrorsAreReportedInFileOrder) {
  const LoadResult result = load(R"([daemon]
socket_mode = "999"
log_level = "loud"

[[rule]]
name = "a"
match = { zz = { bogus = 1 }, aa = 5 }
limit = -1
period = "0s"

[[rule]]
name = "a"
match = {}
limit = 1
period = "1s"
spare = true

[[exempt]]
match = { user = "x" }
rules = ["nope"]
)");
  ASSERT_FALSE(result.ok());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> positions;
  for (const ConfigError& e : result.errors) positions.emplace_back(e.line, e.column);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> expected = {
      {2, 15}, {3, 13}, {7, 18}, {7, 36}, {8, 9}, {9, 10}, {12, 8}, {16, 1}, {20, 10}};
  EXPECT_EQ(positions, expected) << all_errors(result);
  // A config with errors is not usable, and is not pretended to be.
  EXPECT_TRUE(result.config.rules.rules.empty());
}

TEST(ConfigTest, ProblemsInOneRuleDoNotHideOthersOrBlameExemptions) {
  // Rule "a" is broken but validly named: the exemption naming it is fine.
  const LoadResult result = load(R"([[rule]]
name = "a"
match = {}
limit = "x"
period = "1s"
[[exempt]]
match = { user = "x" }
rules = ["a"]
)");
  ASSERT_EQ(result.errors.size(), 1u) << all_errors(result);
  EXPECT_EQ(result.errors[0].line, 4u);
}

// ----- each error case ------------------------------------------------------

TEST(ConfigErrorTest, TomlSyntaxError) {
  EXPECT_TRUE(one_error("[daemon]\nlog_level = \"info\nmax_keys = 5\n", 2, 18, {"invalid TOML"}));
  EXPECT_TRUE(one_error("a = 1\na = 2\n", 2, 5, {"invalid TOML", "redefine"}));
  // One error only, even when more problems follow.
  EXPECT_TRUE(one_error("[[rule]\nname = 5\n", 1, 8, {"invalid TOML"}));
}

TEST(ConfigErrorTest, UnknownTopLevelKey) {
  EXPECT_TRUE(one_error("rules = 1\n", 1, 1,
                        {"top level", "unknown key \"rules\"", "did you mean \"rule\""}));
  EXPECT_TRUE(
      one_error("[limits]\n", 1, 2,
                {"unknown key \"limits\"", "daemon, cluster, redis, http, grpc, rule, exempt"}));
}

TEST(ConfigTest, FacesAreOffUnlessConfigured) {
  const LoadResult result = load("");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.config.http.listen.empty());
  EXPECT_TRUE(result.config.grpc.listen.empty());
  EXPECT_TRUE(result.config.grpc.unix_socket.empty());
}

TEST(ConfigTest, HttpAndGrpcSections) {
  const LoadResult result = load(
      "[http]\nlisten = \"127.0.0.1:8081\"\ndeny_status = 403\nietf_headers = false\n"
      "max_body_bytes = 1024\nmax_header_bytes = 4096\nmax_connections = 8\n"
      "request_timeout = \"2s\"\nidle_timeout = \"30s\"\n"
      "[grpc]\nlisten = \"[::1]:8091\"\nunix_socket = \"/run/rlimit/grpc.sock\"\n"
      "ietf_headers = false\nmax_message_bytes = 4096\nmax_pending = 16\n");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const HttpSettings& http = result.config.http;
  EXPECT_EQ(http.listen, "127.0.0.1:8081");
  EXPECT_EQ(http.deny_status, 403u);
  EXPECT_FALSE(http.ietf_headers);
  EXPECT_EQ(http.max_body_bytes, 1024u);
  EXPECT_EQ(http.max_header_bytes, 4096u);
  EXPECT_EQ(http.max_connections, 8u);
  EXPECT_EQ(http.request_timeout_us, 2'000'000);
  EXPECT_EQ(http.idle_timeout_us, 30'000'000);
  const GrpcSettings& grpc = result.config.grpc;
  EXPECT_EQ(grpc.listen, "[::1]:8091");
  EXPECT_EQ(grpc.unix_socket, "/run/rlimit/grpc.sock");
  EXPECT_FALSE(grpc.ietf_headers);
  EXPECT_EQ(grpc.max_message_bytes, 4096u);
  EXPECT_EQ(grpc.max_pending, 16u);
}

TEST(ConfigTest, ReadyAfterSeedsUnreachable) {
  EXPECT_EQ(load("").config.http.ready_after_seeds_unreachable_us, 30'000'000);
  const LoadResult result = load("[http]\nready_after_seeds_unreachable = \"5s\"\n");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  EXPECT_EQ(result.config.http.ready_after_seeds_unreachable_us, 5'000'000);
  EXPECT_EQ(load("[http]\nready_after_seeds_unreachable = \"0s\"\n")
                .config.http.ready_after_seeds_unreachable_us,
            0);
  EXPECT_TRUE(one_error("[http]\nready_after_seeds_unreachable = 5\n", 2, 33,
                        {"http: ready_after_seeds_unreachable", "\"1s\""}));
}

TEST(ConfigErrorTest, BadFaceSettingsAreLocated) {
  EXPECT_TRUE(
      one_error("[http]\ndeny_status = 500\n", 2, 15, {"http: deny_status 500", "429 or 403"}));
  EXPECT_TRUE(one_error("[http]\nlisten = \"localhost\"\n", 2, 10, {"http: listen", "port"}));
  EXPECT_TRUE(one_error("[http]\nlsten = \"a:1\"\n", 2, 1,
                        {"http: unknown key", "did you mean \"listen\""}));
  EXPECT_TRUE(one_error("[grpc]\nmax_pending = 0\n", 2, 15, {"grpc: max_pending 0", "at least 1"}));
  EXPECT_TRUE(
      one_error("[grpc]\nunix_socket = \"\"\n", 2, 15, {"grpc: unix_socket", "path of 1 to"}));
}

TEST(ConfigErrorTest, UnknownDaemonKey) {
  EXPECT_TRUE(one_error("[daemon]\nsockt = \"/x\"\n", 2, 1,
                        {"daemon: unknown key \"sockt\"", "did you mean \"socket\""}));
}

TEST(ConfigErrorTest, UnknownKeyHintWeighsOnlyKeysOfNearLength) {
  // Two characters longer is still a typo; three is not, nor is a long key.
  EXPECT_TRUE(one_error("[daemon]\nsocket__ = \"/x\"\n", 2, 1, {"did you mean \"socket\""}));
  EXPECT_TRUE(one_error("[daemon]\nsocket___ = \"/x\"\n", 2, 1, {"expected one of: "}));
  EXPECT_TRUE(
      one_error("[daemon]\n" + std::string(4000, 's') + " = 1\n", 2, 1, {"expected one of: "}));
  EXPECT_TRUE(one_error("[daemon]\nsoc = \"/x\"\n", 2, 1, {"expected one of: "}));
  EXPECT_TRUE(one_error("[daemon]\nsocke = \"/x\"\n", 2, 1, {"did you mean \"socket\""}));
}

TEST(ConfigErrorTest, UnknownRuleKey) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                                  "limt = 5\n"),
                        6, 1, {"rule \"r\": unknown key \"limt\"", "did you mean \"limit\""}));
}

TEST(ConfigErrorTest, UnknownOverrideKey) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                                  "[[rule.override]]\nmatch = { t = \"x\" }\nmultiplier = 2\n"
                                  "factor = 3\n"),
                        9, 1, {"rule \"r\": override #1: unknown key \"factor\""}));
}

TEST(ConfigErrorTest, UnknownExemptionKey) {
  EXPECT_TRUE(one_error("[[exempt]]\nmatch = { user = \"x\" }\nrule = [\"r\"]\n", 3, 1,
                        {"exempt #1: unknown key \"rule\"", "did you mean \"rules\""}));
}

TEST(ConfigErrorTest, UnknownMatcherKey) {
  EXPECT_TRUE(one_error(
      rule_with("name = \"r\"\nmatch = { path = { prefx = \"/a\" } }\n"
                "limit = 1\nperiod = \"1s\"\n"),
      3, 20, {"rule \"r\": match.path: unknown key \"prefx\"", "did you mean \"prefix\""}));
}

TEST(ConfigErrorTest, WrongTypes) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = \"10\"\nperiod = \"1s\"\n"), 4,
                        9, {"rule \"r\": limit must be an integer, not a string"}));
  EXPECT_TRUE(one_error(rule_with("name = 5\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"), 2, 8,
                        {"rule #1: name must be a string, not an integer"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = \"x\"\nlimit = 1\nperiod = \"1s\"\n"), 3,
                        9, {"rule \"r\": match must be a table", "not a string"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1.5\nperiod = \"1s\"\n"), 4, 9,
                        {"limit must be an integer, not a float"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = 1\n"), 5, 10,
                        {"period must be a string such as \"1s\", not an integer"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = { user = 5 }\nlimit = 1\n"
                                  "period = \"1s\"\n"),
                        3, 18, {"match.user must be a string or a table", "not an integer"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = { user = { each = \"yes\" } }\n"
                                  "limit = 1\nperiod = \"1s\"\n"),
                        3, 27, {"match.user.each must be a boolean, not a string"}));
  EXPECT_TRUE(one_error("[daemon]\ninline_limits = 1\n", 2, 17,
                        {"daemon: inline_limits must be a boolean"}));
  EXPECT_TRUE(one_error("[daemon]\nallow_reset = \"no\"\n", 2, 15,
                        {"daemon: allow_reset must be a boolean"}));
  EXPECT_TRUE(one_error("daemon = 1\n", 1, 10, {"daemon must be a table"}));
  EXPECT_TRUE(one_error("[rule]\nname = \"r\"\n", 1, 1,
                        {"rule must be an array of tables ([[rule]]), not a table"}));
  EXPECT_TRUE(one_error("rule = [1]\n", 1, 9, {"rule #1 must be a table"}));
  EXPECT_TRUE(
      one_error("[exempt]\nmatch = { u = \"x\" }\n", 1, 1, {"exempt must be an array of tables"}));
}

TEST(ConfigErrorTest, MissingRequiredKeys) {
  EXPECT_TRUE(one_error(rule_with("match = {}\nlimit = 1\nperiod = \"1s\"\n"), 1, 1,
                        {"rule #1: missing required key \"name\""}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nperiod = \"1s\"\n"), 1, 1,
                        {"rule \"r\": missing required key \"limit\""}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\n"), 1, 1,
                        {"rule \"r\": missing required key \"period\""}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nlimit = 1\nperiod = \"1s\"\n"), 1, 1,
                        {"rule \"r\": missing required key \"match\""}));
  // The position is the header of the rule that lacks the key.
  EXPECT_TRUE(one_error(std::string(kValidRule.substr(1)) + "\n[[rule]]\nname = \"b\"\n"
                                                            "match = {}\nlimit = 1\n",
                        7, 1, {"rule \"b\": missing required key \"period\""}));
}

TEST(ConfigErrorTest, LimitAndBurstRange) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = -1\nperiod = \"1s\"\n"), 4, 9,
                        {"rule \"r\": limit -1: must not be negative"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = " +
                                  std::to_string(core::kMaxTokens + 1) + "\nperiod = \"1s\"\n"),
                        4, 9, {"limit", "must be at most " + std::to_string(core::kMaxTokens)}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nburst = -5\n"
                                  "period = \"1s\"\n"),
                        5, 9, {"rule \"r\": burst -5: must not be negative"}));
}

TEST(ConfigErrorTest, BadPeriods) {
  struct Case {
    std::string_view period;
    std::string_view needle;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"5x", "unknown unit \"x\""}, Case{"10", "missing unit"},
        Case{"0s", "must be greater than zero"}, Case{"36601d", "too large"},
        Case{"99999999999999999999d", "too large"}, Case{"-1s", "period \"-1s\""}}) {
    EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"" +
                                    std::string(c.period) + "\"\n"),
                          5, 10, {"rule \"r\": period \"", c.needle}))
        << c.period;
  }
}

TEST(ConfigErrorTest, DuplicateRuleName) {
  const std::string text =
      std::string(kValidRule.substr(1)) + "\n" + std::string(kValidRule.substr(1));
  // The second rule starts on line 7; its name is on line 8.
  EXPECT_TRUE(one_error(text, 8, 8, {"rule \"ok\": duplicate rule name", "line 1"}));
}

TEST(ConfigErrorTest, InvalidRuleName) {
  for (const std::string& bad :
       {std::string(""), std::string("has space"), std::string("a/b"), std::string(129, 'x')}) {
    EXPECT_TRUE(one_error(rule_with("name = \"" + bad +
                                    "\"\nmatch = {}\nlimit = 1\n"
                                    "period = \"1s\"\n"),
                          2, 8, {"rule name \"", "must be 1 to 128 characters"}))
        << bad;
  }
}

TEST(ConfigErrorTest, BadGlob) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = { path = { glob = \"/v1/[a\" } }\n"
                                  "limit = 1\nperiod = \"1s\"\n"),
                        3, 27, {"rule \"r\": match.path: ", "unclosed"}));
}

TEST(ConfigErrorTest, TwoPatternsInOneMatcher) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\n"
                                  "match = { path = { prefix = \"/a\", glob = \"/a*\" } }\n"
                                  "limit = 1\nperiod = \"1s\"\n"),
                        3, 18, {"rule \"r\": match.path: use only one of equals, prefix or glob"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\n"
                                  "match = { path = { prefix = \"/a\", equals = \"/a\" } }\n"
                                  "limit = 1\nperiod = \"1s\"\n"),
                        3, 18, {"use only one of"}));
}

TEST(ConfigErrorTest, EmptyDescriptorKey) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = { \"\" = \"x\" }\nlimit = 1\n"
                                  "period = \"1s\"\n"),
                        3, 11, {"descriptor key must not be empty"}));
}

TEST(ConfigErrorTest, UnknownAlgorithm) {
  EXPECT_TRUE(one_error(
      rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                "algorithm = \"leaky\"\n"),
      6, 13,
      {"rule \"r\": unknown algorithm \"leaky\"", "token_bucket", "sliding_log", "concurrency"}));
}

TEST(ConfigErrorTest, BadSocketMode) {
  for (std::string_view bad : {"999", "0800", "1777", "66", "07777", "rw", ""}) {
    EXPECT_TRUE(one_error("[daemon]\nsocket_mode = \"" + std::string(bad) + "\"\n", 2, 15,
                          {"daemon: socket_mode \"", "3 or 4 octal digits"}))
        << bad;
  }
  // 660 as a TOML integer is decimal: refused rather than misread.
  EXPECT_TRUE(one_error("[daemon]\nsocket_mode = 660\n", 2, 15,
                        {"socket_mode must be a string of octal digits"}));
}

TEST(ConfigErrorTest, SocketPathTooLong) {
  EXPECT_TRUE(one_error("[daemon]\nsocket = \"/" + std::string(107, 's') + "\"\n", 2, 10,
                        {"daemon: socket", "longer than 107 bytes"}));
}

TEST(ConfigErrorTest, BadLogLevel) {
  EXPECT_TRUE(one_error("[daemon]\nlog_level = \"verbose\"\n", 2, 13,
                        {"daemon: log_level \"verbose\": must be trace, debug"}));
  EXPECT_TRUE(one_error("[daemon]\nlog_level = \"INFO\"\n", 2, 13, {"log_level"}));
}

TEST(ConfigErrorTest, BadLogFormat) {
  EXPECT_TRUE(one_error("[daemon]\nlog_format = \"logfmt\"\n", 2, 14,
                        {"daemon: log_format \"logfmt\": must be text or json"}));
  EXPECT_TRUE(one_error("[daemon]\nlog_format = true\n", 2, 14, {"daemon: log_format"}));
  EXPECT_TRUE(one_error("[daemon]\nlog_fromat = \"json\"\n", 2, 1,
                        {"unknown key \"log_fromat\"", "log_format"}));
}

TEST(ConfigErrorTest, BadKeyTableFull) {
  EXPECT_TRUE(one_error("[daemon]\nkey_table_full = \"drop\"\n", 2, 18,
                        {"daemon: key_table_full \"drop\": must be allow or deny"}));
}

TEST(ConfigErrorTest, DaemonIntegersOutOfRange) {
  struct Case {
    std::string_view line;
    std::string_view needle;
  };
  for (const Case& c : {
           Case{"max_frame_bytes = 63", "max_frame_bytes 63: must be at least 64"},
           Case{"max_frame_bytes = 16777217", "max_frame_bytes 16777217: must be at most 16777216"},
           Case{"max_checks_per_frame = 0", "must be at least 1"},
           Case{"max_checks_per_frame = 65537", "must be at most 65536"},
           Case{"max_connections = 0", "must be at least 1"},
           Case{"max_connections = 1000001", "must be at most 1000000"},
           Case{"max_keys = 0", "max_keys 0: must be at least 1"},
           Case{"max_keys = 1000000001", "must be at most 1000000000"},
           Case{"sweep_batch = 0", "must be at least 1"},
           Case{"sweep_batch = 10000001", "must be at most 10000000"},
           Case{"max_rules = 0", "must be at least 1"},
           Case{"max_rules = 1000001", "must be at most 1000000"},
           Case{"max_keys = -1", "must be at least 1"},
       }) {
    const std::string text = "[daemon]\n" + std::string(c.line) + "\n";
    const std::uint32_t column = static_cast<std::uint32_t>(c.line.find('=') + 3);
    EXPECT_TRUE(one_error(text, 2, column, {"daemon: ", c.needle})) << c.line;
  }
}

TEST(ConfigErrorTest, BadDaemonDurations) {
  EXPECT_TRUE(one_error("[daemon]\nsweep_interval = \"0s\"\n", 2, 18,
                        {"daemon: sweep_interval \"0s\": must be greater than zero"}));
  EXPECT_TRUE(one_error("[daemon]\nshutdown_grace = \"2\"\n", 2, 18,
                        {"daemon: shutdown_grace \"2\": missing unit"}));
}

TEST(ConfigErrorTest, ExemptionNamesUnknownRule) {
  EXPECT_TRUE(one_error(std::string(kValidRule.substr(1)) +
                            "[[exempt]]\nmatch = { user = \"x\" }\nrules = [\"ok\", \"nope\"]\n",
                        8, 16, {"exempt #1: unknown rule \"nope\""}));
}

TEST(ConfigErrorTest, BadExemptions) {
  EXPECT_TRUE(one_error("[[exempt]]\nmatch = {}\n", 2, 9, {"exempt #1: match must not be empty"}));
  EXPECT_TRUE(one_error("[[exempt]]\n", 1, 1, {"exempt #1: missing required key \"match\""}));
  EXPECT_TRUE(one_error(
      std::string(kValidRule.substr(1)) + "[[exempt]]\nmatch = { u = \"x\" }\nrules = []\n", 8, 9,
      {"rules must not be empty"}));
  EXPECT_TRUE(one_error(
      std::string(kValidRule.substr(1)) + "[[exempt]]\nmatch = { u = \"x\" }\nrules = [1]\n", 8, 10,
      {"rules entry must be a string"}));
}

TEST(ConfigErrorTest, OverrideWithMultiplierAndLimit) {
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                                  "[[rule.override]]\nmatch = { t = \"x\" }\nmultiplier = 2\n"
                                  "limit = 5\n"),
                        8, 14, {"rule \"r\": override #1: use either multiplier or limit/burst"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                                  "[[rule.override]]\nmatch = { t = \"x\" }\nburst = 5\n"
                                  "multiplier = 2\n"),
                        9, 14, {"use either multiplier or limit/burst"}));
}

TEST(ConfigErrorTest, BadOverrides) {
  const std::string head =
      "name = \"r\"\nmatch = {}\nlimit = 10\nperiod = \"1s\"\n"
      "[[rule.override]]\n";  // header on line 6
  EXPECT_TRUE(one_error(rule_with(head + "multiplier = 2\n"), 6, 1,
                        {"override #1: missing required key \"match\""}));
  EXPECT_TRUE(one_error(rule_with(head + "match = {}\nmultiplier = 2\n"), 7, 9,
                        {"override #1: match must not be empty"}));
  EXPECT_TRUE(
      one_error(rule_with(head + "match = { t = \"x\" }\n"), 6, 1, {"override #1: sets nothing"}));
  EXPECT_TRUE(one_error(rule_with(head + "match = { t = \"x\" }\nmultiplier = 0\n"), 8, 14,
                        {"multiplier 0: must be at least 1"}));
  EXPECT_TRUE(one_error(rule_with(head + "match = { t = \"x\" }\nmultiplier = " +
                                  std::to_string(core::kMaxTokens) + "\n"),
                        8, 14, {"exceeds"}));
  EXPECT_TRUE(one_error(rule_with(head + "match = { t = \"x\" }\nperiod = \"0s\"\n"), 8, 10,
                        {"override #1: period \"0s\": must be greater than zero"}));
  EXPECT_TRUE(one_error(rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n"
                                  "override = 3\n"),
                        6, 12, {"rule \"r\": override must be an array of tables"}));
}

TEST(ConfigErrorTest, TooManyRules) {
  std::string text = "[daemon]\nmax_rules = 2\n";
  for (int i = 0; i < 4; ++i) {
    text +=
        "[[rule]]\nname = \"r" + std::to_string(i) + "\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n";
  }
  // Rules start on lines 3, 8, 13, 18: the third one is the first too many.
  EXPECT_TRUE(one_error(text, 13, 1, {"too many rules: 4", "max_rules is 2"}));
  // Within the limit is fine.
  text.replace(text.find("= 2"), 3, "= 4");
  EXPECT_TRUE(load(text).ok());
}

TEST(ConfigErrorTest, TooManyOverrides) {
  std::string text = rule_with("name = \"r\"\nmatch = {}\nlimit = 1\nperiod = \"1s\"\n");
  for (int i = 0; i < 256; ++i) {
    text += "[[rule.override]]\nmatch = { t = \"" + std::to_string(i) + "\" }\nmultiplier = 2\n";
  }
  // Overrides start on line 6, three lines each: the 256th is on line 771.
  EXPECT_TRUE(
      one_error(text, 6 + 255 * 3, 1, {"rule \"r\": too many overrides: 256", "at most 255"}));
}

TEST(ConfigErrorTest, MatchThatNoCheckCanSatisfy) {
  const std::size_t most = core::LimiterOptions{}.max_descriptors_per_check;
  auto match_of = [](std::size_t keys) {
    std::string match = "{ ";
    for (std::size_t i = 0; i < keys; ++i) {
      match += (i == 0 ? "k" : ", k") + std::to_string(i) + " = \"v\"";
    }
    return match + " }";
  };
  EXPECT_TRUE(
      load(rule_with("name = \"r\"\nmatch = " + match_of(most) + "\nlimit = 1\nperiod = \"1s\"\n"))
          .ok());
  EXPECT_TRUE(one_error(
      rule_with("name = \"r\"\nmatch = " + match_of(most + 1) + "\nlimit = 1\nperiod = \"1s\"\n"),
      3, 9,
      {"rule \"r\": match names " + std::to_string(most + 1) +
       " descriptors, but a check carries at most"}));
  EXPECT_TRUE(one_error("[[exempt]]\nmatch = " + match_of(most + 1) + "\n", 2, 9,
                        {"exempt #1: match names"}));
}

TEST(ConfigErrorTest, LongValuesAreCutInMessages) {
  const LoadResult result = load("[daemon]\nlog_level = \"" + std::string(10'000, 'v') + "\"\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_LT(result.errors[0].message.size(), 200u);
  EXPECT_NE(result.errors[0].message.find("...\""), std::string::npos);
}

// ----- [cluster] ------------------------------------------------------------

std::string cluster_with(std::string_view body) { return "[cluster]\n" + std::string(body); }

// A gossip cluster that is valid as it stands, to which a test adds one line
// (the added line is line 4).
std::string gossip_with(std::string_view line) {
  return "[cluster]\nmode = \"gossip\"\nsecret_file = \"/etc/rlimit/keyring\"\n" +
         std::string(line) + "\n";
}

TEST(ClusterConfigTest, DefaultsWithoutTheSection) {
  const LoadResult result = load("");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const ClusterSettings& c = result.config.cluster;
  const ClusterSettings defaults;
  EXPECT_EQ(c.mode, ClusterMode::kNone);
  EXPECT_EQ(c.name, "rlimit");
  EXPECT_EQ(c.bind, "127.0.0.1:7946");
  EXPECT_EQ(c.advertise, "");
  EXPECT_TRUE(c.seeds.empty());
  EXPECT_EQ(c.secret_file, "");
  EXPECT_EQ(c.gossip_interval_us, defaults.gossip_interval_us);
  EXPECT_EQ(c.probe_interval_us, defaults.probe_interval_us);
  EXPECT_EQ(c.probe_timeout_us, defaults.probe_timeout_us);
  EXPECT_EQ(c.max_members, defaults.max_members);
  EXPECT_EQ(c.max_peer_queue_bytes, defaults.max_peer_queue_bytes);
  EXPECT_TRUE(c.fair_share);

  const LoadResult empty = load("[cluster]\n");
  ASSERT_TRUE(empty.ok()) << all_errors(empty);
  EXPECT_EQ(empty.config.cluster.mode, ClusterMode::kNone);
  EXPECT_EQ(empty.config.cluster.name, "rlimit");
}

TEST(ClusterConfigTest, DefaultsAreWithinTheirOwnBounds) {
  // Every default written out explicitly must load: the bounds admit them.
  const ClusterSettings d;
  EXPECT_LE(d.probe_timeout_us, d.probe_interval_us);
  EXPECT_LE(d.reconnect_backoff_min_us, d.reconnect_backoff_max_us);
  const LoadResult result = load(R"([cluster]
mode = "none"
gossip_interval = "20ms"
fanout = 3
mtu_bytes = 1400
anti_entropy_interval = "1s"
probe_interval = "500ms"
probe_timeout = "200ms"
indirect_probes = 3
suspicion_timeout = "2s"
dead_retention = "1m"
rejoin_interval = "10s"
max_members = 4096
reconnect_backoff_min = "50ms"
reconnect_backoff_max = "5s"
max_peer_queue_bytes = 4194304
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const ClusterSettings& c = result.config.cluster;
  EXPECT_EQ(c.gossip_interval_us, d.gossip_interval_us);
  EXPECT_EQ(c.fanout, d.fanout);
  EXPECT_EQ(c.mtu_bytes, d.mtu_bytes);
  EXPECT_EQ(c.anti_entropy_interval_us, d.anti_entropy_interval_us);
  EXPECT_EQ(c.probe_interval_us, d.probe_interval_us);
  EXPECT_EQ(c.probe_timeout_us, d.probe_timeout_us);
  EXPECT_EQ(c.indirect_probes, d.indirect_probes);
  EXPECT_EQ(c.suspicion_timeout_us, d.suspicion_timeout_us);
  EXPECT_EQ(c.dead_retention_us, d.dead_retention_us);
  EXPECT_EQ(c.rejoin_interval_us, d.rejoin_interval_us);
  EXPECT_EQ(c.max_members, d.max_members);
  EXPECT_EQ(c.reconnect_backoff_min_us, d.reconnect_backoff_min_us);
  EXPECT_EQ(c.reconnect_backoff_max_us, d.reconnect_backoff_max_us);
  EXPECT_EQ(c.max_peer_queue_bytes, d.max_peer_queue_bytes);
}

TEST(ClusterConfigTest, EveryClusterKey) {
  const LoadResult result = load(R"([cluster]
mode = "mesh"
name = "prod-eu.1:a_b"
bind = "0.0.0.0:7000"
advertise = "[fd00::7]:7000"
seeds = ["10.0.0.1:7000", "rlimit-2.internal:7000", "[fd00::3]:7000"]
secret_file = "/etc/rlimit/keyring"
gossip_interval = "10s"
fanout = 0
mtu_bytes = 65000
anti_entropy_interval = "1h"
probe_interval = "1m"
probe_timeout = "1m"
indirect_probes = 16
suspicion_timeout = "10m"
dead_retention = "7d"
rejoin_interval = "7d"
max_members = 100000
reconnect_backoff_min = "10m"
reconnect_backoff_max = "10m"
max_peer_queue_bytes = 1073741824
max_packets_per_round = 4096
counter_retention = "30d"
fair_share = false
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const ClusterSettings& c = result.config.cluster;
  EXPECT_EQ(c.mode, ClusterMode::kMesh);
  EXPECT_EQ(c.name, "prod-eu.1:a_b");
  EXPECT_EQ(c.bind, "0.0.0.0:7000");
  EXPECT_EQ(c.advertise, "[fd00::7]:7000");
  EXPECT_EQ(c.seeds, (std::vector<std::string>{"10.0.0.1:7000", "rlimit-2.internal:7000",
                                               "[fd00::3]:7000"}));
  EXPECT_EQ(c.secret_file, "/etc/rlimit/keyring");
  EXPECT_EQ(c.gossip_interval_us, 10 * kSecondUs);
  EXPECT_EQ(c.fanout, 0u);
  EXPECT_EQ(c.mtu_bytes, 65'000u);
  EXPECT_EQ(c.anti_entropy_interval_us, 3'600 * kSecondUs);
  EXPECT_EQ(c.probe_interval_us, 60 * kSecondUs);
  EXPECT_EQ(c.probe_timeout_us, 60 * kSecondUs);
  EXPECT_EQ(c.indirect_probes, 16u);
  EXPECT_EQ(c.suspicion_timeout_us, 600 * kSecondUs);
  EXPECT_EQ(c.dead_retention_us, 7 * 86'400 * kSecondUs);
  EXPECT_EQ(c.rejoin_interval_us, 7 * 86'400 * kSecondUs);
  EXPECT_EQ(c.max_members, 100'000u);
  EXPECT_EQ(c.reconnect_backoff_min_us, 600 * kSecondUs);
  EXPECT_EQ(c.reconnect_backoff_max_us, 600 * kSecondUs);
  EXPECT_EQ(c.max_peer_queue_bytes, 1024u * 1024 * 1024);
  EXPECT_EQ(c.max_packets_per_round, 4096u);
  EXPECT_EQ(c.counter_retention_us, 30 * 86'400 * kSecondUs);
  EXPECT_FALSE(c.fair_share);
}

// Replay protection and the bounds on what peers make a node hold
// (docs/cluster.md): defaults, both ends of each range, and what is refused.
TEST(ClusterConfigTest, ReplayProtectionAndPeerBounds) {
  const ClusterSettings d;
  EXPECT_EQ(d.replay_max_age_us, 60 * kSecondUs);
  EXPECT_FALSE(d.accept_unsequenced);
  EXPECT_EQ(d.max_origins, 65'536u);
  const LoadResult highest = load(R"([cluster]
replay_max_age = "1d"
accept_unsequenced = true
max_origins = 65536
max_ledger_keys = 1000000000
max_entries_per_key = 1048576
)");
  ASSERT_TRUE(highest.ok()) << all_errors(highest);
  EXPECT_EQ(highest.config.cluster.replay_max_age_us, 86'400 * kSecondUs);
  EXPECT_TRUE(highest.config.cluster.accept_unsequenced);
  EXPECT_EQ(highest.config.cluster.max_origins, 65'536u);
  EXPECT_EQ(highest.config.cluster.max_ledger_keys, 1'000'000'000u);
  EXPECT_EQ(highest.config.cluster.max_entries_per_key, 1'048'576u);
  const LoadResult lowest = load(R"([cluster]
replay_max_age = "0s"
max_origins = 2
max_ledger_keys = 1
max_entries_per_key = 2
)");
  ASSERT_TRUE(lowest.ok()) << all_errors(lowest);
  EXPECT_EQ(lowest.config.cluster.replay_max_age_us, 0);
  EXPECT_EQ(lowest.config.cluster.max_ledger_keys, 1u);
  for (const char* bad :
       {"replay_max_age = \"2d\"", "accept_unsequenced = 1", "max_origins = 65537",
        "max_origins = 1", "max_ledger_keys = 0", "max_entries_per_key = 1"}) {
    const LoadResult result = load(std::string("[cluster]\n") + bad + "\n");
    EXPECT_FALSE(result.ok()) << bad;
  }
}

TEST(ClusterConfigTest, LowestValues) {
  const LoadResult result = load(R"([cluster]
gossip_interval = "1ms"
fanout = 0
mtu_bytes = 576
anti_entropy_interval = "10ms"
probe_interval = "10ms"
probe_timeout = "1ms"
indirect_probes = 0
suspicion_timeout = "10ms"
dead_retention = "1s"
rejoin_interval = "1s"
max_members = 2
reconnect_backoff_min = "1ms"
reconnect_backoff_max = "1ms"
max_peer_queue_bytes = 65536
seeds = []
)");
  ASSERT_TRUE(result.ok()) << all_errors(result);
  const ClusterSettings& c = result.config.cluster;
  EXPECT_EQ(c.gossip_interval_us, 1'000);
  EXPECT_EQ(c.mtu_bytes, 576u);
  EXPECT_EQ(c.probe_timeout_us, 1'000);
  EXPECT_EQ(c.rejoin_interval_us, 1'000'000);
  EXPECT_EQ(c.max_members, 2u);
  EXPECT_EQ(c.reconnect_backoff_max_us, 1'000);
  EXPECT_EQ(c.max_peer_queue_bytes, 65'536u);
  EXPECT_TRUE(c.seeds.empty());
}

TEST(ClusterConfigTest, Modes) {
  for (const auto& [text, mode] :
       {std::pair{"none", ClusterMode::kNone}, std::pair{"gossip", ClusterMode::kGossip},
        std::pair{"mesh", ClusterMode::kMesh}}) {
    const LoadResult result =
        load("[cluster]\nmode = \"" + std::string(text) + "\"\nsecret_file = \"keys\"\n");
    ASSERT_TRUE(result.ok()) << text << "\n" << all_errors(result);
    EXPECT_EQ(result.config.cluster.mode, mode) << text;
    EXPECT_EQ(cluster_mode_name(mode), text);
  }
  // Mode none needs no secret.
  EXPECT_TRUE(load("[cluster]\nmode = \"none\"\n").ok());
}

TEST(ClusterConfigTest, ExampleInTheShippedFileIsValidWhenUncommented) {
  // config/rlimitd.toml carries a commented-out [cluster] section: every line
  // from "# [cluster]" to the next blank line, each starting with "# ".
  std::ifstream file(std::string(RLIMIT_SOURCE_DIR) + "/config/rlimitd.toml");
  ASSERT_TRUE(file.good());
  std::string line;
  std::string section;
  bool inside = false;
  while (std::getline(file, line)) {
    if (line == "# [cluster]") inside = true;
    if (!inside) continue;
    if (line.empty()) break;
    ASSERT_EQ(line.rfind("# ", 0), 0u) << line;
    section += line.substr(2) + "\n";
  }
  ASSERT_FALSE(section.empty());
  const LoadResult result = load(section);
  ASSERT_TRUE(result.ok()) << section << all_errors(result);
  EXPECT_NE(result.config.cluster.mode, ClusterMode::kNone);
  EXPECT_FALSE(result.config.cluster.seeds.empty());
}

TEST(ClusterConfigErrorTest, SecretFileIsRequiredUnlessModeIsNone) {
  EXPECT_TRUE(
      one_error("[cluster]\nmode = \"gossip\"\n", 2, 8, {"cluster mode gossip needs secret_file"}));
  EXPECT_TRUE(one_error("[cluster]\nname = \"x\"\nmode = \"mesh\"\n", 3, 8,
                        {"cluster mode mesh needs secret_file"}));
  const LoadResult with_secret = load(gossip_with(""));
  EXPECT_TRUE(with_secret.ok()) << all_errors(with_secret);
  EXPECT_EQ(with_secret.config.cluster.secret_file, "/etc/rlimit/keyring");
  // A bad secret_file is reported there, not as a missing one.
  EXPECT_TRUE(one_error("[cluster]\nmode = \"gossip\"\nsecret_file = \"\"\n", 3, 15,
                        {"cluster: secret_file must not be empty"}));
  EXPECT_TRUE(one_error("[cluster]\nmode = \"gossip\"\nsecret_file = 1\n", 3, 15,
                        {"cluster: secret_file must be a string, not an integer"}));
}

TEST(ClusterConfigErrorTest, UnknownKeysAndWrongTypes) {
  EXPECT_TRUE(one_error("[cluster]\nseed = [\"a:1\"]\n", 2, 1,
                        {"cluster: unknown key \"seed\"", "did you mean \"seeds\""}));
  EXPECT_TRUE(one_error("[cluster]\nfrobnicate = 1\n", 2, 1,
                        {"cluster: unknown key \"frobnicate\"", "expected one of: mode, name"}));
  EXPECT_TRUE(one_error("cluster = 1\n", 1, 11, {"cluster must be a table ([cluster])"}));
  EXPECT_TRUE(one_error("[[cluster]]\n", 1, 1, {"cluster must be a table", "not an array"}));
  EXPECT_TRUE(one_error(cluster_with("fanout = \"3\"\n"), 2, 10,
                        {"cluster: fanout must be an integer, not a string"}));
  EXPECT_TRUE(one_error(cluster_with("probe_interval = 5\n"), 2, 18,
                        {"cluster: probe_interval must be a string such as \"1s\""}));
  EXPECT_TRUE(one_error(cluster_with("seeds = \"a:1\"\n"), 2, 9,
                        {"cluster: seeds must be an array of \"host:port\" strings"}));
  EXPECT_TRUE(one_error(cluster_with("seeds = [\"a:1\", 7]\n"), 2, 17,
                        {"cluster: seeds entry must be a string"}));
  EXPECT_TRUE(one_error(cluster_with("bind = 7946\n"), 2, 8,
                        {"cluster: bind must be a string such as \"10.0.0.1:7946\""}));
  EXPECT_TRUE(one_error(cluster_with("name = true\n"), 2, 8,
                        {"cluster: name must be a string, not a boolean"}));
  EXPECT_TRUE(one_error(cluster_with("fair_share = \"yes\"\n"), 2, 14,
                        {"cluster: fair_share must be a boolean, not a string"}));
}

TEST(ClusterConfigErrorTest, BadModeAndName) {
  EXPECT_TRUE(one_error(cluster_with("mode = \"swim\"\n"), 2, 8,
                        {"cluster: mode \"swim\": must be none, gossip, mesh or redis"}));
  EXPECT_TRUE(one_error(cluster_with("name = \"\"\n"), 2, 8,
                        {"cluster: name \"\": must be 1 to 64 characters from A-Z a-z 0-9"}));
  EXPECT_TRUE(one_error(cluster_with("name = \"a b\"\n"), 2, 8, {"cluster: name \"a b\""}));
  EXPECT_TRUE(one_error(cluster_with("name = \"" + std::string(65, 'n') + "\"\n"), 2, 8,
                        {"must be 1 to 64 characters"}));
  EXPECT_TRUE(load(cluster_with("name = \"" + std::string(64, 'n') + "\"\n")).ok());
}

TEST(ClusterConfigErrorTest, BadAddresses) {
  struct Case {
    std::string_view line;
    std::uint32_t column;
    std::string_view needle;
  };
  for (const Case& c : {
           Case{"bind = \"10.0.0.1\"", 8, "cluster: bind \"10.0.0.1\": missing port"},
           Case{"bind = \"10.0.0.1:0\"", 8, "port must be from 1 to 65535"},
           Case{"bind = \"10.0.0.1:65536\"", 8, "port must be from 1 to 65535"},
           Case{"bind = \"10.0.0.1:http\"", 8, "port must be a decimal number"},
           Case{"bind = \"10.0.0.256:1\"", 8, "not an IPv4 address"},
           Case{"bind = \"::1:7946\"", 8, "an IPv6 address must be in brackets"},
           Case{"bind = \"[::1:7946\"", 8, "unclosed '['"},
           Case{"bind = \"[::g]:7946\"", 8, "not an IPv6 address"},
           Case{"bind = \":7946\"", 8, "missing host"},
           Case{"bind = \"bad_-.host:1\"", 8, "not a valid host name"},
           Case{"advertise = \"\"", 13, "cluster: advertise \"\": empty"},
           Case{"advertise = \"a b:1\"", 13, "must not contain spaces"},
           Case{"advertise = \"0.0.0.0:7946\"", 13, "wildcard address"},
           Case{"advertise = \"[::]:7946\"", 13, "wildcard address"},
           Case{"seeds = [\"ok:1\", \"nope\"]", 18, "cluster: seeds entry \"nope\": missing port"},
       }) {
    EXPECT_TRUE(one_error(cluster_with(std::string(c.line) + "\n"), 2, c.column, {c.needle}))
        << c.line;
  }
}

TEST(ClusterConfigErrorTest, WildcardBindNeedsAdvertiseInACluster) {
  EXPECT_TRUE(one_error(gossip_with("bind = \"0.0.0.0:7946\""), 4, 8,
                        {"cluster: bind \"0.0.0.0:7946\": a wildcard address", "set advertise"}));
  EXPECT_TRUE(load(gossip_with("bind = \"0.0.0.0:7946\"\nadvertise = \"10.0.0.1:7946\"")).ok());
  // A single node never advertises: no complaint.
  EXPECT_TRUE(load(cluster_with("bind = \"[::]:7946\"\n")).ok());
}

TEST(ClusterConfigErrorTest, TooManySeeds) {
  std::string seeds = "seeds = [\n";
  for (int i = 0; i < 65; ++i) seeds += "  \"10.0.0." + std::to_string(i + 1) + ":7946\",\n";
  seeds += "]\n";
  // Seeds are on lines 3..67: the 65th (line 67) is the first too many.
  EXPECT_TRUE(
      one_error(cluster_with(seeds), 67, 3, {"cluster: seeds: too many seeds: 65", "at most 64"}));
  seeds.erase(seeds.rfind("  \"10.0.0.65"), std::string("  \"10.0.0.65:7946\",\n").size());
  const LoadResult ok = load(cluster_with(seeds));
  ASSERT_TRUE(ok.ok()) << all_errors(ok);
  EXPECT_EQ(ok.config.cluster.seeds.size(), 64u);
}

TEST(ClusterConfigErrorTest, DurationsOutOfRange) {
  struct Case {
    std::string_view line;
    std::string_view needle;
  };
  for (const Case& c : {
           Case{"gossip_interval = \"999us\"", "gossip_interval \"999us\": must be at least 1ms"},
           Case{"gossip_interval = \"11s\"", "gossip_interval \"11s\": must be at most 10s"},
           Case{"anti_entropy_interval = \"9ms\"", "must be at least 10ms"},
           Case{"anti_entropy_interval = \"61m\"", "must be at most 1h"},
           Case{"probe_interval = \"9ms\"", "probe_interval \"9ms\": must be at least 10ms"},
           Case{"probe_interval = \"2m\"", "must be at most 1m"},
           Case{"probe_timeout = \"0s\"", "probe_timeout \"0s\": must be at least 1ms"},
           Case{"suspicion_timeout = \"9ms\"", "must be at least 10ms"},
           Case{"suspicion_timeout = \"11m\"", "must be at most 10m"},
           Case{"dead_retention = \"999ms\"", "must be at least 1s"},
           Case{"dead_retention = \"8d\"", "must be at most 7d"},
           Case{"rejoin_interval = \"999ms\"",
                "rejoin_interval \"999ms\": must be 0s (never) or at least 1s"},
           Case{"rejoin_interval = \"8d\"", "rejoin_interval \"8d\": must be at most 7d"},
           Case{"rejoin_interval = 10", "rejoin_interval"},
           Case{"table_sync_interval = \"99ms\"",
                "table_sync_interval \"99ms\": must be 0s (never) or at least 100ms"},
           Case{"table_sync_interval = \"2h\"", "table_sync_interval \"2h\": must be at most 1h"},
           Case{"reconnect_backoff_min = \"0ms\"", "must be at least 1ms"},
           Case{"reconnect_backoff_max = \"11m\"", "must be at most 10m"},
           Case{"gossip_interval = \"fast\"", "gossip_interval \"fast\":"},
       }) {
    const std::string text = "[cluster]\n" + std::string(c.line) + "\n";
    const std::uint32_t column = static_cast<std::uint32_t>(c.line.find('=') + 3);
    EXPECT_TRUE(one_error(text, 2, column, {"cluster: ", c.needle})) << c.line;
  }
}

// rejoin_interval and table_sync_interval: 0s turns each off (rejoining
// through the seeds; table sync); their defaults are core::MembershipOptions',
// and any other value is read.
TEST(ClusterConfigTest, NeverOrAtLeastIntervalsZeroTurnsThemOff) {
  struct Case {
    const char* key;
    std::int64_t ClusterSettings::*field;
    std::int64_t core::MembershipOptions::*core_field;
  };
  for (const Case& c : {Case{"rejoin_interval", &ClusterSettings::rejoin_interval_us,
                             &core::MembershipOptions::rejoin_interval_us},
                        Case{"table_sync_interval", &ClusterSettings::table_sync_interval_us,
                             &core::MembershipOptions::table_sync_interval_us}}) {
    EXPECT_EQ(ClusterSettings{}.*c.field, core::MembershipOptions{}.*c.core_field) << c.key;
    const LoadResult off = load("[cluster]\n" + std::string(c.key) + " = \"0s\"\n");
    ASSERT_TRUE(off.ok()) << all_errors(off);
    EXPECT_EQ(off.config.cluster.*c.field, 0) << c.key;
    const LoadResult slow = load("[cluster]\n" + std::string(c.key) + " = \"2m\"\n");
    ASSERT_TRUE(slow.ok()) << all_errors(slow);
    EXPECT_EQ(slow.config.cluster.*c.field, 120 * kSecondUs) << c.key;
  }
  EXPECT_EQ(ClusterSettings{}.rejoin_interval_us, 10 * kSecondUs);
  EXPECT_EQ(ClusterSettings{}.table_sync_interval_us, 1 * kSecondUs);
}

// Owner routing is on by default from 128 live members; the defaults are
// core::ClusterOptions', and the keys are read.
TEST(ClusterConfigTest, OwnerRoutingDefaultsAndKeys) {
  const ClusterSettings defaults;
  const core::ClusterOptions core_defaults;
  EXPECT_EQ(defaults.owners_per_key, core_defaults.owners_per_key);
  EXPECT_EQ(defaults.owners_per_key, 2u);
  EXPECT_EQ(defaults.routed_min_members, core_defaults.routed_min_members);
  EXPECT_EQ(defaults.routed_max_origins, core_defaults.routed_max_origins);
  const LoadResult set =
      load("[cluster]\nowners_per_key = 0\nrouted_min_members = 1\nrouted_max_origins = 8\n");
  ASSERT_TRUE(set.ok()) << all_errors(set);
  EXPECT_EQ(set.config.cluster.owners_per_key, 0u);
  EXPECT_EQ(set.config.cluster.routed_min_members, 1u);
  EXPECT_EQ(set.config.cluster.routed_max_origins, 8u);
  EXPECT_FALSE(load("[cluster]\nrouted_min_members = 0\n").ok());
}

TEST(ClusterConfigErrorTest, ProbeTimeoutMustNotExceedTheInterval) {
  EXPECT_TRUE(
      one_error(cluster_with("probe_interval = \"100ms\"\nprobe_timeout = \"101ms\"\n"), 3, 17,
                {"cluster: probe_timeout \"101ms\": must not exceed probe_interval (100ms)"}));
  // Against the default interval (500ms).
  EXPECT_TRUE(one_error(cluster_with("probe_timeout = \"600ms\"\n"), 2, 17,
                        {"must not exceed probe_interval (500ms by default)"}));
  // A short interval against the default timeout (200ms) is blamed on the interval.
  EXPECT_TRUE(one_error(cluster_with("probe_interval = \"100ms\"\n"), 2, 18,
                        {"cluster: probe_interval \"100ms\": must not be less than probe_timeout "
                         "(200ms by default); set probe_timeout too"}));
  EXPECT_TRUE(load(cluster_with("probe_interval = \"100ms\"\nprobe_timeout = \"100ms\"\n")).ok());
  // An invalid value is reported once, not compared as well.
  EXPECT_TRUE(one_error(cluster_with("probe_interval = \"1ms\"\nprobe_timeout = \"50ms\"\n"), 2, 18,
                        {"must be at least 10ms"}));
}

TEST(ClusterConfigErrorTest, ReconnectBackoffMinMustNotExceedMax) {
  EXPECT_TRUE(one_error(
      cluster_with("reconnect_backoff_min = \"2s\"\nreconnect_backoff_max = \"1s\"\n"), 2, 25,
      {"cluster: reconnect_backoff_min \"2s\": must not exceed reconnect_backoff_max (1s)"}));
  EXPECT_TRUE(one_error(cluster_with("reconnect_backoff_min = \"10s\"\n"), 2, 25,
                        {"must not exceed reconnect_backoff_max (5s by default)"}));
  EXPECT_TRUE(one_error(cluster_with("reconnect_backoff_max = \"10ms\"\n"), 2, 25,
                        {"cluster: reconnect_backoff_max \"10ms\": must not be less than "
                         "reconnect_backoff_min (50ms by default)"}));
}

TEST(ClusterConfigErrorTest, IntegersOutOfRange) {
  struct Case {
    std::string_view line;
    std::string_view needle;
  };
  for (const Case& c : {
           Case{"fanout = -1", "fanout -1: must not be negative"},
           Case{"fanout = 65", "fanout 65: must be at most 64"},
           Case{"mtu_bytes = 575", "mtu_bytes 575: must be at least 576"},
           Case{"mtu_bytes = 65001", "must be at most 65000"},
           Case{"indirect_probes = 17", "indirect_probes 17: must be at most 16"},
           Case{"max_members = 1", "max_members 1: must be at least 2"},
           Case{"max_members = 100001", "must be at most 100000"},
           Case{"max_peer_queue_bytes = 65535", "must be at least 65536"},
           Case{"max_peer_queue_bytes = 1073741825", "must be at most 1073741824"},
           Case{"max_packets_per_round = 0", "must be at least 1"},
           Case{"counter_retention = \"500ms\"", "at least"},
       }) {
    const std::string text = "[cluster]\n" + std::string(c.line) + "\n";
    const std::uint32_t column = static_cast<std::uint32_t>(c.line.find('=') + 3);
    EXPECT_TRUE(one_error(text, 2, column, {"cluster: ", c.needle})) << c.line;
  }
}

TEST(ClusterConfigErrorTest, AllProblemsInFileOrder) {
  const LoadResult result = load(R"([cluster]
mode = "gossip"
fanout = 99
bind = "nope"
probe_timeout = "1h"
)");
  ASSERT_EQ(result.errors.size(), 4u) << all_errors(result);
  EXPECT_EQ(result.errors[0].line, 2u);  // the missing secret_file, at mode
  EXPECT_EQ(result.errors[1].line, 3u);
  EXPECT_EQ(result.errors[2].line, 4u);
  EXPECT_EQ(result.errors[3].line, 5u);
  EXPECT_EQ(result.config.cluster.mode, ClusterMode::kNone);  // nothing half-built
}

// ----- parse_host_port / split_seed_list -------------------------------------

TEST(HostPortTest, Accepts) {
  struct Case {
    std::string_view text;
    std::string_view host;
    std::uint16_t port;
  };
  for (const Case& c : {
           Case{"127.0.0.1:7946", "127.0.0.1", 7946},
           Case{"0.0.0.0:1", "0.0.0.0", 1},
           Case{"255.255.255.255:65535", "255.255.255.255", 65535},
           Case{"[::1]:7946", "::1", 7946},
           Case{"[::]:80", "::", 80},
           Case{"[fd00:1:2::3]:7000", "fd00:1:2::3", 7000},
           Case{"[::ffff:10.0.0.1]:7000", "::ffff:10.0.0.1", 7000},
           Case{"[fe80::1%eth0]:7946", "fe80::1%eth0", 7946},
           Case{"localhost:7946", "localhost", 7946},
           Case{"rlimit-2.prod.example.com:7946", "rlimit-2.prod.example.com", 7946},
           Case{"rlimit_2:7946", "rlimit_2", 7946},
           Case{"1host:7946", "1host", 7946},
           Case{"h:00080", "h", 80},
       }) {
    std::string host = "untouched";
    std::uint16_t port = 0;
    std::string error = "untouched";
    EXPECT_TRUE(parse_host_port(c.text, &host, &port, &error)) << c.text << ": " << error;
    EXPECT_EQ(host, c.host) << c.text;
    EXPECT_EQ(port, c.port) << c.text;
  }
  // Every output is optional.
  EXPECT_TRUE(parse_host_port("a:1", nullptr, nullptr, nullptr));
}

TEST(HostPortTest, Rejects) {
  for (std::string_view text : {
           "",
           "host",
           "host:",
           ":1",
           "host:0",
           "host:65536",
           "host:99999999999",
           "host:-1",
           "host:+1",
           "host:1x",
           "host: 1",
           " host:1",
           "host:1\n",
           "1.2.3:1",
           "1.2.3.4.5:1",
           "01.2.3.4:1",
           "256.0.0.1:1",
           "::1:1",
           "fd00::1:7946",
           "[::1]",
           "[::1]7946",
           "[::1:1",
           "[]:1",
           "[10.0.0.1]:1",
           "[::1%]:1",
           "[zz::1]:1",
           "-host:1",
           "host-:1",
           "a..b:1",
           "a.:1",
           ".a:1",
           "ho$t:1",
           "höst:1",
       }) {
    std::string host = "untouched";
    std::uint16_t port = 42;
    std::string error;
    EXPECT_FALSE(parse_host_port(text, &host, &port, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
    EXPECT_EQ(host, "untouched") << text;
    EXPECT_EQ(port, 42) << text;
  }
  const std::string long_label(64, 'a');
  EXPECT_FALSE(parse_host_port(long_label + ":1", nullptr, nullptr, nullptr));
  EXPECT_TRUE(parse_host_port(long_label.substr(1) + ":1", nullptr, nullptr, nullptr));
  std::string long_name;
  while (long_name.size() < 254) long_name += "abcdefghi.";
  long_name.resize(254);
  EXPECT_FALSE(parse_host_port(long_name + ":1", nullptr, nullptr, nullptr));
}

TEST(HostPortTest, MessagesSayWhy) {
  std::string error;
  EXPECT_FALSE(parse_host_port("10.0.0.1", nullptr, nullptr, &error));
  EXPECT_NE(error.find("missing port"), std::string::npos) << error;
  EXPECT_FALSE(parse_host_port("::1:7946", nullptr, nullptr, &error));
  EXPECT_NE(error.find("[::1]:7946"), std::string::npos) << error;
  EXPECT_FALSE(parse_host_port("h:70000", nullptr, nullptr, &error));
  EXPECT_NE(error.find("1 to 65535"), std::string::npos) << error;
}

TEST(SeedListTest, SplitsTrimsAndDropsEmpties) {
  EXPECT_EQ(split_seed_list(""), std::vector<std::string>{});
  EXPECT_EQ(split_seed_list(" , ,,"), std::vector<std::string>{});
  EXPECT_EQ(split_seed_list("a:1"), (std::vector<std::string>{"a:1"}));
  EXPECT_EQ(split_seed_list("a:1, b:2,,\tc:3 ,"), (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(split_seed_list("[::1]:1,[fd00::2]:2"),
            (std::vector<std::string>{"[::1]:1", "[fd00::2]:2"}));
  // Entries are not checked here.
  EXPECT_EQ(split_seed_list("nope"), (std::vector<std::string>{"nope"}));
}

TEST(RedisConfigTest, EveryRedisKey) {
  const LoadResult r = load(R"([cluster]
mode = "redis"
[redis]
addresses = ["10.0.0.5:6379", "[fd00::1]:7000"]
cluster = true
username = "rlimit"
password_file = "/etc/rlimitd/redis.password"
key_prefix = "rl:"
sync_interval = "50ms"
connect_timeout = "1s"
command_timeout = "250ms"
max_writes_per_batch = 100
max_reads_per_batch = 0
standin_max = "0s"
)");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  const RedisSettings& s = r.config.redis;
  EXPECT_EQ(r.config.cluster.mode, ClusterMode::kRedis);
  EXPECT_EQ(s.addresses, (std::vector<std::string>{"10.0.0.5:6379", "[fd00::1]:7000"}));
  EXPECT_TRUE(s.cluster);
  EXPECT_EQ(s.username, "rlimit");
  EXPECT_EQ(s.password_file, "/etc/rlimitd/redis.password");
  EXPECT_EQ(s.key_prefix, "rl:");
  EXPECT_EQ(s.sync_interval_us, 50'000);
  EXPECT_EQ(s.connect_timeout_us, 1'000'000);
  EXPECT_EQ(s.command_timeout_us, 250'000);
  EXPECT_EQ(s.max_writes_per_batch, 100u);
  EXPECT_EQ(s.max_reads_per_batch, 0u);
  EXPECT_EQ(s.standin_max_us, 0);
}

TEST(RedisConfigTest, RedisModeNeedsNoSecretAndDefaultsToLocalRedis) {
  const LoadResult r = load("[cluster]\nmode = \"redis\"\n");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  EXPECT_EQ(r.config.redis.addresses, (std::vector<std::string>{"127.0.0.1:6379"}));
  EXPECT_FALSE(r.config.redis.cluster);
}

TEST(RedisConfigTest, BadRedisKeysAreLocatedErrors) {
  EXPECT_TRUE(one_error("[redis]\ntls = true\n", 2, 7, {"redis: tls", "no TLS"}));
  EXPECT_TRUE(one_error("[redis]\naddresses = [\"nope\"]\n", 2, 14,
                        {"redis: addresses entry \"nope\"", "missing port"}));
  EXPECT_TRUE(one_error("[redis]\naddresses = []\n", 2, 13, {"redis: addresses", "at least one"}));
  EXPECT_TRUE(one_error("[redis]\nsync_interval = \"0s\"\n", 2, 17, {"redis: sync_interval"}));
  EXPECT_TRUE(
      one_error("[redis]\nmax_writes_per_batch = 0\n", 2, 24, {"redis: max_writes_per_batch"}));
  EXPECT_TRUE(one_error("[redis]\nhost = \"x\"\n", 2, 1, {"redis: ", "unknown key \"host\""}));
}

}  // namespace
}  // namespace rlimit::config
