#include "seeds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// Short runs of a shipped scenario: 5 nodes, aligned bursts, 6 s.
Scenario short_aligned() { return shipped("aligned", {"cluster.nodes=5", "duration=\"6s\""}); }

TEST(SeedsTest, EachRunIsThatSeedsOwnRun) {
  const Scenario scenario = short_aligned();
  SeedsReport report;
  std::string error;
  ASSERT_TRUE(run_seeds(scenario, 7, 3, 2, report, error, nullptr)) << error;
  ASSERT_EQ(report.runs.size(), 3u);
  EXPECT_EQ(report.scenario, "aligned");
  EXPECT_EQ(report.nodes, 5u);
  for (std::size_t i = 0; i < 3; ++i) {
    const Results alone = run(scenario, 7 + i);
    const SeedRun expected = seed_run(alone);
    const SeedRun& got = report.runs[i];
    EXPECT_EQ(got.seed, 7 + i);
    EXPECT_EQ(got.digest, alone.digest) << "seed " << got.seed;
    EXPECT_EQ(got.vs_ideal, expected.vs_ideal);
    EXPECT_EQ(got.first_limits, expected.first_limits);
    EXPECT_EQ(got.most_later_limits, expected.most_later_limits);
    EXPECT_EQ(got.fewest_later_limits, expected.fewest_later_limits);
    EXPECT_EQ(got.ideal_fewest_later_limits, expected.ideal_fewest_later_limits);
    EXPECT_EQ(got.fewest_vs_ideal, expected.fewest_vs_ideal);
  }
  // Different seeds, different runs.
  EXPECT_NE(report.runs[0].digest, report.runs[1].digest);
}

TEST(SeedsTest, TheReportIsTheSameWhateverTheJobs) {
  const Scenario scenario = short_aligned();
  std::string printed[2];
  const std::uint32_t jobs[2] = {1, 4};
  for (int k = 0; k < 2; ++k) {
    SeedsReport report;
    std::string error;
    ASSERT_TRUE(run_seeds(scenario, 1, 4, jobs[k], report, error, nullptr)) << error;
    std::ostringstream out;
    print_seeds(report, out);
    write_seeds_json(report, out);
    printed[k] = out.str();
  }
  EXPECT_EQ(printed[0], printed[1]);
}

TEST(SeedsTest, TheSummaryTakesTheMeanAndTheExtremes) {
  std::vector<SeedRun> runs = {
      {.seed = 1,
       .vs_ideal = -0.02,
       .first_limits = 1.1,
       .most_later_limits = 1.2,
       .fewest_later_limits = 0.8,
       .ideal_fewest_later_limits = 0.9,
       .fewest_vs_ideal = 0.6},
      {.seed = 2,
       .vs_ideal = 0.01,
       .first_limits = 1.3,
       .most_later_limits = 1.1,
       .fewest_later_limits = -1,
       .ideal_fewest_later_limits = 0.5},
      {.seed = 3,
       .vs_ideal = 0.004,
       .first_limits = 1.0,
       .most_later_limits = 1.4,
       .fewest_later_limits = 0.7,
       .ideal_fewest_later_limits = -1,
       .fewest_vs_ideal = 0.8},
  };
  const SeedsSummary s = summarize(runs);
  EXPECT_EQ(s.runs, 3u);
  EXPECT_NEAR(s.mean_vs_ideal, (-0.02 + 0.01 + 0.004) / 3, 1e-12);
  EXPECT_NEAR(s.mean_abs_vs_ideal, (0.02 + 0.01 + 0.004) / 3, 1e-12);
  // Sample standard deviation (n - 1) and the mean's standard error.
  const double mean = (-0.02 + 0.01 + 0.004) / 3;
  const double squares = (-0.02 - mean) * (-0.02 - mean) + (0.01 - mean) * (0.01 - mean) +
                         (0.004 - mean) * (0.004 - mean);
  EXPECT_NEAR(s.sd_vs_ideal, std::sqrt(squares / 2), 1e-12);
  EXPECT_NEAR(s.mean_standard_error, std::sqrt(squares / 2) / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(s.min_vs_ideal, -0.02);
  EXPECT_EQ(s.max_vs_ideal, 0.01);
  // 1% itself is within the tolerance; -2% is beyond it.
  EXPECT_EQ(s.beyond_tolerance, 1u);
  EXPECT_EQ(s.most_first_limits, 1.3);
  EXPECT_EQ(s.most_first_seed, 2u);
  EXPECT_EQ(s.most_later_limits, 1.4);
  EXPECT_EQ(s.most_later_seed, 3u);
  // A run without such a window (-1) is not the fewest.
  EXPECT_EQ(s.fewest_later_limits, 0.7);
  EXPECT_EQ(s.fewest_later_seed, 3u);
  EXPECT_EQ(s.ideal_fewest_later_limits, 0.5);
  EXPECT_EQ(s.ideal_fewest_later_seed, 2u);
  EXPECT_EQ(s.fewest_vs_ideal, 0.6);  // seed 2 has none (-1)
  EXPECT_EQ(s.fewest_vs_ideal_seed, 1u);

  const SeedsSummary none = summarize({});
  EXPECT_EQ(none.runs, 0u);
  EXPECT_EQ(none.mean_vs_ideal, 0);
  const SeedsSummary no_window =
      summarize({{.seed = 4, .fewest_later_limits = -1, .ideal_fewest_later_limits = -1}});
  EXPECT_EQ(no_window.fewest_later_limits, -1);
  EXPECT_EQ(no_window.ideal_fewest_later_limits, -1);
  EXPECT_EQ(no_window.fewest_vs_ideal, -1);
  // One run has no spread to measure.
  EXPECT_EQ(no_window.sd_vs_ideal, 0);
  EXPECT_EQ(no_window.mean_standard_error, 0);
}

TEST(SeedsTest, TheTableAndTheJsonGiveEveryRunAndTheSummary) {
  SeedsReport report;
  report.scenario = "aligned";
  report.nodes = 200;
  report.runs = {{.seed = 3,
                  .digest = 0xabc,
                  .vs_ideal = -0.0243,
                  .first_limits = 1.05,
                  .most_later_limits = 1.2,
                  .fewest_later_limits = 0.86,
                  .ideal_fewest_later_limits = -1,
                  .fewest_vs_ideal = 0.83,
                  .fewest_vs_ideal_rate = 0.91}};
  report.summary = summarize(report.runs);
  std::ostringstream table;
  print_seeds(report, table);
  EXPECT_NE(table.str().find("aligned, 200 nodes: 1 run (windows"), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("-2.43%"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("0000000000000abc"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("1 of 1 beyond 1%"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("fewest in a later window    0.86 x the limit (seed 3)"),
            std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("the ideal's fewest later    - (no run had such a window)"),
            std::string::npos)
      << table.str();
  EXPECT_NE(
      table.str().find("fewest against the ideal    0.83 x the ideal's in that window (seed 3)"),
      std::string::npos)
      << table.str();
  std::ostringstream json;
  write_seeds_json(report, json);
  EXPECT_NE(json.str().find("\"admitted_vs_ideal\": -0.024300"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"ideal_fewest_later_window_limits\": null"), std::string::npos)
      << json.str();
  EXPECT_NE(
      table.str().find(
          "fewest vs the ideal's rate  0.91 x the ideal's window or rate, the lower (seed 3)"),
      std::string::npos)
      << table.str();
  EXPECT_NE(json.str().find("\"fewest_later_window_vs_ideal\": 0.83, "), std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find("\"fewest_later_window_vs_ideal_rate\": 0.91}"), std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find("\"beyond_tolerance\": 1"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"sd_admitted_vs_ideal\": 0.000000"), std::string::npos) << json.str();
  EXPECT_NE(table.str().find("standard deviation 0.00%"), std::string::npos) << table.str();
}

}  // namespace
}  // namespace rlimit::sim
