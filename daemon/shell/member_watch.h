// Notices changes in the membership between two looks, for the info log:
// members that appeared, changed state, restarted (a new incarnation) or were
// forgotten. The cluster service looks after every received payload and
// every tick; the common case (nothing changed) is one pass comparing states
// and versions, without allocating. Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/membership.h"

namespace rlimit::shell {

class MemberWatch {
 public:
  // One line per change since the previous call ("member b (10.0.0.2:7946)
  // alive -> suspect"), in membership order; the first call reports every
  // member but ourselves (members()[0]) as joined.
  std::vector<std::string> update(const std::vector<core::Member>& members);

 private:
  struct Seen {
    std::string id;
    std::string address;
    core::MemberState state = core::MemberState::kAlive;
    std::uint64_t incarnation = 0;
  };
  bool unchanged(const std::vector<core::Member>& members) const;

  std::vector<Seen> seen_;
  bool first_ = true;
};

}  // namespace rlimit::shell
