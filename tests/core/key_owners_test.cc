#include "core/key_owners.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/stable_hash.h"

namespace rlimit::core {
namespace {

std::vector<std::string> node_ids(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back("node-" + std::to_string(i));
  return ids;
}

// The owners of `key` by id.
std::vector<std::string> owner_ids(const KeyOwners& owners, const std::string& key, std::size_t k) {
  std::vector<std::uint32_t> out;
  owners.owners(key, k, out);
  std::vector<std::string> ids;
  for (const std::uint32_t i : out) ids.push_back(owners.id(i));
  return ids;
}

TEST(KeyOwnersTest, EveryOrderOfTheSameMembersGivesTheSameOwners) {
  KeyOwners a;
  a.assign(node_ids(50));
  std::vector<std::string> shuffled = node_ids(50);
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  KeyOwners b;
  b.assign(shuffled);
  for (int key = 0; key < 1000; ++key) {
    const std::string k = "user:" + std::to_string(key);
    EXPECT_EQ(owner_ids(a, k, 3), owner_ids(b, k, 3)) << k;
  }
}

TEST(KeyOwnersTest, OwnersAreDistinctBestFirstAndAtMostTheMembers) {
  KeyOwners owners;
  owners.assign(node_ids(5));
  std::vector<std::uint32_t> out;
  owners.owners("k", 3, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(std::set<std::uint32_t>(out.begin(), out.end()).size(), 3u);
  // The first of three is the only one of one, the first two the two of two.
  std::vector<std::uint32_t> one;
  owners.owners("k", 1, one);
  EXPECT_EQ(one, std::vector<std::uint32_t>{out[0]});
  std::vector<std::uint32_t> two;
  owners.owners("k", 2, two);
  EXPECT_EQ(two, (std::vector<std::uint32_t>{out[0], out[1]}));
  owners.owners("k", KeyOwners::kMaxOwners, out);
  EXPECT_EQ(out.size(), 5u);
  KeyOwners none;
  none.owners("k", 2, out);
  EXPECT_TRUE(out.empty());
}

// A member that leaves moves only the keys it owned; one that joins takes
// only keys it now owns. Nothing else changes hands.
TEST(KeyOwnersTest, AMemberComingOrGoingMovesOnlyItsKeys) {
  KeyOwners before;
  before.assign(node_ids(30));
  std::vector<std::string> fewer = node_ids(30);
  fewer.erase(fewer.begin() + 11);  // node-11 leaves
  KeyOwners after;
  after.assign(fewer);
  std::vector<std::string> more = node_ids(30);
  more.push_back("node-new");
  KeyOwners joined;
  joined.assign(more);
  int moved_on_leave = 0;
  int moved_on_join = 0;
  const int keys = 3000;
  for (int key = 0; key < keys; ++key) {
    const std::string k = "user:" + std::to_string(key);
    const std::vector<std::string> was = owner_ids(before, k, 2);
    const std::vector<std::string> now = owner_ids(after, k, 2);
    const bool owned = std::find(was.begin(), was.end(), "node-11") != was.end();
    if (!owned) {
      EXPECT_EQ(was, now) << k;
    } else {
      ++moved_on_leave;
      // The other owner stays an owner.
      for (const std::string& id : was) {
        if (id == "node-11") continue;
        EXPECT_NE(std::find(now.begin(), now.end(), id), now.end()) << k;
      }
    }
    const std::vector<std::string> with_new = owner_ids(joined, k, 2);
    if (with_new != was) {
      ++moved_on_join;
      EXPECT_NE(std::find(with_new.begin(), with_new.end(), "node-new"), with_new.end()) << k;
    }
  }
  // About k/N of the keys: 2/30 and 2/31 of 3,000, about 200.
  EXPECT_GT(moved_on_leave, 120);
  EXPECT_LT(moved_on_leave, 280);
  EXPECT_GT(moved_on_join, 120);
  EXPECT_LT(moved_on_join, 280);
}

TEST(KeyOwnersTest, KeysSpreadEvenlyOverTheMembers) {
  KeyOwners owners;
  owners.assign(node_ids(10));
  std::map<std::uint32_t, int> first;
  std::vector<std::uint32_t> out;
  const int keys = 20000;
  for (int key = 0; key < keys; ++key) {
    owners.owners("tenant/" + std::to_string(key), 1, out);
    ++first[out[0]];
  }
  ASSERT_EQ(first.size(), 10u);
  for (const auto& [member, count] : first) {
    EXPECT_GT(count, keys / 10 * 85 / 100) << member;
    EXPECT_LT(count, keys / 10 * 115 / 100) << member;
  }
}

}  // namespace
}  // namespace rlimit::core
