// `rlimitctl convert envoy-ratelimit`: each example of envoyproxy/ratelimit's
// README (re-typed under fixtures/envoy) is converted, the TOML is loaded by
// rlimitd's own config loader, and the rules are run through a core::Limiter
// with the descriptors rlimit's Envoy face would send (domain first), counting
// what is allowed against what ratelimit documents. Malformed and unsupported
// input must be refused or reported with its place.
#include "envoy_convert.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/sanitizer_report.h"
#include "config/config.h"
#include "core/limiter.h"

namespace rlimit::tools {
namespace {

// A day boundary (and so a second, minute and hour boundary) of Unix time:
// every fixed window starts here.
constexpr core::TimeUs kStart = 1'699'920'000LL * 1'000'000;
constexpr core::TimeUs kSecond = 1'000'000;

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(ENVOY_FIXTURE_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "  " + line + "\n";
  return out;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

// A converted file, loaded by rlimitd's loader, running in a Limiter.
struct Loaded {
  EnvoyConvertResult result;
  config::LoadResult config;
  std::unique_ptr<core::Limiter> limiter;
};

Loaded convert_and_load(const std::string& yaml, const std::string& name = "test.yaml") {
  Loaded loaded;
  loaded.result = convert_envoy_ratelimit(yaml, name);
  EXPECT_TRUE(loaded.result.ok()) << joined(loaded.result.errors);
  loaded.config = config::load_config(loaded.result.toml, "converted.toml");
  EXPECT_TRUE(loaded.config.ok()) << joined([&] {
    std::vector<std::string> lines;
    for (const auto& e : loaded.config.errors) lines.push_back(e.to_string());
    return lines;
  }()) << loaded.result.toml;
  if (loaded.config.ok()) {
    loaded.limiter = std::make_unique<core::Limiter>(loaded.config.config.daemon.limiter,
                                                     loaded.config.config.rules);
  }
  return loaded;
}

using Entries = std::vector<std::pair<std::string, std::string>>;

// What rlimit's Envoy face checks for a request of `domain` and `entries`.
core::CheckOutput check(core::Limiter& limiter, const std::string& domain, const Entries& entries,
                        core::TimeUs now = kStart) {
  std::vector<core::Descriptor> descriptors;
  descriptors.push_back({"domain", domain});
  for (const auto& [key, value] : entries) descriptors.push_back({key, value});
  core::CheckInput input;
  input.descriptors = descriptors;
  core::CheckOutput out;
  limiter.check(input, now, out);
  return out;
}

// Checks `n` times at `now`; how many were allowed.
int allowed_of(core::Limiter& limiter, const std::string& domain, const Entries& entries, int n,
               core::TimeUs now = kStart) {
  int allowed = 0;
  for (int i = 0; i < n; ++i) allowed += check(limiter, domain, entries, now).allowed ? 1 : 0;
  return allowed;
}

// The names of the rules that judged the check.
std::vector<std::string> rules_of(const core::CheckOutput& out) {
  std::vector<std::string> names;
  for (const core::RuleVerdict& v : out.rules) names.emplace_back(v.name);
  return names;
}

TEST(EnvoyConvertTest, Example1MongoCpsTwoDatabasesEachTheirOwnLimit) {
  Loaded l = convert_and_load(read_fixture("example1_mongo_cps.yaml"));
  ASSERT_TRUE(l.limiter);
  EXPECT_TRUE(l.result.warnings.empty()) << joined(l.result.warnings);
  ASSERT_EQ(l.config.config.rules.rules.size(), 2u);
  EXPECT_EQ(l.config.config.rules.rules[0].name, "mongo_cps.database_users");
  EXPECT_EQ(l.config.config.rules.rules[0].algorithm, core::Algorithm::kFixedWindow);

  EXPECT_EQ(allowed_of(*l.limiter, "mongo_cps", {{"database", "users"}}, 600), 500);
  EXPECT_EQ(allowed_of(*l.limiter, "mongo_cps", {{"database", "default"}}, 600), 500);
  // The next one-second window starts afresh.
  EXPECT_EQ(allowed_of(*l.limiter, "mongo_cps", {{"database", "users"}}, 600, kStart + kSecond),
            500);
  // Another database, another domain: no limit at all.
  const core::CheckOutput other = check(*l.limiter, "mongo_cps", {{"database", "orders"}});
  EXPECT_TRUE(other.allowed);
  EXPECT_TRUE(other.rules.empty());
  EXPECT_EQ(allowed_of(*l.limiter, "other_domain", {{"database", "users"}}, 600), 600);
}

TEST(EnvoyConvertTest, Example2MessagingNestedAndKeyOnlyLimitsCountSeparately) {
  Loaded l = convert_and_load(read_fixture("example2_messaging.yaml"));
  ASSERT_TRUE(l.limiter);
  const Entries marketing = {{"message_type", "marketing"}, {"to_number", "2061111111"}};
  // 5 marketing messages a day to one number; another number has its own 5.
  EXPECT_EQ(allowed_of(*l.limiter, "messaging", marketing, 10), 5);
  const core::CheckOutput denied = check(*l.limiter, "messaging", marketing);
  EXPECT_EQ(rules_of(denied),
            std::vector<std::string>{"messaging.message_type_marketing.to_number"});
  EXPECT_EQ(allowed_of(*l.limiter, "messaging",
                       {{"message_type", "marketing"}, {"to_number", "2062222222"}}, 10),
            5);
  // The marketing descriptor is deeper than (to_number): the 100 a day are
  // untouched by it, as ratelimit counts them.
  EXPECT_EQ(allowed_of(*l.limiter, "messaging", {{"to_number", "2061111111"}}, 150), 100);
  EXPECT_EQ(allowed_of(*l.limiter, "messaging", {{"to_number", "2063333333"}}, 150), 100);
  // Another message type has no node in ratelimit's tree: no limit.
  EXPECT_EQ(allowed_of(*l.limiter, "messaging",
                       {{"message_type", "transactional"}, {"to_number", "2061111111"}}, 200),
            200);
  // The next day window starts afresh.
  EXPECT_EQ(allowed_of(*l.limiter, "messaging", marketing, 10, kStart + 86'400 * kSecond), 5);
  EXPECT_TRUE(any_contains(l.result.notes, "order"));
}

TEST(EnvoyConvertTest, Example3TheValueEntryIsMatchedBeforeTheKeyAlone) {
  Loaded l = convert_and_load(read_fixture("example3_edge_proxy_per_ip.yaml"));
  ASSERT_TRUE(l.limiter);
  EXPECT_EQ(allowed_of(*l.limiter, "edge_proxy_per_ip", {{"remote_address", "50.0.0.1"}}, 20), 10);
  EXPECT_EQ(allowed_of(*l.limiter, "edge_proxy_per_ip", {{"remote_address", "50.0.0.2"}}, 20), 10);
  // Black-listed: 0 per second, and only its own rule judges it.
  const core::CheckOutput black =
      check(*l.limiter, "edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}});
  EXPECT_FALSE(black.allowed);
  EXPECT_EQ(rules_of(black), std::vector<std::string>{"edge_proxy_per_ip.remote_address_50.0.0.5"});
  EXPECT_EQ(allowed_of(*l.limiter, "edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}, 5), 0);
  EXPECT_EQ(allowed_of(*l.limiter, "edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}, 5,
                       kStart + 3600 * kSecond),
            0);
}

TEST(EnvoyConvertTest, Example4ALimitAppliesOnlyWhereTheRequestEnds) {
  Loaded nested = convert_and_load(read_fixture("example4_nested.yaml"));
  ASSERT_TRUE(nested.limiter);
  EXPECT_EQ(
      allowed_of(*nested.limiter, "example4", {{"key", "value"}, {"subkey", "subvalue"}}, 400),
      300);
  // A request ending at (key=value) has no limit; nor does another value.
  EXPECT_EQ(allowed_of(*nested.limiter, "example4", {{"key", "value"}}, 400), 400);
  EXPECT_EQ(allowed_of(*nested.limiter, "example4", {{"key", "other"}, {"subkey", "s"}}, 400), 400);

  // The flat configuration: (key=value) is limited ...
  Loaded flat = convert_and_load(read_fixture("example4_flat.yaml"));
  ASSERT_TRUE(flat.limiter);
  EXPECT_EQ(allowed_of(*flat.limiter, "example4", {{"key", "value"}}, 400), 300);
  // ... and ratelimit would not limit (key=value),(subkey=subvalue): deeper
  // than the path. subkey appears nowhere in this file, so rlimit, matching
  // by key set, cannot tell; the conversion says so, and this is what runs.
  EXPECT_TRUE(any_contains(flat.result.notes, "appears nowhere in this file"));
  EXPECT_NE(flat.result.toml.find("appears nowhere in this file"), std::string::npos);
  EXPECT_EQ(allowed_of(*flat.limiter, "example4", {{"key", "value"}, {"subkey", "subvalue"}}, 10,
                       kStart + kSecond),
            10);
  EXPECT_EQ(allowed_of(*flat.limiter, "example4", {{"key", "value"}, {"subkey", "subvalue"}}, 300,
                       kStart + kSecond),
            290);
}

TEST(EnvoyConvertTest, Example5UnlimitedWritesNoRule) {
  Loaded l = convert_and_load(read_fixture("example5_unlimited.yaml"));
  ASSERT_TRUE(l.limiter);
  ASSERT_EQ(l.config.config.rules.rules.size(), 1u);
  EXPECT_NE(l.result.toml.find("(ldap) (test.yaml:4:5): unlimited"), std::string::npos)
      << l.result.toml;
  const core::CheckOutput ldap = check(*l.limiter, "internal", {{"ldap", "cn=admin"}});
  EXPECT_TRUE(ldap.allowed);
  EXPECT_TRUE(ldap.rules.empty());
  EXPECT_EQ(allowed_of(*l.limiter, "internal", {{"ldap", "cn=admin"}}, 1000), 1000);
  EXPECT_EQ(allowed_of(*l.limiter, "internal", {{"azure", "x"}}, 150), 100);
  // Per distinct value, as ratelimit's cache key holds the value.
  EXPECT_EQ(allowed_of(*l.limiter, "internal", {{"azure", "y"}}, 150), 100);
}

TEST(EnvoyConvertTest, Example6ShadowModeCountsButNeverDenies) {
  Loaded l = convert_and_load(read_fixture("example6_shadow_mode.yaml"));
  ASSERT_TRUE(l.limiter);
  const Entries user_a = {{"service", "auth-service"}, {"user", "user-a"}};
  int over = 0;
  for (int i = 0; i < 25; ++i) {
    const core::CheckOutput out = check(*l.limiter, "example6", user_a);
    EXPECT_TRUE(out.allowed);
    ASSERT_EQ(out.rules.size(), 1u);
    over += out.rules[0].over_limit ? 1 : 0;
  }
  EXPECT_EQ(over, 15);  // beyond the 10 a second, admitted by shadow mode
  EXPECT_EQ(
      allowed_of(*l.limiter, "example6", {{"service", "auth-service"}, {"user", "user-b"}}, 30),
      20);
  EXPECT_EQ(allowed_of(*l.limiter, "example6", {{"service", "other"}, {"user", "user-b"}}, 30), 20);
  EXPECT_EQ(
      allowed_of(*l.limiter, "example6", {{"service", "auth-service"}, {"user", "user-c"}}, 30),
      30);
}

TEST(EnvoyConvertTest, Example7ReplacesIsReportedAndBothLimitsStay) {
  Loaded l = convert_and_load(read_fixture("example7_replaces.yaml"));
  ASSERT_TRUE(l.limiter);
  EXPECT_TRUE(any_contains(l.result.warnings, "test.yaml:16:9: replaces"))
      << joined(l.result.warnings);
  EXPECT_NE(l.result.toml.find("# NOT EXPRESSED: replaces specific_limit"), std::string::npos);
  EXPECT_EQ(allowed_of(*l.limiter, "example7", {{"key_1", "value_1"}, {"user", "bkthomps"}}, 20),
            5);
  EXPECT_EQ(allowed_of(*l.limiter, "example7", {{"key_2", "value_2"}, {"user", "bkthomps"}}, 20),
            10);
  // One descriptor with all three entries ends at neither node.
  EXPECT_EQ(allowed_of(*l.limiter, "example7",
                       {{"key_1", "value_1"}, {"key_2", "value_2"}, {"user", "bkthomps"}}, 20),
            20);
}

TEST(EnvoyConvertTest, Example8DetailedMetricIsReportedLimitsStillHold) {
  Loaded l = convert_and_load(read_fixture("example8_detailed_metric.yaml"));
  ASSERT_TRUE(l.limiter);
  EXPECT_TRUE(any_contains(l.result.warnings, "test.yaml:5:5: detailed_metric"))
      << joined(l.result.warnings);
  EXPECT_EQ(allowed_of(*l.limiter, "example8", {{"key1", "unspecified_value"}}, 30), 10);
  EXPECT_EQ(allowed_of(*l.limiter, "example8", {{"key1", "unspecified_value2"}}, 30), 10);
  // value1 has its own 20 and does not spend the key-only 10.
  EXPECT_EQ(allowed_of(*l.limiter, "example8", {{"key1", "value1"}}, 30), 20);
}

TEST(EnvoyConvertTest, Example9WildcardIsAPrefixWithABucketPerValue) {
  Loaded l = convert_and_load(read_fixture("example9_wildcard.yaml"));
  ASSERT_TRUE(l.limiter);
  EXPECT_EQ(allowed_of(*l.limiter, "example9", {{"key1", "value_1"}}, 30), 20);
  EXPECT_EQ(allowed_of(*l.limiter, "example9", {{"key1", "value_2"}}, 30), 20);
  EXPECT_EQ(allowed_of(*l.limiter, "example9", {{"key1", "valu"}}, 30), 30);
  EXPECT_EQ(allowed_of(*l.limiter, "example9", {{"key1", "other"}}, 30), 30);
}

TEST(EnvoyConvertTest, PrecedenceHoldsAtEveryLevelWithoutBacktracking) {
  Loaded l = convert_and_load(R"(domain: d
descriptors:
  - key: a
    value: "1"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: a
    value: "2*"
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 3}
      - key: b
        value: x
        rate_limit: {unit: second, requests_per_unit: 4}
)");
  ASSERT_TRUE(l.limiter);
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "1"}}, 10), 1);
  // ratelimit takes (a=1), which has no children: no limit, no backtracking
  // to (a).(b).
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "1"}, {"b", "y"}}, 10), 10);
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "7"}, {"b", "y"}}, 10), 2);
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "25"}, {"b", "y"}}, 10), 3);
  const core::CheckOutput x = check(*l.limiter, "d", {{"a", "25"}, {"b", "x"}});
  EXPECT_TRUE(x.allowed);
  EXPECT_EQ(rules_of(x), std::vector<std::string>{"d.a_2_.b_x"});
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "25"}, {"b", "x"}}, 10), 3);  // 4, one spent above
  // (a) alone has no limit of its own.
  EXPECT_EQ(allowed_of(*l.limiter, "d", {{"a", "7"}}, 10), 10);
}

TEST(EnvoyConvertTest, UnitsAreFixedWindowsOfRatelimitsLength) {
  Loaded l = convert_and_load(R"(domain: units
descriptors:
  - {key: s, rate_limit: {unit: SECOND, requests_per_unit: 1}}
  - {key: m, rate_limit: {unit: Minute, requests_per_unit: 1}}
  - {key: h, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: d, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: w, rate_limit: {unit: week, requests_per_unit: 1}}
  - {key: mo, rate_limit: {unit: month, requests_per_unit: 1}}
  - {key: y, rate_limit: {unit: year, requests_per_unit: 1}}
)");
  ASSERT_TRUE(l.limiter);
  const std::vector<std::int64_t> periods_s = {1,         60,         3600,       86400,
                                               7 * 86400, 30 * 86400, 365 * 86400};
  const auto& rules = l.config.config.rules.rules;
  ASSERT_EQ(rules.size(), periods_s.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(rules[i].params.period_us, periods_s[i] * kSecond) << rules[i].name;
    EXPECT_EQ(rules[i].params.limit, 1) << rules[i].name;
    EXPECT_EQ(rules[i].algorithm, core::Algorithm::kFixedWindow);
  }
}

TEST(EnvoyConvertTest, StringsAreEscapedForToml) {
  Loaded l = convert_and_load(R"(domain: 'we"ird \ dom'
descriptors:
  - key: "a key.with dots"
    value: "quote \" back \\ tab \t é"
    rate_limit: {unit: second, requests_per_unit: 2}
)");
  ASSERT_TRUE(l.limiter);
  EXPECT_EQ(allowed_of(*l.limiter, "we\"ird \\ dom",
                       {{"a key.with dots", "quote \" back \\ tab \t é"}}, 5),
            2);
  EXPECT_EQ(allowed_of(*l.limiter, "we\"ird \\ dom", {{"a key.with dots", "quote"}}, 5), 5);
}

TEST(EnvoyConvertTest, MalformedYamlIsRefusedWithItsPlace) {
  const EnvoyConvertResult r = convert_envoy_ratelimit(
      "domain: d\ndescriptors:\n  - key: a\n    value: [unclosed\n", "bad.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.toml.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("bad.yaml:", 0), 0u) << r.errors[0];
  EXPECT_NE(r.errors[0].find("malformed YAML"), std::string::npos) << r.errors[0];
  // A line and a column, both numbers.
  unsigned line = 0, column = 0;
  EXPECT_EQ(std::sscanf(r.errors[0].c_str(), "bad.yaml:%u:%u:", &line, &column), 2) << r.errors[0];
  EXPECT_GE(line, 4u);

  const EnvoyConvertResult tab =
      convert_envoy_ratelimit("domain: d\n\tdescriptors: []\n", "t.yaml");
  ASSERT_FALSE(tab.ok());
  EXPECT_TRUE(any_contains(tab.errors, "t.yaml:2:")) << joined(tab.errors);
}

TEST(EnvoyConvertTest, SchemaErrorsAreAllReportedWithTheirPlace) {
  const EnvoyConvertResult r = convert_envoy_ratelimit(R"(domain: d
descriptors:
  - key: a
    rate_limits: {unit: second, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: c
    rate_limit: {unlimited: true, unit: second}
  - value: x
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: e
    rate_limit: {unit: second, requests_per_unit: -3}
  - key: f
    value: v
  - key: f
    value: v
  - key: g
    rate_limit: {requests_per_unit: 1}
  - key: h
    shadow_mode: maybe
)",
                                                       "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.toml.empty());
  EXPECT_TRUE(any_contains(r.errors, "s.yaml:4:5: unknown key 'rate_limits'")) << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "s.yaml:6:24: invalid rate limit unit 'fortnight'"))
      << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "should not specify rate limit unit when unlimited"))
      << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "s.yaml:9:5: descriptor has empty key")) << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "requests_per_unit must be an integer")) << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "s.yaml:15:5: duplicate descriptor f=v")) << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "rate_limit needs a unit")) << joined(r.errors);
  EXPECT_TRUE(any_contains(r.errors, "shadow_mode must be true or false")) << joined(r.errors);
  EXPECT_EQ(r.errors.size(), 8u) << joined(r.errors);

  EXPECT_FALSE(convert_envoy_ratelimit("descriptors: []\n", "x.yaml").ok());
  EXPECT_FALSE(convert_envoy_ratelimit("", "x.yaml").ok());
  EXPECT_FALSE(convert_envoy_ratelimit("- a\n- b\n", "x.yaml").ok());
  const EnvoyConvertResult dup = convert_envoy_ratelimit("domain: a\ndomain: b\n", "x.yaml");
  EXPECT_TRUE(any_contains(dup.errors, "x.yaml:2:1: duplicate key 'domain'")) << joined(dup.errors);
}

TEST(EnvoyConvertTest, WhatRlimitCannotExpressIsReported) {
  Loaded l = convert_and_load(R"(domain: d
descriptors:
  - key: domain
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: a
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
        unit: second
  - key: b
    descriptors:
      - key: a
        rate_limit: {unit: second, requests_per_unit: 1}
---
domain: second_document
)");
  ASSERT_TRUE(l.limiter);
  const auto& w = l.result.warnings;
  EXPECT_TRUE(any_contains(w, "test.yaml:3:5: key 'domain'")) << joined(w);
  EXPECT_TRUE(any_contains(w, "test.yaml:7:9: key 'a' appears twice on one path")) << joined(w);
  EXPECT_TRUE(any_contains(w, "test.yaml:11:9: 'unit' means nothing in a descriptor")) << joined(w);
  EXPECT_TRUE(any_contains(w, "test.yaml:14:9: (b, a) names the keys of (a, b)")) << joined(w);
  EXPECT_TRUE(any_contains(w, "only the first YAML document")) << joined(w);
  // Each warning is in the output too.
  for (const std::string& warning : w) {
    EXPECT_NE(l.result.toml.find(warning), std::string::npos) << warning;
  }
  // Only (a, b) and (b, a) became rules; both meet a check with a and b.
  ASSERT_EQ(l.config.config.rules.rules.size(), 2u);
  EXPECT_EQ(rules_of(check(*l.limiter, "d", {{"a", "1"}, {"b", "2"}})).size(), 2u);
}

// ----- the rlimitctl subcommand ---------------------------------------------

struct CtlRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CtlRun run_ctl(const std::string& args) {
  char err_path[] = "/tmp/envoy_convert_test_XXXXXX";
  const int fd = ::mkstemp(err_path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  const std::string command = std::string(RLIMITCTL_PATH) + " " + args + " 2>" + err_path;
  CtlRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> chunk;
  std::size_t n;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0) run.out.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::ostringstream text;
  text << err.rdbuf();
  run.err = text.str();
  ::unlink(err_path);
  EXPECT_TRUE(rlimit::testing::sanitizer_report(run.err).empty())
      << "rlimitctl " << args << " reported:\n" << run.err;
  return run;
}

TEST(EnvoyConvertCliTest, ConvertsToStdoutOrAFile) {
  const std::string fixture = std::string(ENVOY_FIXTURE_DIR) + "/example7_replaces.yaml";
  const CtlRun run = run_ctl("convert envoy-ratelimit " + fixture);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(config::load_config(run.out, "stdout.toml").ok()) << run.out;
  EXPECT_NE(run.err.find("rlimitctl: warning: " + fixture + ":16:9: replaces"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rlimitctl: note: "), std::string::npos) << run.err;

  char out_path[] = "/tmp/envoy_convert_out_XXXXXX";
  const int fd = ::mkstemp(out_path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const CtlRun to_file = run_ctl("convert envoy-ratelimit " + fixture + " -o " + out_path);
  EXPECT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_TRUE(to_file.out.empty());
  std::ifstream in(out_path);
  std::ostringstream text;
  text << in.rdbuf();
  ::unlink(out_path);
  EXPECT_EQ(text.str(), run.out);
}

TEST(EnvoyConvertCliTest, MalformedInputExitsTwoAndWritesNothing) {
  char in_path[] = "/tmp/envoy_convert_in_XXXXXX";
  const int fd = ::mkstemp(in_path);
  ASSERT_GE(fd, 0);
  const std::string bad = "domain: d\ndescriptors:\n  - key: [a\n";
  ASSERT_EQ(::write(fd, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
  ::close(fd);
  const std::string out_path = std::string(in_path) + ".toml";
  const CtlRun run = run_ctl(std::string("convert envoy-ratelimit ") + in_path + " -o " + out_path);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(std::string("rlimitctl: error: ") + in_path + ":"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("malformed YAML"), std::string::npos) << run.err;
  EXPECT_NE(::access(out_path.c_str(), F_OK), 0) << "output written for a malformed input";
  ::unlink(in_path);

  EXPECT_EQ(run_ctl("convert envoy-ratelimit /nonexistent/envoy.yaml").exit_code, 2);
  EXPECT_EQ(run_ctl("convert envoy-ratelimit").exit_code, 2);
  EXPECT_EQ(run_ctl("convert").exit_code, 2);
}

}  // namespace
}  // namespace rlimit::tools
