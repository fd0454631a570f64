#include "scenario.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace rlimit::sim {
namespace {

constexpr const char* kMinimal = R"(
name = "t"
duration = "5s"
[cluster]
nodes = 3
[[traffic]]
descriptors = { api = "a" }
[[rule]]
name = "r"
match = { api = "a" }
limit = 10
period = "1s"
)";

TEST(ScenarioTest, EveryShippedScenarioLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RLIMIT_SCENARIO_DIR)) {
    if (entry.path().extension() != ".toml") continue;
    const ScenarioLoad load = load_scenario_file(entry.path().string());
    for (const std::string& e : load.errors) ADD_FAILURE() << e;
    EXPECT_TRUE(load.scenario.has_value()) << entry.path();
    ++count;
  }
  EXPECT_GE(count, 10);
}

TEST(ScenarioTest, OverridesReachAnyField) {
  const ScenarioLoad load =
      load_scenario(kMinimal, "t.toml",
                    {"network.loss=0.25", "cluster.fanout=5", "traffic.0.demand=3.5",
                     "network.delay=\"7ms\"", "traffic.0.arrival=constant"});
  ASSERT_TRUE(load.scenario) << (load.errors.empty() ? "" : load.errors[0]);
  const Scenario& s = *load.scenario;
  EXPECT_DOUBLE_EQ(s.network.loss, 0.25);
  EXPECT_EQ(s.cluster.options.fanout, 5u);
  EXPECT_DOUBLE_EQ(s.traffic[0].demand, 3.5);
  EXPECT_EQ(s.network.delay_us, 7000);
  EXPECT_EQ(s.traffic[0].arrival, ArrivalKind::kConstant);
  EXPECT_EQ(s.rules.rules.size(), 1u);
}

TEST(ScenarioTest, UnknownKeysAndBadValuesAreErrors) {
  const ScenarioLoad load = load_scenario(
      kMinimal, "t.toml", {"network.los=0.1", "cluster.nodes=0", "traffic.3.demand=1"});
  EXPECT_FALSE(load.scenario);
  ASSERT_EQ(load.errors.size(), 1u);  // a bad path stops before the fields are read
  EXPECT_NE(load.errors[0].find("traffic.3.demand"), std::string::npos);

  const ScenarioLoad typo =
      load_scenario(kMinimal, "t.toml", {"network.los=0.1", "cluster.nodes=0"});
  ASSERT_EQ(typo.errors.size(), 2u);
  const std::string all = typo.errors[0] + "\n" + typo.errors[1];
  EXPECT_NE(all.find("t.toml: network.los: unknown key"), std::string::npos) << all;
  EXPECT_NE(all.find("cluster.nodes: must be between 1"), std::string::npos) << all;
}

TEST(ScenarioTest, RulesAreCheckedByTheDaemonsLoader) {
  const ScenarioLoad load = load_scenario(std::string(kMinimal) + "limt = 3\n", "t.toml");
  EXPECT_FALSE(load.scenario);
  ASSERT_FALSE(load.errors.empty());
  EXPECT_NE(load.errors[0].find("limt"), std::string::npos) << load.errors[0];
}

TEST(ScenarioTest, PartitionsBySizeAndFaultsAreValidated) {
  const ScenarioLoad load = load_scenario(std::string(kMinimal) + R"(
[[partition]]
start = "1s"
end = "2s"
sizes = [1, 2]
[[crash]]
node = 7
at = "1s"
)",
                                          "t.toml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(load.errors[0].find("node 7 does not exist"), std::string::npos) << load.errors[0];

  const ScenarioLoad ok = load_scenario(std::string(kMinimal) + R"(
[[partition]]
start = "1s"
end = "2s"
sizes = [1, 2]
)",
                                        "t.toml");
  ASSERT_TRUE(ok.scenario);
  ASSERT_EQ(ok.scenario->partitions[0].groups.size(), 2u);
  EXPECT_EQ(ok.scenario->partitions[0].groups[1], (std::vector<std::uint32_t>{1, 2}));
}

}  // namespace
}  // namespace rlimit::sim
