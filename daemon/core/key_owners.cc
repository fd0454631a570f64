#include "core/key_owners.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <utility>

#include "core/stable_hash.h"

namespace rlimit::core {

void KeyOwners::assign(std::vector<std::string> ids) {
  ids_ = std::move(ids);
  id_hashes_.resize(ids_.size());
  for (std::size_t i = 0; i < ids_.size(); ++i) id_hashes_[i] = fnv1a(ids_[i]);
}

void KeyOwners::owners(std::uint64_t key_hash, std::size_t k,
                       std::vector<std::uint32_t>& out) const {
  assert(k <= kMaxOwners);
  out.clear();
  k = std::min(k, ids_.size());
  if (k == 0) return;
  // The k best so far, best first: k is small (2-3), so insertion into a
  // short array beats a heap. Ties (a 2^-64 chance) go to the smaller id, so
  // every node breaks them alike whatever its order of members.
  struct Scored {
    std::uint64_t score;
    std::uint32_t index;
  };
  const auto better = [this](const Scored& a, const Scored& b) {
    return a.score != b.score ? a.score > b.score : ids_[a.index] < ids_[b.index];
  };
  std::array<Scored, kMaxOwners + 1> best;
  std::size_t held = 0;
  for (std::size_t i = 0; i < id_hashes_.size(); ++i) {
    const Scored s{splitmix64(key_hash ^ id_hashes_[i]), static_cast<std::uint32_t>(i)};
    if (held == k && !better(s, best[held - 1])) continue;
    std::size_t at = held;
    while (at > 0 && better(s, best[at - 1])) {
      best[at] = best[at - 1];
      --at;
    }
    best[at] = s;
    held = std::min(held + 1, k);
  }
  for (std::size_t i = 0; i < held; ++i) out.push_back(best[i].index);
}

void KeyOwners::owners(std::string_view key, std::size_t k, std::vector<std::uint32_t>& out) const {
  owners(fnv1a(key), k, out);
}

}  // namespace rlimit::core
