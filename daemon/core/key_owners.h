// Which members own a key (docs/cluster.md, "Owner routing"): rendezvous
// hashing. Each member's score for a key is splitmix64(fnv1a(key) ^
// fnv1a(member id)); the members with the k highest scores own it. Nodes
// that see the same members compute the same owners, and a member that comes
// or goes moves only the keys whose top k it enters or leaves (about k/N of
// them).
//
// A lookup is one pass over the members' id hashes (8 bytes each, one
// array): 1.76 us at 1,000 members (BM_KeyOwnersLookup; docs/cluster.md).
// Owners are looked up when a node sends a routed key, not on the request
// path.
//
// Plain data; not thread-safe (the cluster node's event loop owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlimit::core {

class KeyOwners {
 public:
  // The most owners a key may have.
  static constexpr std::size_t kMaxOwners = 8;

  // The members that own keys (ids, ourselves included; order does not
  // matter, duplicates are not allowed). Replaces the previous set.
  void assign(std::vector<std::string> ids);

  std::size_t size() const { return ids_.size(); }
  const std::string& id(std::uint32_t index) const { return ids_[index]; }

  // Up to `k` (<= kMaxOwners) owners of the key whose fnv1a hash is `key_hash`, as indices
  // into the assigned ids, highest score first; fewer when there are fewer
  // members. `out` is cleared first.
  void owners(std::uint64_t key_hash, std::size_t k, std::vector<std::uint32_t>& out) const;
  void owners(std::string_view key, std::size_t k, std::vector<std::uint32_t>& out) const;

 private:
  std::vector<std::string> ids_;
  std::vector<std::uint64_t> id_hashes_;  // same order as ids_
};

}  // namespace rlimit::core
