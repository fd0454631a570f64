#include "network.h"

#include <gtest/gtest.h>

namespace rlimit::sim {
namespace {

TEST(NetworkTest, DropsWhatExceedsThePathMtu) {
  NetworkParams p;
  p.mtu_bytes = 600;
  Network net(p, {}, 2, 1);
  TimeUs at[2];
  EXPECT_EQ(net.route(0, 1, 600 - kEnvelopeBytes, 0, at), 1);
  EXPECT_EQ(net.route(0, 1, 600 - kEnvelopeBytes + 1, 0, at), 0);
  EXPECT_EQ(net.stats().mtu_dropped, 1u);
}

TEST(NetworkTest, PartitionsCutBetweenGroupsOnlyWhileInForce) {
  Partition p{10, 20, {{0, 1}, {2}}, false};
  Network net(NetworkParams{}, {p}, 4, 1);
  EXPECT_FALSE(net.blocked(0, 2, 9));
  EXPECT_TRUE(net.blocked(0, 2, 10));
  EXPECT_TRUE(net.blocked(2, 0, 15));
  EXPECT_FALSE(net.blocked(0, 1, 15));
  EXPECT_TRUE(net.blocked(0, 3, 15));  // node 3 is in no group: a group of its own
  EXPECT_FALSE(net.blocked(0, 2, 20));
}

TEST(NetworkTest, OneWayPartitionCutsOneDirection) {
  Partition p{0, 100, {{0}, {1}}, true};
  Network net(NetworkParams{}, {p}, 2, 1);
  EXPECT_TRUE(net.blocked(0, 1, 50));
  EXPECT_FALSE(net.blocked(1, 0, 50));
}

TEST(NetworkTest, LossDuplicationAndDelayFollowTheirParameters) {
  NetworkParams p;
  p.loss = 0.1;
  p.duplicate = 0.2;
  p.delay_us = 1000;
  p.jitter_us = 500;
  Network net(p, {}, 2, 42);
  int copies = 0;
  for (int i = 0; i < 100'000; ++i) {
    TimeUs at[2];
    const int n = net.route(0, 1, 100, 0, at);
    for (int c = 0; c < n; ++c) {
      ASSERT_GE(at[c], 1000);
      ASSERT_LE(at[c], 1500);
    }
    copies += n;
  }
  EXPECT_NEAR(static_cast<double>(net.stats().lost) / 100'000, 0.1, 0.01);
  EXPECT_NEAR(static_cast<double>(net.stats().duplicated) / 90'000, 0.2, 0.01);
  EXPECT_EQ(copies, static_cast<int>(100'000 - net.stats().lost + net.stats().duplicated));
}

}  // namespace
}  // namespace rlimit::sim
