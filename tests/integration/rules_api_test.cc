// The rules API with real daemons: rlimitctl rules show / validate / apply on
// one node (located errors, all-or-nothing applies, state kept, persisted
// across a restart, a failed persist changing nothing), and a 3-node gossip
// cluster where an apply on one node is in force on all three within 2 s,
// survives restarting every node, and reaches a node started later with an
// older file (docs/cluster.md, "Rules across the cluster").
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "rlimit/client.h"
#include "support/daemon_process.h"

namespace rlimit::testing {
namespace {

constexpr const char* kFileRules = R"([[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1h"
)";

// Keeps per-user unchanged and adds per-zone.
constexpr const char* kAppliedRules = R"([[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1h"

[[rule]]
name = "per-zone"
match = { zone = { each = true } }
limit = 1
period = "1h"
)";


std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Client make_client(const std::string& socket) {
  ClientOptions options;
  options.socket_path = socket;
  options.timeout_ms = 2000;
  options.reconnect_backoff_min_ms = 1;
  return Client(options);
}

// Whether a check of `descriptor` on `socket` is decided by rule `rule`.
bool decided_by(const std::string& socket, const Descriptor& descriptor, const std::string& rule) {
  Client c = make_client(socket);
  CheckRequest request;
  request.descriptors = {descriptor};
  const Decision d = c.peek(request);
  for (const RuleStatus& r : d.rules) {
    if (r.name == rule) return true;
  }
  return false;
}

RunResult rlimitctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {program_path("rlimitctl")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, std::chrono::seconds(10));
}

// ----- one node --------------------------------------------------------------

class RulesApiTest : public ::testing::Test {
 protected:
  void start(const std::string& state_file) {
    socket_ = dir_.file("rlimitd.sock");
    config_ = dir_.write("rlimitd.toml", "[daemon]\nrules_state_file = \"" + state_file +
                                             "\"\nshutdown_grace = \"1s\"\n\n" + kFileRules);
    daemon_ = std::make_unique<DaemonProcess>(
        dir_, std::vector<std::string>{"--config", config_, "--socket", socket_, "--node-id", "n1"},
        "rlimitd-" + std::to_string(starts_++) + ".log");
    ASSERT_TRUE(daemon_->wait_ready(socket_)) << daemon_->log();
  }
  void TearDown() override {
    if (daemon_ && daemon_->running()) daemon_->stop(SIGTERM, std::chrono::seconds(5));
  }

  TempDir dir_;
  std::string socket_;
  std::string config_;
  std::unique_ptr<DaemonProcess> daemon_;
  int starts_ = 0;
};

TEST_F(RulesApiTest, ShowValidateApplyPersistRestart) {
  const std::string state = dir_.file("rules-state.toml");
  start(state);
  RunResult shown = rlimitctl({"--socket", socket_, "rules", "show"});
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("version 0 from n1"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("per-user"), std::string::npos) << shown.output;

  // Every error located, nothing changed.
  const std::string bad =
      dir_.write("bad.toml",
                 "[daemon]\nlog_level = \"debug\"\n\n[[rule]]\nname = \"x\"\n"
                 "match = { zone = { each = true } }\nlimit = -3\nperiod = \"1h\"\n");
  RunResult validated = rlimitctl({"--socket", socket_, "rules", "validate", bad});
  EXPECT_EQ(validated.exit_code, 2) << validated.output;
  EXPECT_NE(validated.output.find(bad + ":1:"), std::string::npos) << validated.output;
  EXPECT_NE(validated.output.find("only [[rule]] and [[exempt]]"), std::string::npos)
      << validated.output;
  EXPECT_NE(validated.output.find(bad + ":7:"), std::string::npos) << validated.output;
  RunResult refused = rlimitctl({"--socket", socket_, "rules", "apply", bad});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  Client c = make_client(socket_);
  ASSERT_TRUE(c.rules().has_value());
  EXPECT_EQ(c.rules()->version, 0u);
  EXPECT_FALSE(::access(state.c_str(), F_OK) == 0) << "an invalid apply wrote the state file";

  const std::string good = dir_.write("good.toml", kAppliedRules);
  RunResult valid = rlimitctl({"--socket", socket_, "rules", "validate", good});
  EXPECT_EQ(valid.exit_code, 0) << valid.output;
  EXPECT_EQ(c.rules()->version, 0u);  // validate changes nothing

  // Use up per-user for alice: the apply keeps that rule's state.
  EXPECT_TRUE(c.check({{"user", "alice"}}).allowed);
  EXPECT_TRUE(c.check({{"user", "alice"}}).allowed);
  EXPECT_FALSE(c.check({{"user", "alice"}}).allowed);
  RunResult applied = rlimitctl({"--socket", socket_, "rules", "apply", good, "--json"});
  EXPECT_EQ(applied.exit_code, 0) << applied.output;
  EXPECT_NE(applied.output.find("\"kept\": 1"), std::string::npos) << applied.output;
  EXPECT_FALSE(c.check({{"user", "alice"}}).allowed);
  EXPECT_TRUE(c.check({{"zone", "eu"}}).allowed);
  EXPECT_FALSE(c.check({{"zone", "eu"}}).allowed);
  const std::optional<RulesResult> now = c.rules();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->version, 1u);
  EXPECT_EQ(now->origin, "n1");
  EXPECT_EQ(now->text, kAppliedRules);
  EXPECT_EQ(now->digest.size(), 32u);
  const std::string persisted = read_file(state);
  EXPECT_NE(persisted.find("# version = 1\n"), std::string::npos) << persisted;
  EXPECT_NE(persisted.find(kAppliedRules), std::string::npos) << persisted;

  // A restart comes back with the applied rules, not the file's.
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);
  start(state);
  Client again = make_client(socket_);
  const std::optional<RulesResult> restored = again.rules();
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->version, 1u);
  EXPECT_EQ(restored->digest, now->digest);
  EXPECT_TRUE(decided_by(socket_, {"zone", "us"}, "per-zone"));

  // SIGHUP keeps the applied rules (the file's are version 0).
  daemon_->signal(SIGHUP);
  EXPECT_TRUE(eventually([&] { return daemon_->log().find("stay in force") != std::string::npos; },
                         std::chrono::seconds(5)))
      << daemon_->log();
  EXPECT_EQ(again.rules()->version, 1u);
  EXPECT_TRUE(decided_by(socket_, {"zone", "us"}, "per-zone"));
}

TEST_F(RulesApiTest, FailedPersistChangesNothing) {
  // A state file whose directory does not exist cannot be written.
  start(dir_.file("missing-dir/rules.toml"));
  const std::string good = dir_.write("good.toml", kAppliedRules);
  RunResult applied = rlimitctl({"--socket", socket_, "rules", "apply", good});
  EXPECT_EQ(applied.exit_code, 3) << applied.output;
  EXPECT_NE(applied.output.find("cannot persist"), std::string::npos) << applied.output;
  Client c = make_client(socket_);
  EXPECT_EQ(c.rules()->version, 0u);
  EXPECT_FALSE(decided_by(socket_, {"zone", "eu"}, "per-zone"));
  const std::optional<DaemonStatus> status = c.status();
  ASSERT_TRUE(status.has_value());
  std::uint64_t failures = 0;
  for (const auto& [name, value] : status->counters) {
    if (name == "rules_persist_failures") failures = value;
  }
  EXPECT_EQ(failures, 1u);
}

// ----- a gossip cluster ------------------------------------------------------

class RulesClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = write_cluster_secret(dir_);
  }
  void TearDown() override {
    for (auto& d : daemons_) {
      if (d && d->running()) d->stop(SIGTERM, std::chrono::seconds(5));
    }
  }

  void add_node(const std::string& rules) {
    const std::size_t i = ports_.size();
    ports_.push_back(free_port());
    ASSERT_GT(ports_.back(), 0);
    sockets_.push_back(dir_.file("n" + std::to_string(i) + ".sock"));
    configs_.push_back(dir_.write("n" + std::to_string(i) + ".toml",
                                  "[daemon]\nrules_state_file = \"" +
                                      dir_.file("n" + std::to_string(i) + "-rules.toml") +
                                      "\"\nshutdown_grace = \"1s\"\n\n" + rules));
    daemons_.emplace_back();
    start_node(i);
  }

  void start_node(std::size_t i) {
    const std::string seeds = "127.0.0.1:" + std::to_string(ports_[0]) + ",127.0.0.1:" +
                              std::to_string(ports_[std::min<std::size_t>(1, ports_.size() - 1)]);
    daemons_[i] = std::make_unique<DaemonProcess>(
        dir_,
        std::vector<std::string>{"--config", configs_[i], "--socket", sockets_[i], "--node-id",
                                 "n" + std::to_string(i), "--cluster-mode", "gossip", "--bind",
                                 "127.0.0.1:" + std::to_string(ports_[i]), "--seeds", seeds,
                                 "--secret-file", secret_},
        "n" + std::to_string(i) + "-" + std::to_string(starts_++) + ".log");
    ASSERT_TRUE(daemons_[i]->wait_ready(sockets_[i])) << daemons_[i]->log();
  }

  std::uint64_t version(std::size_t i) {
    Client c = make_client(sockets_[i]);
    const std::optional<RulesResult> r = c.rules();
    return r ? r->version : ~std::uint64_t{0};
  }

  bool alive_members(std::size_t i, std::size_t n) {
    Client c = make_client(sockets_[i]);
    const auto members = c.members();
    if (!members) return false;
    std::size_t alive = 0;
    for (const auto& m : members->members) alive += m.state == "alive" ? 1 : 0;
    return alive == n;
  }

  std::string logs() {
    std::string all;
    for (auto& d : daemons_) all += d->log() + "\n----\n";
    return all;
  }

  TempDir dir_;
  std::string secret_;
  std::vector<int> ports_;
  std::vector<std::string> sockets_;
  std::vector<std::string> configs_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  int starts_ = 0;
};

TEST_F(RulesClusterTest, ApplyReachesEveryNodeSurvivesRestartAndLateJoiner) {
  for (int i = 0; i < 3; ++i) add_node(kFileRules);
  ASSERT_TRUE(eventually([&] { return alive_members(0, 3) && alive_members(2, 3); },
                         std::chrono::seconds(10)))
      << logs();

  const std::string good = dir_.write("good.toml", kAppliedRules);
  RunResult applied = rlimitctl({"--socket", sockets_[1], "rules", "apply", good});
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  const auto applied_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < 3; ++i) {
          if (version(i) != 1 ||
              !decided_by(sockets_[i], {"zone", "z" + std::to_string(i)}, "per-zone")) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(2)))
      << logs();
  EXPECT_LE(std::chrono::steady_clock::now() - applied_at, std::chrono::milliseconds(2500));

  // Every member advertises one digest, seen from every node.
  std::string digest = make_client(sockets_[1]).rules()->digest;
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < 3; ++i) {
          Client c = make_client(sockets_[i]);
          const auto members = c.members();
          if (!members || members->members.size() != 3) return false;
          for (const ClusterMember& m : members->members) {
            if (m.rules_digest != digest || m.rules_version != 1 || m.rules_origin != "n1") {
              return false;
            }
          }
        }
        return true;
      },
      std::chrono::seconds(5)))
      << logs();
  RunResult members = rlimitctl({"--socket", sockets_[0], "members"});
  EXPECT_EQ(members.exit_code, 0);
  EXPECT_NE(members.output.find("v1 "), std::string::npos) << members.output;

  // Every node restarted: each comes back with version 1 from its state file.
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(daemons_[i]->stop(SIGTERM), 0);
  for (std::size_t i = 0; i < 3; ++i) start_node(i);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(version(i), 1u) << logs();
    EXPECT_EQ(make_client(sockets_[i]).rules()->digest, digest);
  }

  // A node started later with the older file converges to the cluster's newest.
  add_node(kFileRules);
  EXPECT_TRUE(eventually(
      [&] {
        return version(3) == 1 && decided_by(sockets_[3], {"zone", "late"}, "per-zone");
      },
      std::chrono::seconds(10)))
      << logs();
  EXPECT_EQ(make_client(sockets_[3]).rules()->digest, digest);
  const std::string persisted = read_file(dir_.file("n3-rules.toml"));
  EXPECT_NE(persisted.find("# version = 1\n# origin = n1\n"), std::string::npos) << persisted;
}

TEST_F(RulesClusterTest, ConcurrentAppliesConvergeOnTheHighestVersion) {
  for (int i = 0; i < 2; ++i) add_node(kFileRules);
  ASSERT_TRUE(eventually([&] { return alive_members(0, 2) && alive_members(1, 2); },
                         std::chrono::seconds(10)))
      << logs();
  // Both apply version 1 (neither has seen the other's yet, or one has: then
  // that one takes version 2). Either way the highest (version, origin) wins.
  const std::string a = dir_.write("a.toml", kAppliedRules);
  const std::string b = dir_.write("b.toml", std::string(kAppliedRules) + "\n# from n1\n");
  ASSERT_EQ(rlimitctl({"--socket", sockets_[0], "rules", "apply", a}).exit_code, 0);
  ASSERT_EQ(rlimitctl({"--socket", sockets_[1], "rules", "apply", b}).exit_code, 0);
  ASSERT_TRUE(eventually(
      [&] {
        const auto r0 = make_client(sockets_[0]).rules();
        const auto r1 = make_client(sockets_[1]).rules();
        return r0 && r1 && r0->digest == r1->digest && r0->version == r1->version;
      },
      std::chrono::seconds(5)))
      << logs();
  const auto r = make_client(sockets_[0]).rules();
  // n1 applied last, so its (version, origin) is the highest either way.
  EXPECT_EQ(r->origin, "n1");
  EXPECT_NE(r->text.find("# from n1"), std::string::npos);
}

TEST_F(RulesClusterTest, AnApplyPeersWouldRefuseForItsSizeIsRefusedHere) {
  // Peers fetch at most [cluster] max_rules_bytes; a larger document applied
  // here would split the cluster, so it is refused before anything changes.
  add_node("[cluster]\nmax_rules_bytes = 1024\n\n" + std::string(kFileRules));
  std::string big = kAppliedRules;
  big += "\n# " + std::string(1200, 'x') + "\n";
  const std::string file = dir_.write("big.toml", big);
  const RunResult refused = rlimitctl({"--socket", sockets_[0], "rules", "apply", file});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("max_rules_bytes"), std::string::npos) << refused.output;
  EXPECT_EQ(version(0), 0u);
  // The same rules without the padding apply.
  const std::string small = dir_.write("small.toml", kAppliedRules);
  EXPECT_EQ(rlimitctl({"--socket", sockets_[0], "rules", "apply", small}).exit_code, 0);
  EXPECT_EQ(version(0), 1u);
}

}  // namespace
}  // namespace rlimit::testing
