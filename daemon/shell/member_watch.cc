#include "shell/member_watch.h"

#include <unordered_map>

namespace rlimit::shell {

bool MemberWatch::unchanged(const std::vector<core::Member>& members) const {
  if (first_ || members.size() != seen_.size()) return false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const core::Member& now = members[i];
    const Seen& before = seen_[i];
    if (now.state != before.state || now.incarnation != before.incarnation || now.id != before.id ||
        now.address != before.address) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> MemberWatch::update(const std::vector<core::Member>& members) {
  std::vector<std::string> lines;
  if (unchanged(members)) return lines;

  std::unordered_map<std::string_view, const Seen*> before;
  before.reserve(seen_.size());
  for (const Seen& seen : seen_) before.emplace(seen.id, &seen);

  auto describe = [](const core::Member& member) {
    return "member " + member.id + " (" + member.address + ")";
  };
  for (std::size_t i = 0; i < members.size(); ++i) {
    const core::Member& member = members[i];
    const bool self = i == 0;
    auto it = before.find(member.id);
    if (it == before.end()) {
      if (!self) {
        lines.push_back(describe(member) + " joined: " + core::member_state_name(member.state));
      }
      continue;
    }
    const Seen& was = *it->second;
    before.erase(it);
    if (self) continue;  // our own state changes are logged where they happen
    if (member.incarnation != was.incarnation) {
      lines.push_back(
          describe(member) + " restarted (incarnation " + std::to_string(was.incarnation) + " -> " +
          std::to_string(member.incarnation) + "): " + core::member_state_name(member.state));
    } else if (member.state != was.state) {
      lines.push_back(describe(member) + " " + core::member_state_name(was.state) + " -> " +
                      core::member_state_name(member.state));
    } else if (member.address != was.address) {
      lines.push_back(describe(member) + " moved from " + was.address);
    }
  }
  for (const Seen& seen : seen_) {
    if (before.contains(seen.id)) {
      lines.push_back("member " + seen.id + " (" + seen.address + ") forgotten after being " +
                      core::member_state_name(seen.state));
    }
  }

  seen_.clear();
  seen_.reserve(members.size());
  for (const core::Member& member : members) {
    seen_.push_back(Seen{.id = member.id,
                         .address = member.address,
                         .state = member.state,
                         .incarnation = member.incarnation});
  }
  first_ = false;
  return lines;
}

}  // namespace rlimit::shell
