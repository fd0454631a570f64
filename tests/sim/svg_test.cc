#include "svg.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// The plot's subtitle gives the run against the ideal as the table does:
// a run 0.03% under it read "-0.0%" before.
TEST(SvgTest, SubtitleGivesTheRunAgainstTheIdealAsTheTableDoes) {
  Results r = run(shipped("steady", {"duration=\"3s\"", "traffic.0.start=\"1s\""}), 1);
  r.ideal = 10'000;
  r.admitted = 9'997;
  std::ostringstream svg;
  write_svg(r, PlotOptions{}, svg);
  EXPECT_NE(svg.str().find("admitted -0.03% vs ideal;"), std::string::npos) << svg.str();
}

}  // namespace
}  // namespace rlimit::sim
