// Throttle modes: what a rule does with its algorithm's verdict. A small
// wrapper over any algorithm, applied per rule before the all-or-nothing
// decision (algorithm.h):
//
// - hard: the verdict stands.
// - soft: also admits while the overshoot (Verdict::excess) stays within
//   soft_percent of the limit. The overshoot is charged like any consumption,
//   so it is debt each algorithm repays (a token bucket refills, a window
//   carries it): soft mode widens the burst by that percentage, it does not
//   raise the long-run rate. To raise the rate, raise the limit.
// - shadow: always admits and never delays; charges only what the verdict
//   admitted, so the state evolves exactly as if the rule were enforced and
//   `over_limit` says which requests enforcement would refuse (count and log
//   them to roll a rule out safely).
// - elastic: admits beyond the limit while the load signal passed in (e.g. the
//   daemon's measured load, in permille of capacity) is below the threshold.
//   What it admits beyond the limit is not charged: spare capacity is free,
//   and once load rises the rule is back to its hard limit with no debt. Local
//   by nature; its charged consumption replicates as usual.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

enum class ThrottleMode : std::uint8_t { kHard, kSoft, kShadow, kElastic };
const char* throttle_mode_name(ThrottleMode mode);

struct ThrottleParams {
  ThrottleMode mode = ThrottleMode::kHard;
  std::int64_t soft_percent = 0;                // soft: in [0, 100]
  std::int64_t elastic_threshold_permille = 0;  // elastic: admit extra while load < this

  friend bool operator==(const ThrottleParams&, const ThrottleParams&) = default;
};

const char* validate(const ThrottleParams& params);

struct ThrottleDecision {
  bool allowed = false;     // the answer for this rule
  bool charge = false;      // commit this rule's cost if the check is admitted
  bool over_limit = false;  // the algorithm itself refused (count it)
  std::int64_t delay_us = 0;

  friend bool operator==(const ThrottleDecision&, const ThrottleDecision&) = default;
};

// `load_permille` is only read in elastic mode.
ThrottleDecision apply_throttle(const Verdict& verdict, const ThrottleParams& params,
                                std::int64_t load_permille);

}  // namespace rlimit::core::algorithms
