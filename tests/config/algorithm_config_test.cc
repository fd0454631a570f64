// The rule keys that select an algorithm and its options, and the throttle
// modes: what each reads into, and the located error for each misuse.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "config/config.h"
#include "core/rule_state.h"
#include "config_test_util.h"

namespace rlimit::config {
namespace {

using test_util::all_errors;
using test_util::kSecondUs;
using test_util::load;

// The one rule of `body` (lines after name, match, limit = 5).
core::Rule only_rule(std::string_view body) {
  const LoadResult result =
      load("[[rule]]\nname = \"r\"\nmatch = {}\nlimit = 5\n" + std::string(body));
  EXPECT_TRUE(result.ok()) << all_errors(result);
  return result.ok() ? result.config.rules.rules.at(0) : core::Rule{};
}

// The single error loading the rule gives, as "line:column: message".
std::string error_of(std::string_view body, std::string_view before = "") {
  const LoadResult result = load(std::string(before) +
                                 "[[rule]]\nname = \"r\"\nmatch = {}\nlimit = 5\n" +
                                 std::string(body));
  if (result.errors.size() != 1) return "expected 1 error, got:\n" + all_errors(result);
  const ConfigError& e = result.errors[0];
  return std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.message;
}

TEST(AlgorithmConfigTest, EveryAlgorithmLoadsWithItsOptions) {
  core::Rule r = only_rule("period = \"1s\"\nalgorithm = \"leaky_bucket\"\nburst = 3\n"
                           "shaper = true\nmax_delay = \"250ms\"\n");
  EXPECT_EQ(r.algorithm, core::Algorithm::kLeakyBucket);
  EXPECT_EQ(r.params, (core::BucketParams{5, kSecondUs, 3}));
  EXPECT_TRUE(r.options.shaper);
  EXPECT_EQ(r.options.max_delay_us, 250'000);

  r = only_rule("period = \"1m\"\nalgorithm = \"fixed_window\"\n");
  EXPECT_EQ(r.algorithm, core::Algorithm::kFixedWindow);
  r = only_rule("period = \"1m\"\nalgorithm = \"sliding_window\"\n");
  EXPECT_EQ(r.algorithm, core::Algorithm::kSlidingWindow);
  r = only_rule("period = \"1m\"\nalgorithm = \"sliding_log\"\nmax_entries = 100\n");
  EXPECT_EQ(r.options.max_entries, 100);
  r = only_rule("period = \"1m\"\nalgorithm = \"gcra\"\nburst = 15\n");
  EXPECT_EQ(r.algorithm, core::Algorithm::kGcra);
  r = only_rule("period = \"1s\"\nalgorithm = \"smooth_bursty\"\nburst = 10\nmax_delay = \"0s\"\n");
  EXPECT_EQ(r.options.max_delay_us, 0);
  EXPECT_FALSE(r.options.start_empty);
  r = only_rule("period = \"1s\"\nalgorithm = \"smooth_bursty\"\nstart = \"empty\"\n");
  EXPECT_TRUE(r.options.start_empty);
  r = only_rule("period = \"1s\"\nalgorithm = \"smooth_bursty\"\nstart = \"full\"\n");
  EXPECT_FALSE(r.options.start_empty);
  r = only_rule("period = \"1s\"\nalgorithm = \"smooth_warming_up\"\nwarmup = \"4s\"\n"
                "cold_factor = 5\n");
  EXPECT_EQ(r.options.warmup_us, 4 * kSecondUs);
  EXPECT_EQ(r.options.cold_factor, 5);
  r = only_rule("algorithm = \"concurrency\"\nlease_ttl = \"30s\"\n");
  EXPECT_EQ(r.algorithm, core::Algorithm::kConcurrency);
  EXPECT_EQ(r.options.lease_ttl_us, 30 * kSecondUs);
  // Every loaded rule makes valid parameters for its algorithm.
  std::string why;
  EXPECT_TRUE(core::make_algorithm_params(r.algorithm, r.params, r.options, &why)) << why;
}

TEST(AlgorithmConfigTest, ThrottleModes) {
  core::Rule r = only_rule("period = \"1s\"\nmode = \"shadow\"\n");
  EXPECT_EQ(r.options.throttle.mode, core::alg::ThrottleMode::kShadow);
  r = only_rule("period = \"1s\"\nmode = \"soft\"\nsoft_percent = 10\n");
  EXPECT_EQ(r.options.throttle.mode, core::alg::ThrottleMode::kSoft);
  EXPECT_EQ(r.options.throttle.soft_percent, 10);
  r = only_rule("period = \"1s\"\nmode = \"elastic\"\nelastic_threshold_percent = 70\n");
  EXPECT_EQ(r.options.throttle.elastic_threshold_permille, 700);
}

TEST(AlgorithmConfigTest, OptionsAreChangesOfDefinition) {
  const core::Rule a = only_rule("period = \"1s\"\nalgorithm = \"gcra\"\n");
  const core::Rule b = only_rule("period = \"1s\"\nalgorithm = \"gcra\"\nmode = \"shadow\"\n");
  const core::Rule c = only_rule("period = \"1s\"\nalgorithm = \"fixed_window\"\n");
  EXPECT_TRUE(a.same_definition(a));
  EXPECT_FALSE(a.same_definition(b));
  EXPECT_FALSE(a.same_definition(c));
  // A new starting state is a new definition: keys made under the old one
  // started otherwise.
  const core::Rule full = only_rule("period = \"1s\"\nalgorithm = \"smooth_bursty\"\n");
  const core::Rule empty =
      only_rule("period = \"1s\"\nalgorithm = \"smooth_bursty\"\nstart = \"empty\"\n");
  EXPECT_FALSE(full.same_definition(empty));
}

TEST(AlgorithmConfigErrorTest, OptionsThatDoNotApplyAreLocated) {
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"fixed_window\"\nburst = 3\n"),
            "7:9: rule \"r\": burst does not apply to fixed_window (it applies to token_bucket, "
            "leaky_bucket, gcra, smooth_bursty)");
  EXPECT_EQ(error_of("period = \"1s\"\nmax_entries = 3\n"),
            "6:15: rule \"r\": max_entries does not apply to token_bucket (only to sliding_log)");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"leaky_bucket\"\nmax_delay = \"1s\"\n"),
            "7:13: rule \"r\": max_delay does not apply to leaky_bucket (only to leaky_bucket "
            "with shaper = true, smooth_bursty, smooth_warming_up)");
  EXPECT_EQ(error_of("period = \"1s\"\nwarmup = \"1s\"\n"),
            "6:10: rule \"r\": warmup does not apply to token_bucket (only to smooth_warming_up)");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"gcra\"\nstart = \"empty\"\n"),
            "7:9: rule \"r\": start does not apply to gcra (only to smooth_bursty)");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"smooth_bursty\"\nstart = \"half\"\n"),
            "7:9: rule \"r\": unknown start \"half\" (supported: full, empty)");
  EXPECT_EQ(error_of("period = \"1s\"\nsoft_percent = 5\n"),
            "6:16: rule \"r\": soft_percent applies only with mode = \"soft\"");
  EXPECT_EQ(error_of("period = \"1s\"\nmode = \"loose\"\n"),
            "6:8: rule \"r\": unknown mode \"loose\" (supported: hard, soft, shadow, elastic)");
}

TEST(AlgorithmConfigErrorTest, MissingAndBadValues) {
  EXPECT_EQ(error_of("algorithm = \"concurrency\"\n"),
            "1:1: rule \"r\": missing required key \"lease_ttl\"");
  EXPECT_EQ(error_of("algorithm = \"concurrency\"\nlease_ttl = \"1s\"\nperiod = \"1s\"\n"),
            "7:10: rule \"r\": period does not apply to concurrency (leases expire after "
            "lease_ttl)");
  EXPECT_EQ(error_of("period = \"1s\"\nmode = \"soft\"\n"),
            "1:1: rule \"r\": missing required key \"soft_percent\"");
  EXPECT_EQ(error_of("period = \"1s\"\nmode = \"soft\"\nsoft_percent = 101\n"),
            "7:16: rule \"r\": soft_percent 101: must be at most 100");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"gcra\"\nburst = 0\n"),
            "1:1: rule \"r\": gcra needs burst >= 1 (burst is max_burst + 1)");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"sliding_log\"\nmax_entries = 0\n"),
            "7:15: rule \"r\": max_entries 0: must be at least 1");
  EXPECT_EQ(error_of("period = \"1s\"\nalgorithm = \"smooth_warming_up\"\ncold_factor = 0\n"),
            "7:15: rule \"r\": cold_factor 0: must be at least 1");
}

TEST(AlgorithmConfigErrorTest, ConcurrencyIsRefusedInClusterModeUnlessLocal) {
  const std::string cluster = "[cluster]\nmode = \"gossip\"\nsecret_file = \"/dev/null\"\n";
  const std::string error =
      error_of("algorithm = \"concurrency\"\nlease_ttl = \"1s\"\n", cluster);
  EXPECT_NE(error.find("4:1: rule \"r\": concurrency cannot be shared by a cluster"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("set local = true"), std::string::npos) << error;
  const LoadResult local = load(cluster +
                                "[[rule]]\nname = \"r\"\nmatch = {}\nlimit = 5\n"
                                "algorithm = \"concurrency\"\nlease_ttl = \"1s\"\nlocal = true\n");
  EXPECT_TRUE(local.ok()) << all_errors(local);
  // Without a cluster, concurrency needs nothing more.
  EXPECT_EQ(only_rule("algorithm = \"concurrency\"\nlease_ttl = \"1s\"\n").algorithm,
            core::Algorithm::kConcurrency);
  // The daemon applies the same check after --cluster-mode.
  const core::Rule rule = only_rule("algorithm = \"concurrency\"\nlease_ttl = \"1s\"\n");
  core::RuleSet rules;
  rules.rules.push_back(rule);
  EXPECT_EQ(check_rules_for_cluster(rules, ClusterMode::kMesh).size(), 1u);
  EXPECT_TRUE(check_rules_for_cluster(rules, ClusterMode::kNone).empty());
}

}  // namespace
}  // namespace rlimit::config
