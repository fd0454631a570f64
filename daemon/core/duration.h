// Parses human durations such as "1s", "30s", "5m", "1h", "1d", "250ms",
// "1h30m" into microseconds. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlimit::core {

struct DurationParse {
  std::optional<std::int64_t> us;  // set on success
  std::string error;               // why not, on failure
};

// Accepts one or more <integer><unit> parts, unit one of us, ms, s, m, h, d.
// Rejects empty input, missing units, unknown units, and totals above ~100
// years (they would overflow the bucket arithmetic).
DurationParse parse_duration(std::string_view text);

// The shortest exact rendering: 1500000 -> "1500ms", 3600000000 -> "1h".
std::string format_duration(std::int64_t us);

}  // namespace rlimit::core
