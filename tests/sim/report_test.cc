#include "report.h"

#include <gtest/gtest.h>

namespace rlimit::sim {
namespace {

TEST(ReportTest, PercentKeepsTwoDecimalsAndTheSign) {
  EXPECT_EQ(percent(-0.0003), "-0.03%");
  EXPECT_EQ(percent(0.0012), "+0.12%");
  EXPECT_EQ(percent(0.0), "+0.00%");
  EXPECT_EQ(percent(-0.00004), "+0.00%");  // rounds to zero: no minus sign
  EXPECT_EQ(percent(-0.00006), "-0.01%");
}

}  // namespace
}  // namespace rlimit::sim
