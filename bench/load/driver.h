// Runs one measurement: `clients` threads, each with its own Target, for a
// fixed duration, closed-loop synchronous (one request at a time) or
// pipelined (`depth` requests in flight), each request carrying `batch`
// checks on keys from a KeyPicker. Records every request's latency, from
// send to answer, in a Histogram, and reports progress once a second on long
// runs.
#pragma once

#include <cstdint>
#include <string>

#include "load/histogram.h"
#include "load/key_picker.h"
#include "load/target.h"

namespace rlimit::bench {

enum class Mode { kSync, kPipelined };

struct Workload {
  Mode mode = Mode::kSync;
  int clients = 1;
  int depth = 32;  // pipelined: requests in flight per client
  int batch = 1;   // checks per request
  std::uint64_t keys = 1000;
  Skew skew = Skew::kUniform;
  double zipf_s = 1.0;
  double seconds = 3;
  double rate = 0;  // sync: total checks per second to pace at; 0 as fast as possible
  std::uint64_t seed = 1;
  // Pin every client thread to this CPU (-1: wherever the scheduler puts
  // it). Round trips between processes cost several times more across
  // CPUs than on one on a VM whose idle vCPUs halt; see docs/performance.md.
  int client_cpu = -1;
  // The CPU the servers run on, -1 unpinned: the floor's echo child is
  // pinned there; rlimitd and Redis are pinned by whoever started them
  // (bench/compare). Reported with the results.
  int server_cpu = -1;
};

struct Result {
  std::string name;
  std::string error;  // set when the target could not run
  double seconds = 0;
  std::uint64_t requests = 0;
  std::uint64_t decisions = 0;
  Tally tally;
  Histogram latency;  // per request
  double decisions_per_second() const { return seconds > 0 ? decisions / seconds : 0; }
};

struct Progress {
  bool enabled = false;  // print a line a second on stderr
  std::string label;
};

Result run_workload(const std::string& name, const TargetFactory& make, const Workload& workload,
                    const Progress& progress);

}  // namespace rlimit::bench
