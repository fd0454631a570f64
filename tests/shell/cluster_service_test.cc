// ClusterService end to end in one process: real core::ClusterNodes and
// Limiters, real loopback sockets, in gossip and mesh mode. Every wait is
// bounded by run_until.
#include "shell/cluster_service.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "loop.h"
#include "shell/clock.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using testing::run_until;

constexpr const char* kSecret = "cluster-service-test-secret-42";

core::RuleSet per_user_rules() {
  core::Rule rule;
  rule.name = "per-user";
  core::DescriptorMatch match;
  match.key = "user";
  match.value.each = true;
  rule.match.push_back(std::move(match));
  rule.params = {10, core::kUsPerSecond * 3600, 10};
  core::RuleSet rules;
  rules.rules.push_back(std::move(rule));
  return rules;
}

Keyring make_keyring() { return std::move(*Keyring::parse(kSecret, "test").keyring); }

config::ClusterSettings fast_settings(config::ClusterMode mode) {
  config::ClusterSettings s;
  s.mode = mode;
  s.name = "test-cluster";
  s.bind = "127.0.0.1:0";
  s.secret_file = "unused";
  s.gossip_interval_us = 5'000;
  s.probe_interval_us = 50'000;
  s.probe_timeout_us = 20'000;
  s.suspicion_timeout_us = 200'000;
  s.anti_entropy_interval_us = 100'000;
  s.reconnect_backoff_min_us = 5'000;
  s.reconnect_backoff_max_us = 50'000;
  return s;
}

struct Daemon {
  Daemon(asio::io_context& io, std::string id, config::ClusterSettings settings, std::uint64_t seed)
      : limiter(replicated(), per_user_rules()) {
    std::string error;
    service = ClusterService::start(io,
                                    ClusterServiceOptions{.settings = std::move(settings),
                                                          .node_id = std::move(id),
                                                          .incarnation = 1000 + seed,
                                                          .seed = seed,
                                                          .rules = {},
                                                          .rules_text = {},
                                                          .on_rules = {}},
                                    make_keyring(), limiter, error);
    EXPECT_NE(service, nullptr) << error;
  }
  static core::LimiterOptions replicated() {
    core::LimiterOptions options;
    options.replicated = true;
    return options;
  }
  std::size_t count(core::MemberState state) const {
    std::size_t n = 0;
    for (const core::Member& m : service->node().membership().members()) n += m.state == state;
    return n;
  }
  const core::Member* member(const std::string& id) const {
    for (const core::Member& m : service->node().membership().members()) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  bool check(const std::string& user, std::int64_t cost) {
    const core::Descriptor d{.key = "user", .value = user};
    core::CheckInput input;
    input.descriptors = std::span<const core::Descriptor>(&d, 1);
    input.cost = cost;
    core::CheckOutput out;
    // The daemon's one clock, as the cluster service and dispatch use: a
    // check on another clock sees the buckets the service charged at times
    // far from its own.
    limiter.check(input, steady_now_us(), out);
    return out.allowed;
  }

  core::Limiter limiter;
  std::unique_ptr<ClusterService> service;
};

class ClusterServiceTest : public ::testing::TestWithParam<config::ClusterMode> {};

TEST_P(ClusterServiceTest, ThreeNodesJoinShareCountersAndLeave) {
  asio::io_context io;
  Daemon a(io, "a", fast_settings(GetParam()), 1);
  ASSERT_NE(a.service, nullptr);
  config::ClusterSettings joining = fast_settings(GetParam());
  joining.seeds = {a.service->local_address()};
  Daemon b(io, "b", joining, 2);
  Daemon c(io, "c", joining, 3);
  ASSERT_NE(b.service, nullptr);
  ASSERT_NE(c.service, nullptr);

  ASSERT_TRUE(run_until(io,
                        [&] {
                          return a.count(core::MemberState::kAlive) == 3 &&
                                 b.count(core::MemberState::kAlive) == 3 &&
                                 c.count(core::MemberState::kAlive) == 3;
                        }))
      << "members: a " << a.service->node().membership().members().size() << ", b "
      << b.service->node().membership().members().size();
  EXPECT_EQ(a.member("b")->address, b.service->local_address());

  // a admits 6 of user u's 10 tokens; b and c learn it and admit at most 4.
  // (A key new to the cluster is probed for one news horizon at a third of
  // its balance on 3 nodes, docs/cluster.md "Fair shares": a spends as the
  // probe ends.)
  int spent = 0;
  ASSERT_TRUE(run_until(io, [&] {
    if (a.check("u", 1)) ++spent;
    return spent == 6;
  }));
  ASSERT_TRUE(run_until(io, [&] {
    return b.limiter.stats().remote_tokens_charged >= 6 &&
           c.limiter.stats().remote_tokens_charged >= 6;
  }));
  EXPECT_FALSE(b.check("u", 5));
  EXPECT_TRUE(c.check("u", 4));

  // Traffic went through the transports, authenticated.
  EXPECT_GT(a.service->counters().peer_packets_sent, 0u);
  EXPECT_GT(b.service->counters().peer_packets_received, 0u);
  EXPECT_EQ(b.service->counters().peer_bad_mac, 0u);
  EXPECT_EQ(a.service->node().stats().foreign_cluster, 0u);

  // c leaves gracefully: the others mark it LEFT, not dead.
  bool left = false;
  c.service->leave([&] { left = true; });
  ASSERT_TRUE(run_until(io, [&] { return left; }));
  EXPECT_TRUE(c.service->stopped());
  ASSERT_TRUE(run_until(io, [&] {
    return a.member("c")->state == core::MemberState::kLeft &&
           b.member("c")->state == core::MemberState::kLeft;
  }));
}

TEST_P(ClusterServiceTest, ANodeWithAnotherSecretIsKeptOut) {
  asio::io_context io;
  Daemon a(io, "a", fast_settings(GetParam()), 1);
  config::ClusterSettings joining = fast_settings(GetParam());
  joining.seeds = {a.service->local_address()};
  core::Limiter limiter(Daemon::replicated(), per_user_rules());
  std::string error;
  auto intruder = ClusterService::start(
      io,
      ClusterServiceOptions{.settings = joining,
                            .node_id = "x",
                            .incarnation = 1,
                            .seed = 9,
                            .rules = {},
                            .rules_text = {},
                            .on_rules = {}},
      std::move(*Keyring::parse("a-different-secret-entirely", "x").keyring), limiter, error);
  ASSERT_NE(intruder, nullptr) << error;
  ASSERT_TRUE(run_until(io, [&] {
    return a.service->counters().peer_unknown_key + a.service->counters().peer_bad_mac > 0;
  }));
  EXPECT_EQ(a.service->node().membership().members().size(), 1u);
  EXPECT_EQ(a.service->node().stats().packets_in, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, ClusterServiceTest,
                         ::testing::Values(config::ClusterMode::kGossip,
                                           config::ClusterMode::kMesh),
                         [](const auto& info) {
                           return info.param == config::ClusterMode::kMesh ? "Mesh" : "Gossip";
                         });

TEST(ClusterOptionsTest, MapsTheSettings) {
  ClusterServiceOptions options;
  options.settings = fast_settings(config::ClusterMode::kGossip);
  options.settings.bind = "10.0.0.1:7946";
  options.settings.seeds = {"10.0.0.2:7946"};
  options.settings.fanout = 4;
  options.settings.mtu_bytes = 1200;
  options.settings.rejoin_interval_us = 0;
  options.settings.replay_max_age_us = 5'000'000;
  options.settings.accept_unsequenced = true;
  options.settings.max_members = 10;
  options.settings.max_origins = 11;
  options.settings.max_ledger_keys = 12;
  options.settings.max_entries_per_key = 13;
  options.node_id = "n1";
  options.incarnation = 77;
  core::ClusterOptions out = make_cluster_options(options, "10.0.0.1:7946");
  EXPECT_EQ(out.cluster_name, "test-cluster");
  EXPECT_EQ(out.membership.node_id, "n1");
  EXPECT_EQ(out.membership.address, "10.0.0.1:7946");
  EXPECT_EQ(out.membership.incarnation, 77u);
  EXPECT_EQ(out.membership.seeds, options.settings.seeds);
  EXPECT_EQ(out.membership.probe_interval_us, 50'000);
  EXPECT_EQ(out.membership.suspicion_timeout_us, 200'000);
  EXPECT_EQ(out.membership.rejoin_interval_us, 0);
  EXPECT_EQ(out.fanout, 4u);
  EXPECT_EQ(out.max_payload_bytes, 1200u - kEnvelopeOverheadBytes);
  EXPECT_EQ(out.gossip_interval_us, 5'000);
  EXPECT_EQ(out.anti_entropy_interval_us, 100'000);
  EXPECT_EQ(out.replay.max_age_us, 5'000'000);
  EXPECT_TRUE(out.replay.accept_unsequenced);
  EXPECT_EQ(out.replay.max_senders, 2u * 10 + 64);
  EXPECT_EQ(out.ledger_bounds.max_origins, 11u);
  EXPECT_EQ(out.ledger_bounds.max_keys, 12u);
  EXPECT_EQ(out.ledger_bounds.max_entries_per_key, 13u);

  options.settings.mode = config::ClusterMode::kMesh;
  EXPECT_EQ(make_cluster_options(options, "x").fanout, 0u);  // mesh: every live peer

  options.settings.advertise = "node1.example:7946";
  EXPECT_EQ(make_cluster_options(options, "10.0.0.1:7946").membership.address,
            "node1.example:7946");
  options.settings.advertise.clear();
  options.settings.bind = "127.0.0.1:0";  // the kernel's port is what peers need
  EXPECT_EQ(make_cluster_options(options, "127.0.0.1:40123").membership.address, "127.0.0.1:40123");
}

TEST(ClusterOptionsTest, TickInterval) {
  config::ClusterSettings s;
  s.gossip_interval_us = 20'000;
  EXPECT_EQ(tick_interval_us(s), 5'000);
  s.gossip_interval_us = 2'000;
  EXPECT_EQ(tick_interval_us(s), 2'000);
  s.gossip_interval_us = 10;
  EXPECT_EQ(tick_interval_us(s), 1'000);
}

}  // namespace
}  // namespace rlimit::shell
