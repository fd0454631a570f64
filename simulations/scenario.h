// A chaos scenario: the cluster, the network and its faults, the clocks, the
// traffic and the rules of one simulated run, loaded from a TOML file (see
// simulations/scenarios/ and docs/accuracy.md for the format). Any field can
// be overridden with "key.path=value" strings, as `rlimit-sim --set` does.
// Pure: text in, a Scenario or located errors out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_node.h"
#include "core/rule.h"
#include "core/store_sync.h"
#include "core/time.h"
#include "core/token_bucket.h"

namespace rlimit::sim {

using core::TimeUs;

// How the nodes share consumption: peer to peer (gossip or, with fanout 0,
// the mesh), or through a shared store (Redis mode, core/store_sync.h).
enum class SyncMode { kGossip, kRedis };

struct ClusterParams {
  std::uint32_t nodes = 5;
  std::uint32_t seeds = 3;  // the first `seeds` nodes are every node's seed list
  // gossip_interval, fanout, max_payload_bytes, anti-entropy and SWIM timers.
  core::ClusterOptions options;
  std::uint32_t mtu_bytes = 1400;  // what the nodes are configured with (envelope included)
  TimeUs tick_us = 0;              // 0: as rlimitd, clamp(gossip_interval, 1ms, 5ms)
  TimeUs sweep_interval_us = 100'000;
  std::uint32_t sweep_batch = 10'000;
  bool fair_share = true;  // LimiterOptions::fair_share, for before/after runs
  SyncMode mode = SyncMode::kGossip;
};

// The peer envelope rlimitd wraps around every payload: "RLP1", key id, HMAC-SHA256.
inline constexpr std::uint32_t kEnvelopeBytes = 4 + 1 + 32;

// A window in which the store refuses connections: every batch fails fast.
struct StoreOutage {
  TimeUs start_us = 0;
  TimeUs end_us = 0;
};

// The store of Redis mode, modelled: one round trip per batch (latency plus
// up to jitter), batches lost with probability `loss` (the node hears
// nothing: its command timeout answers after timeout_us, and the write may
// or may not have landed), and outages.
struct RedisParams {
  core::StoreSyncOptions options;  // sync_interval, max_writes/reads_per_batch, batch_timeout
  TimeUs latency_us = 500;
  TimeUs jitter_us = 0;
  double loss = 0;
  TimeUs timeout_us = 1'000'000;  // the shell's command timeout
  std::vector<StoreOutage> outages;
};

struct NetworkParams {
  double loss = 0;        // probability a datagram is lost
  TimeUs delay_us = 500;  // one-way base delay
  TimeUs jitter_us = 0;   // uniform extra delay in [0, jitter]
  double duplicate = 0;   // probability a datagram is delivered twice (independent delays)
  double reorder = 0;     // probability a datagram is held back by reorder_delay (overtaken)
  TimeUs reorder_delay_us = 10'000;
  std::uint32_t mtu_bytes = 1500;  // path MTU: larger datagrams (payload + envelope) are dropped
};

// Nodes in different groups cannot reach each other from start to end. With
// one_way, only datagrams from a lower-numbered group to a higher one are
// lost (an asymmetric partition). Nodes in no group form one more group.
struct Partition {
  TimeUs start_us = 0;
  TimeUs end_us = 0;
  std::vector<std::vector<std::uint32_t>> groups;
  bool one_way = false;
};

// The node's process dies at `at` (its memory is lost) and, if restart_us is
// set, starts again with a larger incarnation.
struct Crash {
  std::uint32_t node = 0;
  TimeUs at_us = 0;
  std::optional<TimeUs> restart_us;
};

// At `at`, node `node` resets the key that request `key` of traffic stream
// `stream` checks (rlimitctl reset; docs/cluster.md, "Reset"): the whole
// cluster resets it, and the ideal resets it at the same moment.
struct KeyReset {
  std::uint32_t node = 0;
  TimeUs at_us = 0;
  std::uint32_t stream = 0;
  std::uint32_t key = 0;
};

// What the clients of a crashed node do with their requests.
enum class DownArrivals {
  kLost,        // the host is down: no requests (the ideal sees none either)
  kFailOpen,    // the client cannot reach its daemon and allows (libclient's default)
  kFailClosed,  // ... and denies
};

struct ClockParams {
  // Each node draws an offset in [-offset_max, offset_max] and a drift in
  // [-drift_max, drift_max] unless listed explicitly (per node, by index).
  TimeUs offset_max_us = 0;
  double drift_max = 0;
  std::vector<TimeUs> offsets_us;
  std::vector<double> drifts;
};

enum class ArrivalKind { kConstant, kPoisson, kBursts };
enum class KeyDistribution { kUniform, kZipf };

struct DescriptorTemplate {
  std::string key;
  std::string value;  // "{key}" is replaced by the key index
};

struct InlineTemplate {
  std::string key;  // "{key}" is replaced by the key index
  core::BucketParams params;
};

// One stream of requests, arriving at every node.
struct Traffic {
  std::string name;
  ArrivalKind arrival = ArrivalKind::kPoisson;
  double rate_per_s = 0;  // requests per second, all nodes together; 0: demand x limit
  double demand = 2.0;    // multiple of the stream's limit (see Scenario::stream_limit_per_s)
  std::int64_t cost = 1;
  std::uint32_t keys = 1;
  KeyDistribution key_distribution = KeyDistribution::kUniform;
  double zipf_s = 1.0;
  // Each key's requests come from only this many nodes (0: from every node),
  // as with sticky load balancing; bounds the per-origin counters per key.
  std::uint32_t key_spread = 0;
  std::vector<double> node_weights;  // relative share per node; missing entries weigh 1
  double node_zipf = 0;              // > 0: node i weighs 1 / (i + 1)^node_zipf
  TimeUs burst_on_us = 200'000;      // kBursts: on for burst_on, off for burst_off
  TimeUs burst_off_us = 800'000;
  bool burst_aligned = true;  // every node bursts at once (else each its own phase)
  TimeUs start_us = 2'000'000;
  TimeUs end_us = -1;  // -1: the end of the run
  // > 0: an admitted request holds its concurrency leases this long, then
  // releases them (on its node, and in the ideal). 0: never released (leases
  // expire after their TTL).
  TimeUs hold_us = 0;
  std::vector<DescriptorTemplate> descriptors;
  std::optional<InlineTemplate> inline_limit;
};

struct ReportParams {
  TimeUs sample_us = 100'000;  // time series resolution
  TimeUs window_us = 1'000'000;
  double limit_per_s = 0;  // the limit line; 0: derived from the rules (see docs)
  TimeUs probe_interval_us = 10'000;
  std::uint32_t probe_keys = 8;  // hottest keys per stream probed for convergence
  double converge_tokens = 1.0;
  TimeUs converge_max_us = 30'000'000;
  TimeUs plot_smooth_us = 500'000;
  std::uint32_t plot_nodes = 6;  // per-node lines drawn, at most
};

// A range the swarm draws a field from: "network.loss" = [0.0, 0.2],
// "network.delay" = ["100us", "20ms"], "cluster.fanout" = [1, 6].
enum class SwarmKind { kInteger, kFloat, kDuration };
struct SwarmRange {
  std::string path;
  SwarmKind kind = SwarmKind::kFloat;
  double low = 0;  // microseconds for durations
  double high = 0;
};

struct Scenario {
  std::string name;
  std::string description;
  TimeUs duration_us = 30'000'000;
  ClusterParams cluster;
  NetworkParams network;
  RedisParams redis;  // mode = "redis" only
  std::vector<Partition> partitions;
  std::vector<Crash> crashes;
  std::vector<KeyReset> resets;
  DownArrivals down_arrivals = DownArrivals::kLost;
  ClockParams clock;
  std::vector<Traffic> traffic;
  core::RuleSet rules;
  ReportParams report;
  std::vector<SwarmRange> swarm;
  std::string source;  // file name
};

struct ScenarioLoad {
  std::optional<Scenario> scenario;
  std::vector<std::string> errors;  // "file: path: message"
};

// Parses scenario text, then applies each override "a.b.c=value" (value in
// TOML syntax; a bare word is taken as a string). Array elements are
// addressed by index: "traffic.0.demand=3".
ScenarioLoad load_scenario(std::string_view text, std::string_view file_name,
                           const std::vector<std::string>& overrides = {});
ScenarioLoad load_scenario_file(const std::string& path,
                                const std::vector<std::string>& overrides = {});

}  // namespace rlimit::sim
