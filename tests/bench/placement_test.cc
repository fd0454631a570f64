// CPU placement in the load generator: the floor's echo server and the client
// threads are pinned where asked, and a placement that cannot be had is an
// error, not a silently unpinned measurement.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdint>
#include <vector>

#include "load/driver.h"
#include "load/floor_target.h"

namespace rlimit::bench {
namespace {

// Beyond any machine this runs on, and inside sched_setaffinity's mask.
constexpr int kNoSuchCpu = 1000;

// The first CPU this test may run on (CI may confine it to a subset).
int first_allowed_cpu() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &cpus)) return c;
  }
  return 0;
}

TEST(PlacementTest, PinnedFloorAnswers) {
  auto floor = make_floor_target(kFloorRequestBytes, kFloorReplyBytes, first_allowed_cpu());
  ASSERT_EQ(floor->open(), "");
  const std::vector<std::uint64_t> keys = {1, 2, 3};
  const Tally t = floor->call(keys);
  EXPECT_EQ(t.allowed, 3u);
  EXPECT_EQ(t.failed, 0u);
}

TEST(PlacementTest, FloorOnAMissingCpuIsAnError) {
  auto floor = make_floor_target(kFloorRequestBytes, kFloorReplyBytes, kNoSuchCpu);
  EXPECT_EQ(floor->open(), "cannot pin the floor's echo server to CPU 1000");
}

Workload short_sync() {
  Workload w;
  w.mode = Mode::kSync;
  w.clients = 1;
  w.keys = 10;
  w.seconds = 0.05;
  return w;
}

TEST(PlacementTest, PinnedClientMeasures) {
  Workload w = short_sync();
  w.client_cpu = first_allowed_cpu();
  w.server_cpu = w.client_cpu;
  const Result r = run_workload(
      "floor",
      [&](int) { return make_floor_target(kFloorRequestBytes, kFloorReplyBytes, w.server_cpu); },
      w, {});
  EXPECT_EQ(r.error, "");
  EXPECT_GT(r.requests, 0u);
  EXPECT_EQ(r.tally.failed, 0u);
}

TEST(PlacementTest, ClientOnAMissingCpuIsAnError) {
  Workload w = short_sync();
  w.client_cpu = kNoSuchCpu;
  const Result r = run_workload("floor", [](int) { return make_floor_target(); }, w, {});
  EXPECT_NE(r.error.find("cannot pin a client to CPU 1000"), std::string::npos) << r.error;
  EXPECT_EQ(r.requests, 0u);
}

}  // namespace
}  // namespace rlimit::bench
