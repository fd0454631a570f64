// Per-key sliding windows: for every key (a "unit": one key of a stream whose
// limit is per key, or the whole stream when its keys share one limit), the
// most the cluster admitted in any window of `window_bins` consecutive time
// bins, as a multiple of the most one perfect bucket can admit in a window
// (its ceiling: burst + rate x window), and the most it admitted beyond the
// perfect limiter in one window. Windows slide by one bin, as the report's
// cluster-wide windows do (docs/accuracy.md, "Reading the report"), and a
// window that starts less than a window after the unit's first admission is
// its cold start, rated apart from the later ones.
//
// Memory: two rings of window_bins counters per unit (8 MB for 100,000 keys
// and 10 bins). Work per add: O(min(bins since the unit's last add,
// window_bins)). Owns its state; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rlimit::sim {

class KeyWindows {
 public:
  struct Worst {
    double value = 0;           // the ratio, or the tokens over the ideal
    std::int64_t admitted = 0;  // tokens the unit admitted in that window
    std::int64_t ideal = 0;     // ... and the perfect limiter
    double ceiling = 0;         // the unit's ceiling per window, tokens
    std::size_t unit = 0;
    std::int64_t first_bin = -1;  // the window's first bin; -1: nothing admitted yet
  };

  // `units` units, windows of `window_bins` >= 1 bins, every ceiling 0 until set.
  KeyWindows(std::size_t units, std::uint32_t window_bins);

  // The most a perfect bucket admits in one window, tokens (> 0 to be rated).
  void set_ceiling(std::size_t unit, double ceiling_tokens);
  // Tokens the cluster and the perfect limiter admitted for `unit` in `bin`.
  // Bins of one unit never go back.
  void add(std::size_t unit, std::int64_t bin, std::uint32_t admitted, std::uint32_t ideal);
  // Closes every unit's remaining windows; call once at the end, before reading.
  void finish();

  // Largest admitted / ceiling over units with a ceiling and their later
  // windows (cold: their cold-start windows).
  const Worst& worst_ratio(bool cold = false) const { return worst_ratio_[cold ? 1 : 0]; }
  // Largest admitted - ideal over units and windows (tokens).
  const Worst& worst_over(bool cold = false) const { return worst_over_[cold ? 1 : 0]; }

 private:
  void close_window(std::size_t unit, std::int64_t last_bin);
  void advance(std::size_t unit, std::int64_t bin);

  std::uint32_t window_bins_;
  std::vector<std::int64_t> first_bin_;       // per unit: its first add's bin
  std::vector<std::int64_t> last_bin_;        // per unit; -1 before its first add
  std::vector<std::uint32_t> admitted_ring_;  // [unit * window_bins + bin % window_bins]
  std::vector<std::uint32_t> ideal_ring_;
  std::vector<std::int64_t> admitted_sum_;  // per unit, over its ring
  std::vector<std::int64_t> ideal_sum_;
  std::vector<double> ceiling_;
  Worst worst_ratio_[2];  // [later, cold start]
  Worst worst_over_[2];
};

}  // namespace rlimit::sim
