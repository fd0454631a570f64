// The daemon's own load, for elastic rules (core::CheckInput::load_permille):
// the CPU time this process used over the wall time that passed, in permille
// of one core (1000 = one core busy), smoothed over a few samples. The server
// samples it on its sweep timer. The arithmetic is pure (times are
// arguments); process_cpu_us() is the one reading of the outside.
#pragma once

#include <cstdint>

#include "core/time.h"

namespace rlimit::shell {

class LoadMeter {
 public:
  // Samples closer together than this are ignored (too noisy to mean much).
  static constexpr core::TimeUs kMinSampleWallUs = 1000;
  // The load reported is capped here (1000 cores), so a clock glitch cannot
  // produce an absurd value.
  static constexpr std::int64_t kMaxPermille = 1'000'000;
  // Each sample moves the smoothed load 1/kSmoothing of the way.
  static constexpr std::int64_t kSmoothing = 4;

  // Feeds the wall clock and the process's CPU time, both in microseconds,
  // and returns the load. The first sample only sets the starting point; a
  // clock that went back restarts from there.
  std::int64_t sample(core::TimeUs wall_us, core::TimeUs cpu_us);
  std::int64_t permille() const { return permille_; }

 private:
  bool started_ = false;
  bool has_load_ = false;
  core::TimeUs last_wall_us_ = 0;
  core::TimeUs last_cpu_us_ = 0;
  std::int64_t permille_ = 0;
};

// CPU time used by this process so far (user + system, all threads), in
// microseconds; 0 if the clock cannot be read.
core::TimeUs process_cpu_us();

}  // namespace rlimit::shell
