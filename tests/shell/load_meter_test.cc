// The load meter's arithmetic with made-up clocks, and the real CPU clock.
#include "shell/load_meter.h"

#include <gtest/gtest.h>

namespace rlimit::shell {
namespace {

TEST(LoadMeterTest, FirstSampleOnlySetsTheStart) {
  LoadMeter meter;
  EXPECT_EQ(meter.sample(1'000'000, 5'000'000), 0);
  EXPECT_EQ(meter.permille(), 0);
}

TEST(LoadMeterTest, CpuOverWallInPermilleOfOneCore) {
  LoadMeter meter;
  meter.sample(0, 0);
  EXPECT_EQ(meter.sample(100'000, 50'000), 500);  // half a core
  LoadMeter busy;
  busy.sample(0, 0);
  EXPECT_EQ(busy.sample(100'000, 200'000), 2000);  // two cores
}

TEST(LoadMeterTest, LaterSamplesAreSmoothed) {
  LoadMeter meter;
  meter.sample(0, 0);
  EXPECT_EQ(meter.sample(100'000, 100'000), 1000);
  // Idle now: the load falls a quarter of the way per sample.
  EXPECT_EQ(meter.sample(200'000, 100'000), 750);
  std::int64_t previous = 750;
  for (int i = 3; i < 100; ++i) {
    const std::int64_t load = meter.sample(i * 100'000, 100'000);
    EXPECT_LE(load, previous);
    previous = load;
  }
  EXPECT_LT(previous, 10);
}

TEST(LoadMeterTest, SamplesTooCloseAreIgnoredAndClocksGoingBackRestart) {
  LoadMeter meter;
  meter.sample(0, 0);
  EXPECT_EQ(meter.sample(LoadMeter::kMinSampleWallUs - 1, 1'000'000), 0);  // ignored
  EXPECT_EQ(meter.sample(100'000, 50'000), 500);
  // The wall clock went back: a new start, the load kept.
  EXPECT_EQ(meter.sample(50'000, 60'000), 500);
  EXPECT_EQ(meter.sample(150'000, 60'000), 500 - 500 / LoadMeter::kSmoothing);
}

TEST(LoadMeterTest, CappedAtTheMaximum) {
  LoadMeter meter;
  meter.sample(0, 0);
  EXPECT_EQ(meter.sample(1000, 1'000'000'000), LoadMeter::kMaxPermille);
}

TEST(LoadMeterTest, ProcessCpuClockAdvancesWithWork) {
  const core::TimeUs before = process_cpu_us();
  volatile std::uint64_t sink = 0;
  // Bounded busy work: until the CPU clock moves, at most ~a few seconds.
  for (std::uint64_t i = 0; i < 4'000'000'000ull && process_cpu_us() < before + 2000; ++i) {
    sink = sink + i;
  }
  EXPECT_GE(process_cpu_us(), before + 2000);
}

}  // namespace
}  // namespace rlimit::shell
