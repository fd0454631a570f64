// ClusterNode end to end in one process: real Limiters, Membership and
// gossip over an in-test network with loss, on virtual time.
#include "core/cluster_node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/fair_share.h"
#include "core/key_owners.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

RuleSet global_rule(std::int64_t limit, std::int64_t period_us, std::int64_t burst) {
  Rule rule;
  rule.name = "global";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"api", each});
  rule.params = {limit, period_us, burst};
  RuleSet rules;
  rules.rules.push_back(rule);
  return rules;
}

struct SimNode {
  std::unique_ptr<Limiter> limiter;
  std::unique_ptr<ClusterNode> node;
  bool up = true;
};

class Sim {
 public:
  Sim(int n, const RuleSet& rules, double loss, std::uint64_t seed, ClusterOptions base = {})
      : rng_(seed), loss_(loss), rules_(rules), seed_(seed) {
    for (int i = 0; i < n; ++i) {
      ClusterOptions options = base;
      options.cluster_name = "sim";
      options.membership.node_id = "n" + std::to_string(i);
      options.membership.address = "10.0.0." + std::to_string(i + 1) + ":7946";
      options.membership.incarnation = 1000 + static_cast<std::uint64_t>(i);
      options.membership.seeds = {"10.0.0.1:7946"};
      options.membership.probe_interval_us = 100'000;
      options.membership.probe_timeout_us = 40'000;
      options.membership.suspicion_timeout_us = 500'000;
      options.anti_entropy_interval_us = 200'000;
      SimNode sim;
      sim.limiter = std::make_unique<Limiter>(LimiterOptions{.replicated = true}, rules);
      sim.node = std::make_unique<ClusterNode>(options, *sim.limiter, seed * 31 + static_cast<std::uint64_t>(i));
      by_address_[options.membership.address] = static_cast<std::size_t>(i);
      nodes_.push_back(std::move(sim));
      options_.push_back(options);
    }
    for (SimNode& s : nodes_) s.node->start(now_);
    collect();
  }

  // Advances virtual time by `us` in 5 ms ticks, delivering packets after 1 ms.
  void run(TimeUs us) {
    const TimeUs end = now_ + us;
    while (now_ < end) {
      now_ += 1000;
      while (!queue_.empty() && queue_.front().at <= now_) {
        Packet p = std::move(queue_.front());
        queue_.pop_front();
        SimNode& to = nodes_[p.to];
        if (to.up) to.node->on_payload(p.payload, now_);
      }
      if (now_ % 5000 == 0) {
        for (SimNode& s : nodes_) {
          if (s.up) s.node->tick(now_);
        }
      }
      collect();
    }
  }

  bool check(std::size_t i, const char* api, std::int64_t cost = 1) {
    const Descriptor d[] = {{"api", api}};
    CheckOutput out;
    nodes_[i].limiter->check({d, cost, nullptr}, now_, out);
    return out.allowed;
  }
  std::int64_t remaining(std::size_t i, const char* api) {
    const Descriptor d[] = {{"api", api}};
    CheckOutput out;
    nodes_[i].limiter->check({d, 0, nullptr}, now_, out);
    return out.rules[0].remaining;
  }
  // Resets `api`'s key on node i (rlimitctl reset).
  std::size_t reset(std::size_t i, const char* api) {
    const Descriptor d[] = {{"api", api}};
    CheckOutput out;
    return nodes_[i].limiter->reset({d, 1, nullptr}, now_, out);
  }
  // Node i's process dies: it sends and receives nothing.
  void crash(std::size_t i) { nodes_[i].up = false; }
  // ... and starts again with its memory lost and a larger incarnation.
  void restart(std::size_t i) {
    ClusterOptions& options = options_[i];
    options.membership.incarnation += 1'000'000;
    SimNode& sim = nodes_[i];
    sim.node.reset();
    sim.limiter = std::make_unique<Limiter>(LimiterOptions{.replicated = true}, rules_);
    sim.node = std::make_unique<ClusterNode>(options, *sim.limiter, seed_ * 37 + i);
    sim.node->start(now_);
    sim.up = true;
    collect();
  }
  SimNode& node(std::size_t i) { return nodes_[i]; }
  std::size_t max_payload_seen() const { return max_payload_; }
  // Every payload sent from now on, as (receiver, payload): what an attacker
  // on the path captures.
  void record() { recording_ = true; }
  const std::vector<std::pair<std::size_t, std::string>>& recorded() const { return recorded_; }
  // Node i leaves gracefully (its Leave goes out), then stops.
  void leave(std::size_t i) {
    nodes_[i].node->leave(now_);
    collect();
    crash(i);
  }
  // Hands `payload` to node i now, as if it had just arrived.
  void inject(std::size_t i, const std::string& payload) {
    nodes_[i].node->on_payload(payload, now_);
    collect();
  }
  void set_loss(double loss) { loss_ = loss; }

 private:
  struct Packet {
    TimeUs at;
    std::size_t to;
    std::string payload;
  };
  void collect() {
    for (SimNode& s : nodes_) {
      for (OutPacket& p : s.node->outbox()) {
        max_payload_ = std::max(max_payload_, p.payload.size());
        if (!s.up) continue;
        if (std::uniform_real_distribution<double>(0, 1)(rng_) < loss_) continue;
        auto it = by_address_.find(p.address);
        if (it == by_address_.end()) continue;
        if (recording_) recorded_.emplace_back(it->second, p.payload);
        queue_.push_back({now_ + 1000, it->second, std::move(p.payload)});
      }
      s.node->outbox().clear();
    }
  }

  std::mt19937_64 rng_;
  double loss_;
  RuleSet rules_;
  std::uint64_t seed_;
  TimeUs now_ = 1'000'000;
  std::vector<SimNode> nodes_;
  std::vector<ClusterOptions> options_;
  std::map<std::string, std::size_t> by_address_;
  std::deque<Packet> queue_;
  std::size_t max_payload_ = 0;
  bool recording_ = false;
  std::vector<std::pair<std::size_t, std::string>> recorded_;
};

TEST(ClusterNodeTest, ConsumptionReachesEveryNode) {
  Sim sim(5, global_rule(100, 3600 * kUsPerSecond, 100), 0.0, 1);
  sim.run(2 * kUsPerSecond);  // join
  for (std::size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(sim.node(i).node->membership().live_peers().size(), 4u) << i;
  }
  for (std::size_t i = 0; i < 5; ++i) {
    for (int k = 0; k < 4; ++k) ASSERT_TRUE(sim.check(i, "search"));
  }
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(sim.remaining(i, "search"), 80) << i;
}

TEST(ClusterNodeTest, HeavyLossIsRepairedByAntiEntropy) {
  Sim sim(4, global_rule(1000, 3600 * kUsPerSecond, 1000), 0.0, 2);
  sim.run(2 * kUsPerSecond);
  sim.set_loss(0.6);
  for (int round = 0; round < 50; ++round) {
    for (std::size_t i = 0; i < 4; ++i) sim.check(i, "k");
    sim.run(10'000);
  }
  sim.set_loss(0.0);
  sim.run(3 * kUsPerSecond);
  const std::int64_t reference = sim.remaining(0, "k");
  EXPECT_EQ(reference, 1000 - 200);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(sim.remaining(i, "k"), reference) << i;
}

TEST(ClusterNodeTest, ManyKeysArePackedWithinThePayloadBound) {
  ClusterOptions options;
  options.max_payload_bytes = 600;
  Sim sim(3, global_rule(10, 3600 * kUsPerSecond, 10), 0.0, 3, options);
  sim.run(2 * kUsPerSecond);
  std::vector<std::string> keys;
  for (int k = 0; k < 500; ++k) keys.push_back("key-" + std::to_string(k));
  for (const std::string& k : keys) ASSERT_TRUE(sim.check(0, k.c_str()));
  sim.run(3 * kUsPerSecond);
  EXPECT_LE(sim.max_payload_seen(), 600u);
  for (const std::string& k : keys) {
    EXPECT_EQ(sim.remaining(1, k.c_str()), 9) << k;
    EXPECT_EQ(sim.remaining(2, k.c_str()), 9) << k;
  }
  EXPECT_GT(sim.node(0).node->stats().gossip_backlog_deferred + sim.node(0).node->stats().anti_entropy_pushes, 0u);
}

// A key many nodes consume from has more entries than one payload holds; its
// entries are spread over several payloads instead of never being sent
// (found by rlimit-sim: with more than about 30 nodes on one shared key, no
// node heard of any other's consumption).
TEST(ClusterNodeTest, AKeyWithMoreEntriesThanOnePayloadHoldsStillSpreads) {
  ClusterOptions options;
  options.max_payload_bytes = 600;
  Sim sim(40, global_rule(1000, 3600 * kUsPerSecond, 1000), 0.0, 5, options);
  sim.run(6 * kUsPerSecond);
  for (std::size_t i = 0; i < 40; ++i) ASSERT_TRUE(sim.check(i, "shared"));
  sim.run(3 * kUsPerSecond);
  EXPECT_LE(sim.max_payload_seen(), 600u);
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(sim.remaining(i, "shared"), 1000 - 40) << i;
}

TEST(ClusterNodeTest, ForeignAndMalformedPayloadsAreCountedAndIgnored) {
  Sim sim(2, global_rule(10, kUsPerSecond, 10), 0.0, 4);
  ClusterNode& node = *sim.node(0).node;
  node.on_payload("definitely not protobuf \xff\xff\xff", 0);
  peer::v1::PeerMessage foreign;
  foreign.set_cluster("other");
  foreign.set_from_id("x");
  node.on_payload(foreign.SerializeAsString(), 0);
  // A reset floor that claims more floors than a reset can have.
  peer::v1::PeerMessage floor;
  floor.set_cluster("sim");
  floor.set_from_id("n9");
  floor.set_from_address("10.0.0.9:7946");
  floor.set_seq(1);  // replay_window.h: unsequenced messages are refused
  floor.mutable_counters()->add_origins("n9");
  auto* entry = floor.mutable_counters()->add_entries();
  entry->set_key("k");
  entry->set_origin(0);
  entry->set_reset_epoch(1 << 20);
  entry->set_reset_floors(Ledger::kMaxOrigins + 1);
  node.on_payload(floor.SerializeAsString(), 0);
  EXPECT_EQ(node.stats().reset_floors_received, 1u);
  EXPECT_EQ(node.stats().malformed_payloads, 2u);
  EXPECT_EQ(node.stats().foreign_cluster, 1u);
  EXPECT_EQ(sim.remaining(0, "a"), 10);
}

// CounterEntry.balance on the wire (docs/cluster.md, "Balances after a
// partition"): it raises the receiver only when it rides on the last entry of
// a run of its key's entries that all merged; a message without it (an older
// peer) changes nothing.
TEST(ClusterNodeTest, ABalanceOnTheWireRaisesOnlyAfterItsEntriesMerged) {
  Sim sim(1, global_rule(10, kUsPerSecond, 10), 0.0, 6);
  ASSERT_TRUE(sim.check(0, "a", 10));
  ClusterNode& node = *sim.node(0).node;
  const Ledger& ledger = sim.node(0).limiter->ledger();
  ASSERT_EQ(ledger.changed().size(), 1u);
  const std::string key = ledger.changed().front();
  const Ledger::KeyState* state = ledger.find(key);
  ASSERT_NE(state, nullptr);
  const Ledger::Entry own = state->entries.front();
  // A peer n9 that consumed 4 under incarnation 5, and holds our 10 too.
  const TimeUs now = 1'000'000;  // the Sim's clock, not advanced
  std::uint64_t seq = 0;
  const auto message = [&](std::optional<std::int64_t> balance, bool malformed) {
    peer::v1::PeerMessage m;
    m.set_cluster("sim");
    m.set_from_id("n9");
    m.set_from_address("10.0.0.9:7946");
    m.set_seq(++seq);  // each a new message (replay_window.h)
    m.set_sent_at_us(now);
    auto* counters = m.mutable_counters();
    counters->add_origins("n0");
    counters->add_origins("n9");
    auto* ours = counters->add_entries();
    ours->set_key(key);
    ours->set_origin(malformed ? 7 : 0);
    ours->set_incarnation(own.incarnation);
    ours->set_consumed(own.consumed);
    auto* theirs = counters->add_entries();
    theirs->set_key(key);
    theirs->set_origin(1);
    theirs->set_incarnation(5);
    theirs->set_consumed(4);
    if (balance) theirs->set_balance(*balance);
    return m.SerializeAsString();
  };
  node.on_payload(message(std::nullopt, false), now);  // an older peer
  EXPECT_EQ(sim.remaining(0, "a"), 0);                 // charged 4: -4
  EXPECT_EQ(node.stats().balances_received, 0u);
  node.on_payload(message(3, true), now);  // the run holds a malformed entry
  EXPECT_EQ(node.stats().balances_received, 1u);
  EXPECT_EQ(node.stats().balances_raised, 0u);
  node.on_payload(message(3, false), now);
  EXPECT_EQ(node.stats().balances_raised, 1u);
  EXPECT_EQ(sim.remaining(0, "a"), 3);  // the run sums to all we hold: 3
}

// A reset on one node resets the key on every node (docs/cluster.md,
// "Reset"). Consumption the resetting node had not heard of yet (node 1's 5,
// in flight) is charged after it, on every node alike.
TEST(ClusterNodeTest, AResetReachesEveryNodeAndConvergesWithConsumptionInFlight) {
  Sim sim(4, global_rule(40, 3600 * kUsPerSecond, 40), 0.0, 7);
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 4; ++i) {
    for (int k = 0; k < 5; ++k) ASSERT_TRUE(sim.check(i, "search"));
  }
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(sim.remaining(i, "search"), 20) << i;
  // Node 1 spends 5 more, and node 0 resets before hearing of them.
  ASSERT_TRUE(sim.check(1, "search", 5));
  EXPECT_EQ(sim.reset(0, "search"), 1u);
  EXPECT_EQ(sim.remaining(0, "search"), 40);
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(sim.remaining(i, "search"), 35) << i;
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(sim.node(i).limiter->stats().resets_applied, 1u) << i;
  }
  EXPECT_EQ(sim.node(0).limiter->stats().resets_sent, 1u);
  // Consumption after the reset counts once, everywhere.
  for (std::size_t i = 0; i < 4; ++i) ASSERT_TRUE(sim.check(i, "search"));
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(sim.remaining(i, "search"), 31) << i;
}

// A reset survives loss and a node that was down when it happened and comes
// back with its memory lost: anti-entropy brings it the key's entries and
// the reset's floors, and it ends where the others are. A later reset (on
// another node) supersedes the first everywhere.
TEST(ClusterNodeTest, AResetSurvivesLossAndARestartedNode) {
  Sim sim(5, global_rule(30, 3600 * kUsPerSecond, 30), 0.0, 8);
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) {
    for (int k = 0; k < 6; ++k) ASSERT_TRUE(sim.check(i, "pay"));
  }
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) ASSERT_EQ(sim.remaining(i, "pay"), 0) << i;
  sim.crash(4);
  sim.set_loss(0.3);
  sim.reset(0, "pay");
  sim.run(2 * kUsPerSecond);
  sim.restart(4);
  sim.run(4 * kUsPerSecond);
  sim.set_loss(0.0);
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(sim.remaining(i, "pay"), 30) << i;
  EXPECT_EQ(sim.node(4).limiter->stats().resets_applied, 1u);

  // Spend 10 on node 2, reset on node 3 (after hearing of them): full again.
  ASSERT_TRUE(sim.check(2, "pay", 10));
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) ASSERT_EQ(sim.remaining(i, "pay"), 20) << i;
  sim.reset(3, "pay");
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(sim.remaining(i, "pay"), 30) << i;
}

// Two nodes reset one key at the same moment, each with consumption the other
// has not heard of: one reset wins (the higher epoch) and every node ends in
// the same state.
TEST(ClusterNodeTest, ConcurrentResetsConverge) {
  Sim sim(4, global_rule(50, 3600 * kUsPerSecond, 50), 0.0, 9);
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 4; ++i) ASSERT_TRUE(sim.check(i, "k", 5));
  sim.run(kUsPerSecond);
  ASSERT_TRUE(sim.check(0, "k", 3));
  ASSERT_TRUE(sim.check(1, "k", 4));
  sim.reset(0, "k");
  sim.reset(1, "k");
  sim.run(3 * kUsPerSecond);
  const std::int64_t reference = sim.remaining(0, "k");
  // One of the two resets won: 50 less what the winner had not heard of.
  EXPECT_TRUE(reference == 50 - 4 || reference == 50 - 3) << reference;
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(sim.remaining(i, "k"), reference) << i;
}

TEST(ClusterNodeTest, DeterministicForOneSeed) {
  auto run_once = [] {
    Sim sim(4, global_rule(50, kUsPerSecond, 50), 0.1, 99);
    sim.run(kUsPerSecond);
    for (int i = 0; i < 40; ++i) sim.check(static_cast<std::size_t>(i % 4), "a");
    sim.run(kUsPerSecond);
    std::vector<std::uint64_t> digest;
    for (std::size_t i = 0; i < 4; ++i) {
      digest.push_back(sim.node(i).node->stats().packets_out);
      digest.push_back(sim.node(i).node->stats().bytes_out);
      digest.push_back(static_cast<std::uint64_t>(sim.remaining(i, "a")));
    }
    return digest;
  };
  EXPECT_EQ(run_once(), run_once());
}

// Owner routing (docs/cluster.md, "Owner routing"): per-user keys, each used
// by three of twelve nodes. Every user's nodes converge on its whole
// consumption; a node holds only keys it used or owns; nothing is gossiped.
TEST(ClusterNodeTest, RoutedKeysReachTheNodesThatUseThemAndNoOthers) {
  ClusterOptions options;
  options.owners_per_key = 2;
  options.routed_min_members = 1;  // a small cluster routes too
  constexpr std::size_t kNodes = 12;
  constexpr int kUsers = 24;
  constexpr std::int64_t kNoRefill = 3600'000 * kUsPerSecond;
  Sim sim(static_cast<int>(kNodes), global_rule(100, kNoRefill, 100), 0.0, 21, options);
  sim.run(3 * kUsPerSecond);
  const auto users_nodes = [](int user) {
    return std::vector<std::size_t>{static_cast<std::size_t>(user) % kNodes,
                                    static_cast<std::size_t>(user + 4) % kNodes,
                                    static_cast<std::size_t>(user + 9) % kNodes};
  };
  for (int round = 0; round < 3; ++round) {
    for (int user = 0; user < kUsers; ++user) {
      const std::string key = "u" + std::to_string(user);
      for (const std::size_t i : users_nodes(user)) {
        for (int k = 0; k <= user % 3; ++k) ASSERT_TRUE(sim.check(i, key.c_str()));
      }
    }
    sim.run(300'000);
  }
  sim.run(kUsPerSecond);
  for (int user = 0; user < kUsers; ++user) {
    const std::string key = "u" + std::to_string(user);
    for (const std::size_t i : users_nodes(user)) {
      EXPECT_EQ(sim.remaining(i, key.c_str()), 100 - 3 * 3 * (user % 3 + 1))
          << key << " node " << i;
    }
  }
  // Which node holds which ledger key, against who used or owns it.
  KeyOwners owners;
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < kNodes; ++i) ids.push_back("n" + std::to_string(i));
  owners.assign(ids);
  std::vector<std::uint32_t> owner_list;
  std::uint64_t to_owners = 0;
  std::uint64_t forwarded = 0;
  for (std::size_t i = 0; i < kNodes; ++i) {
    const ClusterNode& node = *sim.node(i).node;
    EXPECT_EQ(node.stats().entries_gossiped, 0u) << i;
    to_owners += node.stats().routed_entries_to_owners;
    forwarded += node.stats().routed_entries_forwarded;
    sim.node(i).limiter->ledger().for_each_key(
        [&](const std::string& key, const Ledger::KeyState& state) {
          owners.owners(key, 2, owner_list);
          const bool owns = std::find(owner_list.begin(), owner_list.end(), i) != owner_list.end();
          EXPECT_TRUE(owns || state.own >= 0) << "node " << i << " holds " << key;
        });
  }
  EXPECT_GT(to_owners, 0u);
  EXPECT_GT(forwarded, 0u);
}

// Routing engages only once a node sees routed_min_members live members:
// the same 12 nodes and per-user keys gossip with the default (128) and
// route with 12.
TEST(ClusterNodeTest, RoutingEngagesFromRoutedMinMembers) {
  for (const std::uint32_t min_members : {128u, 13u, 12u}) {
    ClusterOptions options;  // owners_per_key: the default (2)
    options.routed_min_members = min_members;
    constexpr int kNodes = 12;
    Sim sim(kNodes, global_rule(100, 3600'000 * kUsPerSecond, 100), 0.0, 23, options);
    sim.run(3 * kUsPerSecond);
    for (int user = 0; user < 12; ++user) {
      const std::string key = "u" + std::to_string(user);
      ASSERT_TRUE(sim.check(static_cast<std::size_t>(user), key.c_str()));
      ASSERT_TRUE(sim.check(static_cast<std::size_t>(user + 5) % kNodes, key.c_str()));
    }
    sim.run(kUsPerSecond);
    std::uint64_t gossiped = 0;
    std::uint64_t routed = 0;
    for (int i = 0; i < kNodes; ++i) {
      gossiped += sim.node(static_cast<std::size_t>(i)).node->stats().entries_gossiped;
      routed += sim.node(static_cast<std::size_t>(i)).node->stats().routed_entries_to_owners;
    }
    if (min_members > kNodes) {
      EXPECT_GT(gossiped, 0u) << min_members;
      EXPECT_EQ(routed, 0u) << min_members;
    } else {
      EXPECT_EQ(gossiped, 0u) << min_members;
      EXPECT_GT(routed, 0u) << min_members;
    }
    for (int user = 0; user < 12; ++user) {
      const std::string key = "u" + std::to_string(user);
      EXPECT_EQ(sim.remaining(static_cast<std::size_t>(user), key.c_str()), 98) << key;
    }
  }
}

// Loss while users spend, then an owner of every key crashes: anti-entropy
// to the (new) owners repairs what was lost, and nothing is lost for good.
TEST(ClusterNodeTest, RoutedKeysSurviveLossAndACrashedOwner) {
  ClusterOptions options;
  options.owners_per_key = 2;
  options.routed_min_members = 1;  // a small cluster routes too
  constexpr std::int64_t kNoRefill = 3600'000 * kUsPerSecond;  // none within the test
  Sim sim(8, global_rule(1000, kNoRefill, 1000), 0.0, 22, options);
  sim.run(3 * kUsPerSecond);
  sim.set_loss(0.3);
  for (int round = 0; round < 20; ++round) {
    for (std::size_t i = 1; i < 8; i += 2) sim.check(i, "tenant");  // nodes 1, 3, 5, 7
    sim.run(20'000);
  }
  sim.set_loss(0.0);
  sim.run(kUsPerSecond);
  KeyOwners owners;
  owners.assign({"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"});
  std::string ledger_key;
  sim.node(1).limiter->ledger().for_each_key(
      [&](const std::string& key, const Ledger::KeyState&) { ledger_key = key; });
  std::vector<std::uint32_t> owner_list;
  owners.owners(ledger_key, 2, owner_list);
  // Crash the first owner that is not a consumer (or the first owner).
  std::size_t victim = owner_list[0];
  if (victim % 2 == 1 && owner_list[1] % 2 == 0) victim = owner_list[1];
  sim.crash(victim);
  for (int round = 0; round < 10; ++round) {
    for (std::size_t i = 1; i < 8; i += 2) {
      if (i != victim) sim.check(i, "tenant");
    }
    sim.run(20'000);
  }
  sim.run(4 * kUsPerSecond);  // the owner declared dead, new owners filled
  const int consumers_left = victim % 2 == 1 ? 3 : 4;
  const std::int64_t expected = 1000 - 20 * 4 - 10 * consumers_left;
  for (std::size_t i = 1; i < 8; i += 2) {
    if (i == victim) continue;
    EXPECT_EQ(sim.remaining(i, "tenant"), expected) << i;
  }
}

// A key with more origins than routed_max_origins is gossiped: it reaches
// nodes that never used it, as every key did before routing.
TEST(ClusterNodeTest, AKeyWithManyOriginsIsGossiped) {
  ClusterOptions options;
  options.owners_per_key = 2;
  options.routed_min_members = 1;  // a small cluster routes too
  options.routed_max_origins = 3;
  constexpr std::int64_t kNoRefill = 3600'000 * kUsPerSecond;
  Sim sim(8, global_rule(1000, kNoRefill, 1000), 0.0, 23, options);
  sim.run(3 * kUsPerSecond);
  for (std::size_t i = 0; i < 6; ++i) ASSERT_TRUE(sim.check(i, "global"));
  sim.run(kUsPerSecond);
  for (std::size_t i = 0; i < 6; ++i) ASSERT_TRUE(sim.check(i, "global"));
  sim.run(2 * kUsPerSecond);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(sim.remaining(i, "global"), 1000 - 12) << i;
    EXPECT_EQ(sim.node(i).limiter->ledger().size(), 1u) << i;
  }
  std::uint64_t gossiped = 0;
  for (std::size_t i = 0; i < 8; ++i) gossiped += sim.node(i).node->stats().entries_gossiped;
  EXPECT_GT(gossiped, 0u);
}

// Asks and crowd hints (docs/cluster.md, "Keys new at once": "Asks",
// "Crowd hints"). Where keys are routed, news of a key goes only to the
// nodes with an entry of it, so a node whose share refused the key before it
// spent on it would hear nothing: it asks (an own entry of nothing, sent to
// the key's owners), and the owners send it the key's news. Every node
// checks a new key once at the same instant; a rule's one shared key is
// probed strictly (its burst of 10 split `n` ways, no first request kept),
// so some are admitted and the rest refused, and every node, asker or
// spender, ends knowing everything the cluster admitted. An owner that knows at least
// FairShare::kToldCrowdOrigins recent origins of a key (asks included)
// tells a crowd with its news: with 20 nodes, not with 12.
TEST(ClusterNodeTest, NodesRefusedARoutedKeyAskForItsNewsAndOwnersTellACrowd) {
  for (const int n : {12, 20}) {
    ClusterOptions options;
    options.owners_per_key = 2;
    options.routed_min_members = 1;  // a small cluster routes too
    constexpr std::int64_t kNoRefill = 3600'000 * kUsPerSecond;
    RuleSet rules = global_rule(10, kNoRefill, 10);
    rules.rules[0].match[0].value.each = false;  // one key for the rule
    Sim sim(n, rules, 0.0, 29, options);
    sim.run(3 * kUsPerSecond);
    int admitted = 0;
    for (int i = 0; i < n; ++i) admitted += sim.check(static_cast<std::size_t>(i), "k") ? 1 : 0;
    std::uint64_t asks = 0;
    for (int i = 0; i < n; ++i) {
      asks += sim.node(static_cast<std::size_t>(i)).limiter->stats().share_asks;
    }
    ASSERT_GT(admitted, 0) << n;
    ASSERT_LT(admitted, n) << n;
    EXPECT_EQ(asks, static_cast<std::uint64_t>(n - admitted)) << n;
    sim.run(kUsPerSecond);
    std::uint64_t told = 0;
    std::uint64_t gossiped = 0;
    for (int i = 0; i < n; ++i) {
      const SimNode& node = sim.node(static_cast<std::size_t>(i));
      std::uint64_t known = 0;  // what this node knows the cluster admitted
      node.limiter->ledger().for_each_key([&](const std::string&, const Ledger::KeyState& state) {
        known += Ledger::consumed_sum(state);
      });
      EXPECT_EQ(known, static_cast<std::uint64_t>(admitted)) << n << " nodes, node " << i;
      EXPECT_EQ(sim.remaining(static_cast<std::size_t>(i), "k"), std::max(0, 10 - admitted))
          << n << " nodes, node " << i;
      told += node.limiter->stats().share_crowds_told;
      gossiped += node.node->stats().entries_gossiped;
    }
    if (n < static_cast<int>(FairShare::kToldCrowdOrigins)) {
      EXPECT_EQ(gossiped, 0u) << n;  // routed: the askers heard through the owners
      EXPECT_EQ(told, 0u) << n;
    } else {
      EXPECT_GT(told, 0u) << n;
    }
  }
}

}  // namespace
}  // namespace rlimit::core

namespace rlimit::core {
namespace {

// Replay protection end to end (replay_window.h): every payload node 1 was
// sent while node 2 consumed, left and came back, captured and delivered again later,
// changes nothing, whether the receiver kept its state or restarted.
TEST(ClusterNodeTest, ReplayedPayloadsChangeNothingAndAreCounted) {
  Sim sim(3, global_rule(100, 3600 * kUsPerSecond, 100), 0.0, 11);
  sim.run(2 * kUsPerSecond);
  ASSERT_EQ(sim.node(1).node->membership().live_peers().size(), 2u);
  sim.record();
  for (int k = 0; k < 10; ++k) ASSERT_TRUE(sim.check(2, "search"));
  sim.run(1 * kUsPerSecond);
  sim.leave(2);  // graceful: LEFT everywhere
  sim.run(1 * kUsPerSecond);
  ASSERT_EQ(sim.node(1).node->membership().member("n2")->state, MemberState::kLeft);
  sim.restart(2);
  sim.run(2 * kUsPerSecond);
  ASSERT_EQ(sim.node(1).node->membership().member("n2")->state, MemberState::kAlive);
  ASSERT_EQ(sim.remaining(1, "search"), 90);

  std::vector<std::string> to_node1;
  for (const auto& [to, payload] : sim.recorded()) {
    if (to == 1) to_node1.push_back(payload);
  }
  ASSERT_GT(to_node1.size(), 10u);
  const ClusterStats before = sim.node(1).node->stats();
  const std::uint64_t incarnation = sim.node(1).node->membership().member("n2")->incarnation;
  for (const std::string& payload : to_node1) sim.inject(1, payload);
  sim.run(1 * kUsPerSecond);
  const ClusterStats& after = sim.node(1).node->stats();
  // Each was refused: node 2's old incarnation, or taken already.
  EXPECT_EQ(
      (after.replay_duplicates + after.replay_old_incarnation + after.replay_below_window) -
          (before.replay_duplicates + before.replay_old_incarnation + before.replay_below_window),
      to_node1.size());
  EXPECT_EQ(sim.node(1).node->membership().member("n2")->state, MemberState::kAlive);
  EXPECT_EQ(sim.node(1).node->membership().member("n2")->incarnation, incarnation);
  EXPECT_EQ(sim.remaining(1, "search"), 90);
  // Misdirected: a message meant for node 1, sent to node 0 instead.
  const auto meant_for_n1 =
      std::find_if(to_node1.begin(), to_node1.end(), [](const std::string& p) {
        peer::v1::PeerMessage m;
        return m.ParseFromString(p) && m.to_id() == "n1";
      });
  ASSERT_NE(meant_for_n1, to_node1.end());
  const std::uint64_t misdirected = sim.node(0).node->stats().misdirected;
  sim.inject(0, *meant_for_n1);
  EXPECT_EQ(sim.node(0).node->stats().misdirected, misdirected + 1);
}

}  // namespace
}  // namespace rlimit::core
