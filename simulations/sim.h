// rlimit-sim's engine: N nodes of the real core (a core::Limiter and a
// core::ClusterNode each, exactly as rlimitd runs them) in one process, on
// virtual time, over the simulated network, fed by the workload, and watched
// by the perfect limiter. One seed gives one run, bit for bit: every random
// choice (network, workload, each node's core) comes from generators derived
// from it, and events at the same instant run in the order they were made.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "results.h"
#include "scenario.h"

namespace rlimit::sim {

struct RunOptions {
  bool keep_series = true;  // the swarm needs only the figures
  // Where set, the run writes kRequestsHeader and then every request's
  // decision as a CSV row: virtual time in microseconds since the run's
  // start, the node, the stream, the key index, the cost, whether the
  // cluster admitted it and whether the ideal did. Not owned; written from
  // the run's thread only.
  std::ostream* requests = nullptr;
};

// The columns of RunOptions::requests (no line end).
inline constexpr const char* kRequestsHeader = "t_us,node,stream,key,cost,admitted,ideal";

// Runs `scenario` with `seed`. On a scenario whose traffic cannot be derived
// (see Workload) returns false and sets `error`.
bool run_simulation(const Scenario& scenario, std::uint64_t seed, const RunOptions& options,
                    Results& results, std::string& error);

}  // namespace rlimit::sim
