// Shared helpers for the algorithm tests: readable verdicts in failures.
#pragma once

#include <ostream>
#include <string>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

inline std::string describe(const Verdict& v) {
  return "{allowed=" + std::to_string(v.allowed) + " limit=" + std::to_string(v.limit) +
         " remaining=" + std::to_string(v.remaining) +
         " retry=" + std::to_string(v.retry_after_us) +
         " reset=" + std::to_string(v.reset_after_us) + " delay=" + std::to_string(v.delay_us) +
         " excess=" + std::to_string(v.excess) + "}";
}

inline void PrintTo(const Verdict& v, std::ostream* os) { *os << describe(v); }

}  // namespace rlimit::core::algorithms
