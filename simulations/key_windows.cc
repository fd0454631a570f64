#include "key_windows.h"

#include <algorithm>
#include <cassert>

namespace rlimit::sim {

KeyWindows::KeyWindows(std::size_t units, std::uint32_t window_bins)
    : window_bins_(std::max<std::uint32_t>(1, window_bins)),
      first_bin_(units, 0),
      last_bin_(units, -1),
      admitted_ring_(units * window_bins_, 0),
      ideal_ring_(units * window_bins_, 0),
      admitted_sum_(units, 0),
      ideal_sum_(units, 0),
      ceiling_(units, 0) {}

void KeyWindows::set_ceiling(std::size_t unit, double ceiling_tokens) {
  ceiling_[unit] = ceiling_tokens;
}

// The window of bins (last_bin - window_bins, last_bin] is complete: rate it.
void KeyWindows::close_window(std::size_t unit, std::int64_t last_bin) {
  const std::int64_t admitted = admitted_sum_[unit];
  const std::int64_t over = admitted - ideal_sum_[unit];
  const double ceiling = ceiling_[unit];
  const std::int64_t first_bin = last_bin - static_cast<std::int64_t>(window_bins_) + 1;
  auto record = [&](Worst& w, double value) {
    w = Worst{value, admitted, ideal_sum_[unit], ceiling, unit, first_bin};
  };
  const int cold = first_bin < first_bin_[unit] + static_cast<std::int64_t>(window_bins_) ? 1 : 0;
  if (ceiling > 0) {
    const double ratio = static_cast<double>(admitted) / ceiling;
    if (ratio > worst_ratio_[cold].value) record(worst_ratio_[cold], ratio);
  }
  if (over > static_cast<std::int64_t>(worst_over_[cold].value)) {
    record(worst_over_[cold], static_cast<double>(over));
  }
}

// Closes the windows ending at every bin from the unit's last one up to
// `bin` (exclusive) and makes `bin` the current one: bins leave the rings as
// the window slides past them. In bins where the unit had nothing the
// admitted sum only falls, but the excess over the ideal may grow.
void KeyWindows::advance(std::size_t unit, std::int64_t bin) {
  std::int64_t& last = last_bin_[unit];
  assert(bin >= last);
  if (bin == last) return;
  if (last < 0) first_bin_[unit] = bin;
  if (last >= 0) {
    const std::size_t base = unit * window_bins_;
    const std::int64_t steps = std::min<std::int64_t>(bin - last, window_bins_);
    for (std::int64_t s = 0; s < steps; ++s) {
      close_window(unit, last + s);
      const std::size_t slot = base + static_cast<std::size_t>((last + s + 1) % window_bins_);
      admitted_sum_[unit] -= admitted_ring_[slot];
      ideal_sum_[unit] -= ideal_ring_[slot];
      admitted_ring_[slot] = 0;
      ideal_ring_[slot] = 0;
    }
  }
  last = bin;
}

void KeyWindows::add(std::size_t unit, std::int64_t bin, std::uint32_t admitted,
                     std::uint32_t ideal) {
  advance(unit, bin);
  const std::size_t slot = unit * window_bins_ + static_cast<std::size_t>(bin % window_bins_);
  admitted_ring_[slot] += admitted;
  ideal_ring_[slot] += ideal;
  admitted_sum_[unit] += admitted;
  ideal_sum_[unit] += ideal;
}

void KeyWindows::finish() {
  for (std::size_t unit = 0; unit < last_bin_.size(); ++unit) {
    if (last_bin_[unit] >= 0) advance(unit, last_bin_[unit] + window_bins_);
  }
}

}  // namespace rlimit::sim
