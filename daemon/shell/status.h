// Builds the answer to a status request: who this node is, its rules, and
// every counter (the core's LimiterStats and the shell's ShellCounters). Pure:
// the caller passes `now`. No Asio; not thread-safe (reads live state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/limiter.h"
#include "core/time.h"
#include "shell/counters.h"

namespace rlimit::v1 {
class StatusResponse;
}

namespace rlimit::shell {

// What status reports besides the limiter's own state. Owned by the server;
// config_source changes on reload.
struct StatusContext {
  std::string node_id;
  std::string config_source;  // file name, or "<built-in>"
  core::TimeUs started_us = 0;
};

// Calls f(name, value) for every field of LimiterStats, in declaration order.
template <typename F>
void for_each_stat(const core::LimiterStats& s, F&& f) {
  // A new LimiterStats field must be listed here, or status would hide it.
  static_assert(sizeof(core::LimiterStats) == 10 * sizeof(std::uint64_t),
                "list every LimiterStats field in for_each_stat");
  f(std::string_view("checks"), s.checks);
  f(std::string_view("allowed"), s.allowed);
  f(std::string_view("denied"), s.denied);
  f(std::string_view("exempt"), s.exempt);
  f(std::string_view("unmatched"), s.unmatched);
  f(std::string_view("invalid"), s.invalid);
  f(std::string_view("key_table_full"), s.key_table_full);
  f(std::string_view("keys_created"), s.keys_created);
  f(std::string_view("keys_evicted"), s.keys_evicted);
  f(std::string_view("clock_went_back"), s.clock_went_back);
}

// Fills `out` (cleared first).
void fill_status(const StatusContext& context, const core::Limiter& limiter,
                 const ShellCounters& counters, core::TimeUs now, v1::StatusResponse& out);

}  // namespace rlimit::shell
