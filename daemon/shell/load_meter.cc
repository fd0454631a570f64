#include "shell/load_meter.h"

#include <time.h>

#include <algorithm>

namespace rlimit::shell {

std::int64_t LoadMeter::sample(core::TimeUs wall_us, core::TimeUs cpu_us) {
  if (!started_ || wall_us < last_wall_us_ || cpu_us < last_cpu_us_) {
    started_ = true;
    last_wall_us_ = wall_us;
    last_cpu_us_ = cpu_us;
    return permille_;
  }
  const core::TimeUs wall = wall_us - last_wall_us_;
  if (wall < kMinSampleWallUs) return permille_;
  const core::TimeUs cpu = cpu_us - last_cpu_us_;
  last_wall_us_ = wall_us;
  last_cpu_us_ = cpu_us;
  // cpu * 1000 overflows only after ~290 years of CPU time in one interval.
  const std::int64_t now = std::min(cpu * 1000 / wall, kMaxPermille);
  permille_ = has_load_ ? permille_ + (now - permille_) / kSmoothing : now;
  has_load_ = true;
  return permille_;
}

core::TimeUs process_cpu_us() {
  timespec ts{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<core::TimeUs>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace rlimit::shell
