// The plot of a run, as a hand-written SVG: admitted rate (all nodes, and
// some nodes alone) against the limit and the perfect limiter's rate over
// time, with partitions and crashes shaded, axes with units and a legend.
#pragma once

#include <ostream>

#include "results.h"

namespace rlimit::sim {

struct PlotOptions {
  TimeUs smooth_us = 500'000;   // moving average over this span
  std::uint32_t max_nodes = 6;  // per-node lines drawn
};

void write_svg(const Results& r, const PlotOptions& options, std::ostream& out);

}  // namespace rlimit::sim
