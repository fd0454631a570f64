// The cluster fuzz_peer's node belongs to, shared with make_seeds.cc (whose
// seeds are what node 1 of this cluster sends node 0).
#pragma once

#include <string>
#include <string_view>

#include "core/cluster_node.h"
#include "core/time.h"

namespace rlimit::fuzz {

// One secret signs, the second is still accepted (a rotation).
inline constexpr std::string_view kClusterSecrets =
    "a cluster secret for the fuzzer\nan older secret still accepted\n";
inline constexpr core::TimeUs kStartUs = 1'000'000'000;
// Time between two payloads fuzz_peer delivers (the node ticks in between).
inline constexpr core::TimeUs kPayloadIntervalUs = 7'000;

// Node `index` of a two-node cluster (n0 at 10.0.0.1, n1 at 10.0.0.2), with
// short timers so a few payloads reach probes, suspicion and anti-entropy.
inline core::ClusterOptions node_options(int index) {
  core::ClusterOptions options;
  options.cluster_name = "fuzz";
  options.membership.node_id = "n" + std::to_string(index);
  options.membership.address = "10.0.0." + std::to_string(index + 1) + ":7946";
  options.membership.incarnation = 1000 + static_cast<std::uint64_t>(index);
  options.membership.seeds = {index == 0 ? "10.0.0.2:7946" : "10.0.0.1:7946"};
  options.membership.probe_interval_us = 20'000;
  options.membership.probe_timeout_us = 10'000;
  options.membership.suspicion_timeout_us = 50'000;
  options.membership.max_members = 16;
  options.anti_entropy_interval_us = 30'000;
  options.rules_sync.max_rules_bytes = 16 * 1024;
  // Owner routing on (both nodes own every key of a two-node cluster), so a
  // key with few origins takes the routed path and one with more than
  // routed_max_origins the gossip path: the fuzzer reaches both.
  options.owners_per_key = 2;
  options.routed_max_origins = 4;
  options.routed_min_members = 1;
  return options;
}

}  // namespace rlimit::fuzz
