#include "core/algorithms/throttle.h"

namespace rlimit::core::algorithms {

const char* throttle_mode_name(ThrottleMode mode) {
  switch (mode) {
    case ThrottleMode::kHard:
      return "hard";
    case ThrottleMode::kSoft:
      return "soft";
    case ThrottleMode::kShadow:
      return "shadow";
    case ThrottleMode::kElastic:
      return "elastic";
  }
  return "?";
}

const char* validate(const ThrottleParams& params) {
  switch (params.mode) {
    case ThrottleMode::kHard:
    case ThrottleMode::kShadow:
      return nullptr;
    case ThrottleMode::kSoft:
      if (params.soft_percent < 0 || params.soft_percent > 100) {
        return "soft percent must be between 0 and 100";
      }
      return nullptr;
    case ThrottleMode::kElastic:
      if (params.elastic_threshold_permille < 0) return "elastic threshold must not be negative";
      return nullptr;
  }
  return "unknown throttle mode";
}

ThrottleDecision apply_throttle(const Verdict& verdict, const ThrottleParams& params,
                                std::int64_t load_permille) {
  ThrottleDecision d;
  d.over_limit = !verdict.allowed;
  if (verdict.allowed) {
    d.allowed = true;
    d.charge = true;
    d.delay_us = params.mode == ThrottleMode::kShadow ? 0 : verdict.delay_us;
    return d;
  }
  switch (params.mode) {
    case ThrottleMode::kHard:
      break;
    case ThrottleMode::kSoft: {
      // limit <= 2^50 and percent <= 100: no overflow.
      const std::int64_t allowance = verdict.limit * params.soft_percent / 100;
      d.allowed = verdict.excess <= allowance;
      d.charge = d.allowed;
      if (d.allowed) d.delay_us = verdict.delay_us;  // a shaper still spaces it out
      break;
    }
    case ThrottleMode::kShadow:
      d.allowed = true;
      break;
    case ThrottleMode::kElastic:
      d.allowed = load_permille < params.elastic_threshold_permille;
      break;
  }
  return d;
}

}  // namespace rlimit::core::algorithms
