#include "shell/member_watch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rlimit::shell {
namespace {

using core::Member;
using core::MemberState;

Member member(std::string id, MemberState state = MemberState::kAlive,
              std::uint64_t incarnation = 1) {
  Member m;
  m.address = "10.0.0." + std::to_string(id.size()) + ":7946";
  m.id = std::move(id);
  m.state = state;
  m.incarnation = incarnation;
  return m;
}

TEST(MemberWatchTest, ReportsJoinsStateChangesRestartsAndForgetting) {
  MemberWatch watch;
  std::vector<Member> members = {member("self")};
  EXPECT_TRUE(watch.update(members).empty());  // ourselves alone: nothing to say
  EXPECT_TRUE(watch.update(members).empty());

  members.push_back(member("b"));
  std::vector<std::string> lines = watch.update(members);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "member b (10.0.0.1:7946) joined: alive");
  EXPECT_TRUE(watch.update(members).empty());

  members[1].state = MemberState::kSuspect;
  members[1].last_heard_us = 12345;  // not a change worth a line
  members[1].seq = 3;
  lines = watch.update(members);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "member b (10.0.0.1:7946) alive -> suspect");

  members[1] = member("b", MemberState::kAlive, 2);
  lines = watch.update(members);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "member b (10.0.0.1:7946) restarted (incarnation 1 -> 2): alive");

  members[0].state = MemberState::kLeft;  // our own leave is logged elsewhere
  members.erase(members.begin() + 1);
  lines = watch.update(members);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "member b (10.0.0.1:7946) forgotten after being alive");
}

TEST(MemberWatchTest, AReplacementAtTheSamePositionIsTwoChanges) {
  MemberWatch watch;
  std::vector<Member> members = {member("self"), member("b")};
  watch.update(members);
  members[1] = member("c");
  const std::vector<std::string> lines = watch.update(members);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "member c (10.0.0.1:7946) joined: alive");
  EXPECT_EQ(lines[1], "member b (10.0.0.1:7946) forgotten after being alive");
}

}  // namespace
}  // namespace rlimit::shell
