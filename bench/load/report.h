// How rlimit-bench prints what it measured: a table with the ratios that
// matter (rlimitd against the raw socket floor and against Redis), or JSON.
#pragma once

#include <string>
#include <vector>

#include "load/driver.h"

namespace rlimit::bench {

// The machine a figure was measured on.
struct Machine {
  unsigned cpus = 0;
  std::string cpu_model;
  std::string kernel;
  double load_1m = 0;  // load average when the run began
};
Machine describe_machine();

// Which row is which, for the ratios.
struct Rows {
  const Result* floor = nullptr;
  const Result* rlimitd = nullptr;
  const Result* redis_lua = nullptr;
  const Result* redis_incr_expire = nullptr;
  const Result* redis_incr = nullptr;
};

// Daemon memory measured around filling its key table (--fill --daemon-pid).
struct Memory {
  bool measured = false;
  std::uint64_t keys = 0;
  std::uint64_t keys_held = 0;  // the daemon's own count (status), 0 if unknown
  long rss_before_kib = 0;
  long rss_after_kib = 0;
  double bytes_per_key() const {
    return keys == 0 ? 0 : (rss_after_kib - rss_before_kib) * 1024.0 / static_cast<double>(keys);
  }
};

void print_table(const Workload& w, const std::vector<Result>& results, const Rows& rows,
                 const Memory& memory);
void print_json(const Machine& machine, const Workload& w, const std::vector<Result>& results,
                const Rows& rows, const Memory& memory);

const char* mode_name(Mode mode);

}  // namespace rlimit::bench
