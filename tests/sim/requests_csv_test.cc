// rlimit-sim --requests: every request's decision as a CSV row, the same
// run as without it.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

TEST(RequestsCsvTest, OneRowPerRequestSummingToTheRunsFiguresWithoutChangingTheRun) {
  // Past node 2's crash at 10 s: its clients' requests fail open, and are
  // rows too.
  const Scenario scenario = shipped("crash", {R"(duration="12s")"});
  Results plain;
  Results written;
  std::string error;
  ASSERT_TRUE(run_simulation(scenario, 3, RunOptions{}, plain, error)) << error;
  std::ostringstream csv;
  RunOptions options;
  options.requests = &csv;
  ASSERT_TRUE(run_simulation(scenario, 3, options, written, error)) << error;
  EXPECT_EQ(written.digest, plain.digest);

  std::istringstream rows(csv.str());
  std::string row;
  ASSERT_TRUE(std::getline(rows, row));
  EXPECT_EQ(row, kRequestsHeader);
  std::uint64_t count = 0, admitted = 0, ideal = 0;
  std::int64_t last_t_us = 0;
  while (std::getline(rows, row)) {
    std::istringstream fields(row);
    std::int64_t t_us = 0;
    std::uint64_t node = 0, stream = 0, key = 0, cost = 0, allowed = 0, ideal_allowed = 0;
    char comma[6] = {};
    fields >> t_us >> comma[0] >> node >> comma[1] >> stream >> comma[2] >> key >> comma[3] >>
        cost >> comma[4] >> allowed >> comma[5] >> ideal_allowed;
    ASSERT_TRUE(fields && std::string_view(comma, 6) == ",,,,,,") << row;
    EXPECT_TRUE(fields.peek() == std::char_traits<char>::eof()) << row;
    EXPECT_GE(t_us, last_t_us) << row;  // in the order of virtual time
    EXPECT_LT(node, scenario.cluster.nodes) << row;
    EXPECT_LT(stream, scenario.traffic.size()) << row;
    EXPECT_LE(allowed, 1u);
    EXPECT_LE(ideal_allowed, 1u);
    last_t_us = t_us;
    ++count;
    admitted += allowed * cost;
    ideal += ideal_allowed * cost;
  }
  EXPECT_GT(written.requests, 0u);
  EXPECT_EQ(count, written.requests);
  EXPECT_EQ(admitted, written.admitted);
  EXPECT_EQ(ideal, written.ideal);
  EXPECT_GT(written.fail_open, 0u);
}

}  // namespace
}  // namespace rlimit::sim
