#include "core/duration.h"

#include <array>
#include <cstdint>
#include <limits>

#include "core/time.h"

namespace rlimit::core {
namespace {

struct Unit {
  std::string_view name;
  std::int64_t us;
};

// Longest names first so "ms" is not read as "m" + "s".
constexpr std::array<Unit, 6> kUnits = {{{"us", 1},
                                         {"ms", kUsPerMs},
                                         {"s", kUsPerSecond},
                                         {"m", 60 * kUsPerSecond},
                                         {"h", 3600 * kUsPerSecond},
                                         {"d", 86400 * kUsPerSecond}}};

// About 100 years: beyond this the bucket arithmetic would lose its headroom.
constexpr std::int64_t kMaxDurationUs = std::int64_t{100} * 366 * 86400 * kUsPerSecond;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

DurationParse parse_duration(std::string_view text) {
  DurationParse result;
  if (text.empty()) {
    result.error = "empty duration";
    return result;
  }
  std::int64_t total_us = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!is_digit(text[i])) {
      result.error = "expected a number at \"" + std::string(text.substr(i)) + "\"";
      return result;
    }
    std::int64_t number = 0;
    while (i < text.size() && is_digit(text[i])) {
      number = number * 10 + (text[i] - '0');
      if (number > kMaxDurationUs) {
        result.error = "duration too large";
        return result;
      }
      ++i;
    }
    std::size_t unit_end = i;
    while (unit_end < text.size() && !is_digit(text[unit_end])) ++unit_end;
    const std::string_view unit_text = text.substr(i, unit_end - i);
    if (unit_text.empty()) {
      result.error = "missing unit after " + std::to_string(number) + " (use us, ms, s, m, h or d)";
      return result;
    }
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_text) unit = &u;
    }
    if (unit == nullptr) {
      result.error = "unknown unit \"" + std::string(unit_text) + "\" (use us, ms, s, m, h or d)";
      return result;
    }
    if (number > (kMaxDurationUs - total_us) / unit->us) {
      result.error = "duration too large (at most 100 years)";
      return result;
    }
    total_us += number * unit->us;
    i = unit_end;
  }
  result.us = total_us;
  return result;
}

std::string format_duration(std::int64_t us) {
  if (us == 0) return "0s";
  std::string sign;
  if (us < 0) {
    sign = "-";
    us = -us;
  }
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (us % it->us == 0) return sign + std::to_string(us / it->us) + std::string(it->name);
  }
  return sign + std::to_string(us) + "us";
}

}  // namespace rlimit::core
