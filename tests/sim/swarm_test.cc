#include "swarm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SwarmTest, TheWorstRunIsReproducibleFromItsSeedAndParameters) {
  const std::string file = std::string(RLIMIT_SCENARIO_DIR) + "/steady.toml";
  const std::vector<std::string> base = {"duration=\"6s\""};
  SwarmReport report;
  std::string error;
  ASSERT_TRUE(run_swarm(read(file), file, base, 100, 4, report, error, nullptr)) << error;
  ASSERT_EQ(report.runs.size(), 4u);
  for (const SwarmRun& run : report.runs) {
    EXPECT_LE(run.score, report.runs[report.worst].score);
    EXPECT_EQ(run.overrides.size(), default_swarm_ranges().size());
  }
  const SwarmRun& worst = report.runs[report.worst];
  std::vector<std::string> all = base;
  all.insert(all.end(), worst.overrides.begin(), worst.overrides.end());
  const Results again = run(shipped("steady", all), worst.seed);
  EXPECT_EQ(again.digest, worst.results.digest);
  EXPECT_NE(reproduce_command(file, base, worst).find("--seed " + std::to_string(worst.seed)),
            std::string::npos);
}

}  // namespace
}  // namespace rlimit::sim
