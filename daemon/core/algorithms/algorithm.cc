#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

const char* replication_name(Replication replication) {
  switch (replication) {
    case Replication::kExact:
      return "exact";
    case Replication::kApproximate:
      return "approximate";
    case Replication::kLocalOnly:
      return "local-only";
  }
  return "?";
}

}  // namespace rlimit::core::algorithms
