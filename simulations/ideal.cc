#include "ideal.h"

namespace rlimit::sim {
namespace {

core::LimiterOptions ideal_options() {
  core::LimiterOptions options;
  options.max_keys = std::size_t{1} << 40;  // never full: the ideal has unbounded memory
  return options;
}

constexpr TimeUs kSweepIntervalUs = 1'000'000;

}  // namespace

Ideal::Ideal(const core::RuleSet& rules) : limiter_(ideal_options(), rules) {}

bool Ideal::check(const core::CheckInput& input, TimeUs t) {
  const TimeUs now = kEpochUs + t;
  // Sweeping forgets only full buckets, which are the same as fresh ones; it
  // keeps memory in proportion to the keys in use, not to all keys ever seen.
  if (now >= next_sweep_us_) {
    limiter_.sweep(now, 100'000);
    next_sweep_us_ = now + kSweepIntervalUs;
  }
  limiter_.check(input, now, out_);
  return out_.allowed;
}

void Ideal::reset(const core::CheckInput& input, TimeUs t) {
  limiter_.reset(input, kEpochUs + t, out_);
}

void Ideal::release(std::string_view key, std::uint64_t lease, TimeUs t) {
  limiter_.release_lease(key, lease, /*extend=*/false, kEpochUs + t);
}

}  // namespace rlimit::sim
