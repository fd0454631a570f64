#include "key_windows.h"

#include <gtest/gtest.h>

namespace rlimit::sim {
namespace {

TEST(KeyWindowsTest, RatesTheBusiestWindowAgainstTheCeiling) {
  KeyWindows w(1, 10);
  w.set_ceiling(0, 30);                                     // burst 20 + 10/s x 1 s
  for (int bin = 0; bin < 100; ++bin) w.add(0, bin, 1, 1);  // 10 per window
  w.add(0, 100, 25, 0);                                     // the window ending here: 9 + 25
  w.finish();
  EXPECT_DOUBLE_EQ(w.worst_ratio().value, 34.0 / 30.0);
  EXPECT_EQ(w.worst_ratio().admitted, 34);
  EXPECT_EQ(w.worst_ratio().first_bin, 91);
  EXPECT_EQ(w.worst_over().value, 25);
  EXPECT_EQ(w.worst_over().ideal, 9);
}

TEST(KeyWindowsTest, AWindowSpansExactlyItsBins) {
  KeyWindows apart(1, 10);
  apart.set_ceiling(0, 10);
  apart.add(0, 0, 10, 10);
  apart.add(0, 10, 10, 10);  // bin 0 has left
  apart.finish();
  EXPECT_DOUBLE_EQ(apart.worst_ratio().value, 1.0);  // the window from bin 10: later
  EXPECT_DOUBLE_EQ(apart.worst_ratio(true).value, 1.0);

  KeyWindows together(1, 10);
  together.set_ceiling(0, 10);
  together.add(0, 0, 10, 10);
  together.add(0, 9, 10, 10);
  together.finish();
  EXPECT_DOUBLE_EQ(together.worst_ratio(true).value, 2.0);  // from bin 0: the cold start
  EXPECT_EQ(together.worst_ratio(true).first_bin, 0);
  EXPECT_DOUBLE_EQ(together.worst_ratio().value, 0.0);  // each window holding bin 9 is cold
  EXPECT_EQ(together.worst_over(true).value, 0);        // the ideal admitted as much
}

TEST(KeyWindowsTest, FindsTheExcessOnceTheIdealsAdmissionsLeaveTheWindow) {
  // The ideal admits early, the cluster late: in the window that has let go
  // of the ideal's bin and not yet of the cluster's, the cluster is over.
  KeyWindows w(1, 10);
  w.set_ceiling(0, 10);
  w.add(0, 0, 0, 10);
  w.add(0, 5, 10, 0);
  w.finish();  // no later add: finish() slides the window on
  EXPECT_EQ(w.worst_over(true).value, 10);
  EXPECT_EQ(w.worst_over(true).first_bin, 1);
  EXPECT_DOUBLE_EQ(w.worst_ratio(true).value, 1.0);
  EXPECT_EQ(w.worst_over().value, 0);  // every window holding bin 5 starts in the cold start
}

TEST(KeyWindowsTest, RatesEachUnitsColdStartApartFromItsLaterWindows) {
  KeyWindows w(2, 10);
  w.set_ceiling(0, 30);
  w.set_ceiling(1, 30);
  w.add(1, 0, 10, 10);   // unit 1 starts early and stays within its ceiling
  w.add(0, 50, 60, 30);  // unit 0 starts at bin 50 with twice its ceiling
  for (int bin = 51; bin < 80; ++bin) w.add(0, bin, 3, 3);
  w.add(1, 60, 45, 30);  // unit 1, long after its start: over
  w.finish();
  EXPECT_DOUBLE_EQ(w.worst_ratio(true).value, 87.0 / 30.0);  // bins 50-59
  EXPECT_EQ(w.worst_ratio(true).unit, 0u);
  EXPECT_EQ(w.worst_over(true).value, 30);
  EXPECT_DOUBLE_EQ(w.worst_ratio().value, 1.5);  // unit 1's bin 60
  EXPECT_EQ(w.worst_ratio().unit, 1u);
  EXPECT_EQ(w.worst_ratio().first_bin, 51);
  EXPECT_EQ(w.worst_over().value, 15);
}

TEST(KeyWindowsTest, KeepsUnitsApartAndSkipsUnitsWithoutACeiling) {
  KeyWindows w(3, 5);
  w.set_ceiling(0, 10);
  w.set_ceiling(1, 10);
  w.add(0, 3, 8, 8);
  w.add(1, 3, 12, 10);
  w.add(2, 3, 1000, 0);  // no ceiling: counted in the excess only
  w.add(0, 4, 8, 8);     // unit 0: 16 in one window
  w.finish();
  EXPECT_DOUBLE_EQ(w.worst_ratio(true).value, 1.6);
  EXPECT_EQ(w.worst_ratio(true).unit, 0u);
  EXPECT_EQ(w.worst_over(true).value, 1000);
  EXPECT_EQ(w.worst_over(true).unit, 2u);
}

}  // namespace
}  // namespace rlimit::sim
