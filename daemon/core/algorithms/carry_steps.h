// A carry kept beside a window's count in 12 signed bits (the sliding
// window's overshoot or credit, the fixed window's credit), so that the
// state stays small: exact for limits up to kCarrySteps, else in steps of
// limit / kCarrySteps, rounded as the caller says (an amount owed rounded up
// when stored, and down when carried; an amount given back rounded down).
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms::detail {

// Steps of a stored carry: -kCarrySteps..kCarrySteps (12 signed bits).
inline constexpr std::int64_t kCarrySteps = 2047;

enum class Round { kUp, kDown };

// The units `steps` stand for (rounded towards 0).
inline std::int64_t carry_units(std::int64_t steps, std::int64_t limit) {
  if (steps < 0) return -carry_units(-steps, limit);
  if (steps == 0 || limit <= kCarrySteps) return steps;
  return static_cast<std::int64_t>(static_cast<i128>(steps) * limit / kCarrySteps);
}

// The steps that store `units` (0 <= units <= limit).
inline std::int64_t carry_steps_of(std::int64_t units, std::int64_t limit, Round round) {
  if (limit <= kCarrySteps) return units;
  const i128 scaled = static_cast<i128>(units) * kCarrySteps;
  return static_cast<std::int64_t>(round == Round::kUp ? ceil_div(scaled, limit)
                                                       : scaled / limit);
}

// A credit of `credit_steps` (>= 0) after `amount` units counted since took
// that much of its room: the steps left (rounded down), 0 once used up.
inline std::int64_t credit_steps_left(std::int64_t credit_steps, std::int64_t limit,
                                      std::int64_t amount) {
  const std::int64_t credit = carry_units(credit_steps, limit) - amount;
  return credit > 0 ? carry_steps_of(credit, limit, Round::kDown) : 0;
}

}  // namespace rlimit::core::algorithms::detail
