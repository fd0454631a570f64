// The /metrics exposition (shell/metrics.h) from a real Limiter and
// Dispatcher, read back line by line as Prometheus would; the rules digest
// (shell/rules_digest.h), /readyz's decisions (shell/health.h) and the
// decision-time histogram (shell/latency_histogram.h).
#include "shell/metrics.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/cluster_node.h"
#include "core/limiter.h"
#include "rlimit/v1/client.pb.h"
#include "shell/dispatch.h"
#include "shell/grpc_face.h"
#include "shell/health.h"
#include "shell/latency_histogram.h"
#include "shell/redis_service.h"
#include "shell/rules_digest.h"

namespace rlimit::shell {
namespace {

constexpr const char* kRules = R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1m"

[[rule]]
name = "shadow-search-of-the-catalogue"
match = { path = "/search" }
limit = 1
period = "1h"
algorithm = "fixed_window"
mode = "shadow"
)";

core::RuleSet load_rules(const char* text) {
  config::LoadResult loaded = config::load_config(text, "test.toml");
  EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  return std::move(loaded.config.rules);
}

// One exposition read back: families with their type and help, and samples
// by their full text before the value ("name{labels}").
struct Parsed {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, std::string> help;
  std::map<std::string, std::string> samples;  // "name{labels}" -> value
  std::vector<std::string> problems;
};

// The family a sample belongs to: histograms' _bucket/_sum/_count are theirs.
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.ends_with(s)) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

// Checks what promtool's parser checks that a typo could break: each family
// declared once with HELP then TYPE before its samples, samples of a family
// contiguous, label syntax, and a value on every line.
Parsed parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string line;
  std::string current;  // the family whose samples may follow
  std::set<std::string> finished;
  int lines = 0;
  while (std::getline(in, line) && ++lines < 100'000) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      if (p.help.contains(name)) p.problems.push_back("HELP twice: " + name);
      p.help[name] = rest.substr(name.size() + 1);
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      if (name != current) p.problems.push_back("TYPE without its HELP: " + name);
      if (p.type.contains(name)) p.problems.push_back("TYPE twice: " + name);
      p.type[name] = rest.substr(name.size() + 1);
      continue;
    }
    if (line.empty() || line[0] == '#') {
      p.problems.push_back("unexpected line: " + line);
      continue;
    }
    std::size_t end = line.find_first_of("{ ");
    const std::string name = line.substr(0, end);
    if (line[end] == '{') {
      // Label values may hold escaped quotes: walk them.
      std::size_t i = end + 1;
      while (i < line.size() && line[i] != '}') {
        const std::size_t eq = line.find("=\"", i);
        if (eq == std::string::npos) break;
        i = eq + 2;
        while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
        ++i;  // the closing quote
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') {
        p.problems.push_back("bad labels: " + line);
        continue;
      }
      end = i + 1;
    }
    if (end >= line.size() || line[end] != ' ' || end + 1 >= line.size()) {
      p.problems.push_back("no value: " + line);
      continue;
    }
    const std::string family = family_of(name, p.type);
    if (family != current) p.problems.push_back("sample outside its family: " + line);
    if (finished.contains(family)) p.problems.push_back("family split: " + family);
    p.samples[line.substr(0, end)] = line.substr(end + 1);
  }
  return p;
}

class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest()
      : limiter_(core::LimiterOptions{.max_keys = 1000}, load_rules(kRules)),
        dispatcher_(limiter_, settings_, counters_, status_, lease_tokens_) {
    status_.node_id = "node-\"a\"";
    status_.started_us = 1'000'000;
  }

  void check(std::string_view user, std::string_view path) {
    const core::Descriptor d[] = {{"user", user}, {"path", path}};
    limiter_.check({std::span(d, 1)}, now_, out_);  // the user alone
    if (!path.empty()) limiter_.check({std::span(d, 2)}, now_, out_);
  }

  Parsed render(bool ready = true) {
    std::string text;
    write_metrics({.version = "1.2.3",
                   .limiter = limiter_,
                   .counters = counters_,
                   .status = status_,
                   .decision_times = dispatcher_.decision_times(),
                   .rules_digest = rules_digest(limiter_.rules()),
                   .ready = ready,
                   .now = now_},
                  text);
    text_ = text;
    return parse(text);
  }

  config::DaemonSettings settings_;
  ShellCounters counters_;
  StatusContext status_;
  LeaseTokens lease_tokens_ = LeaseTokens::with_random_secret();
  core::Limiter limiter_;
  Dispatcher dispatcher_;
  core::CheckOutput out_;
  core::TimeUs now_ = 5'000'000;
  std::string text_;
};

// A cluster node of one (its seed never answers), for the cluster families.
struct LoneClusterNode {
  LoneClusterNode()
      : limiter(core::LimiterOptions{.replicated = true}, load_rules(kRules)),
        node(options(), limiter, 7) {
    limiter.enable_replication("n1", 1, 0);
    node.start(0);
    node.tick(0);
  }
  static core::ClusterOptions options() {
    core::ClusterOptions o;
    o.membership.node_id = "n1";
    o.membership.address = "127.0.0.1:1";
    o.membership.seeds = {"127.0.0.1:2"};
    return o;
  }
  core::Limiter limiter;
  core::ClusterNode node;
};

TEST_F(MetricsTest, EveryStatusCounterHasAMetricOfOneType) {
  // Whatever status reports with every part running (a counter added to
  // fill_status later fails here until metrics.cc describes it).
  LoneClusterNode cluster;
  PeerCounters peer;
  GrpcCounters grpc;
  StatusContext context = status_;
  context.cluster = &cluster.node;
  context.peer_counters = &peer;
  context.grpc_counters = &grpc;
  v1::StatusResponse status;
  fill_status(context, cluster.limiter, counters_, now_, status);
  std::vector<std::string> names;
  for (const v1::Counter& counter : status.counters()) names.push_back(counter.name());
  ASSERT_GT(names.size(), 140u);
  std::map<std::string_view, MetricType> types;
  std::set<std::pair<std::string_view, std::string_view>> labelled;
  for (const std::string& name : names) {
    const StatusMetric* m = metric_for_status(name);
    ASSERT_NE(m, nullptr) << name << ": describe it in metrics.cc (kStatusMetrics)";
    EXPECT_TRUE(m->family.starts_with("rlimit_")) << name;
    EXPECT_EQ(m->type == MetricType::kCounter, m->family.ends_with("_total")) << name;
    auto [it, inserted] = types.emplace(m->family, m->type);
    EXPECT_EQ(it->second, m->type) << m->family << " mixes types";
    // Two status counters never land on one sample.
    EXPECT_TRUE(labelled.emplace(m->family, m->label_value).second) << name;
  }
  EXPECT_EQ(metric_for_status("no_such_counter"), nullptr);
  EXPECT_EQ(metric_for_status("connections_open")->type, MetricType::kGauge);
  EXPECT_EQ(metric_for_status("grpc_pending")->type, MetricType::kGauge);
  EXPECT_EQ(metric_for_status("busy_poll_cpu_us")->family, "rlimit_busy_poll_cpu_seconds_total");
}

TEST_F(MetricsTest, EveryRedisModeCounterHasAMetricOfOneType) {
  boost::asio::io_context io;  // never run: no batch is ever sent
  core::Limiter limiter(core::LimiterOptions{.replicated = true}, core::RuleSet{});
  std::string error;
  std::unique_ptr<RedisService> redis =
      RedisService::start(io, config::RedisSettings{}, "n1", 1, limiter, error);
  ASSERT_NE(redis, nullptr) << error;
  std::vector<std::string> names;
  redis->for_each_counter([&](std::string_view name, std::uint64_t) { names.emplace_back(name); });
  ASSERT_GT(names.size(), 30u);
  std::set<std::pair<std::string_view, std::string_view>> samples;
  for (const std::string& name : names) {
    const StatusMetric* m = metric_for_status(name);
    ASSERT_NE(m, nullptr) << name << ": describe it in metrics.cc (kStatusMetrics)";
    EXPECT_TRUE(m->family.starts_with("rlimit_store_") || m->family.starts_with("rlimit_redis_"))
        << name;
    EXPECT_EQ(m->type == MetricType::kCounter, m->family.ends_with("_total")) << name;
    EXPECT_TRUE(samples.emplace(m->family, m->label_value).second) << name;
  }
  EXPECT_EQ(metric_for_status("store_healthy")->type, MetricType::kGauge);
  EXPECT_EQ(metric_for_status("redis_bytes_in")->label_value, "in");
  redis->stop();
}

TEST(MetricsFormat, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help("a\"b\\c\nd"), "a\"b\\\\c\\nd");  // quotes stay in HELP
  EXPECT_EQ(format_value(0.0), "0");
  EXPECT_EQ(format_value(1e-6), "1e-06");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(1.0 / 0.0), "+Inf");
}

TEST_F(MetricsTest, ExpositionIsWellFormedAndComplete) {
  const Parsed p = render();
  EXPECT_TRUE(p.problems.empty()) << p.problems[0] << "\n" << text_;
  EXPECT_EQ(p.type.at("rlimit_checks_total"), "counter");
  EXPECT_EQ(p.type.at("rlimit_connections_open"), "gauge");
  EXPECT_EQ(p.type.at("rlimit_decision_seconds"), "histogram");
  EXPECT_EQ(p.samples.at("rlimit_build_info{version=\"1.2.3\",node=\"node-\\\"a\\\"\","
                         "cluster_mode=\"none\"}"),
            "1");
  EXPECT_EQ(p.samples.at("rlimit_ready"), "1");
  EXPECT_EQ(p.samples.at("rlimit_uptime_seconds"), "4");
  EXPECT_EQ(p.samples.at("rlimit_max_keys"), "1000");
  EXPECT_EQ(p.samples.at("rlimit_rules"), "2");
  EXPECT_EQ(p.samples.at("rlimit_rules_digest"), std::to_string(rules_digest(limiter_.rules())));
  // Without a cluster there are no cluster families, and no untyped fallbacks.
  EXPECT_FALSE(p.type.contains("rlimit_cluster_members"));
  for (const auto& [family, type] : p.type) EXPECT_NE(type, "untyped") << family;
  EXPECT_EQ(render(false).samples.at("rlimit_ready"), "0");
}

TEST_F(MetricsTest, CountsPerRuleAndKeys) {
  check("alice", "");  // per-user allows
  check("alice", "");  // allows (limit 2)
  check("alice", "");  // denies
  check("bob",
        "/search");  // per-user allows twice (bob alone, bob on /search);
                     // shadow-search-of-the-catalogue allows
  const Parsed p = render();
  ASSERT_TRUE(p.problems.empty()) << p.problems[0];
  const auto rule = [&](const char* family, const char* name, const char* algorithm) {
    return p.samples.at(std::string(family) + "{rule=\"" + name + "\",algorithm=\"" + algorithm +
                        "\"}");
  };
  EXPECT_EQ(rule("rlimit_rule_checks_total", "per-user", "token_bucket"), "5");
  EXPECT_EQ(rule("rlimit_rule_allowed_total", "per-user", "token_bucket"), "4");
  EXPECT_EQ(rule("rlimit_rule_denied_total", "per-user", "token_bucket"), "1");
  EXPECT_EQ(rule("rlimit_rule_checks_total", "shadow-search-of-the-catalogue", "fixed_window"),
            "1");
  EXPECT_EQ(rule("rlimit_rule_allowed_total", "shadow-search-of-the-catalogue", "fixed_window"),
            "1");
  EXPECT_EQ(rule("rlimit_rule_over_limit_total", "shadow-search-of-the-catalogue", "fixed_window"),
            "0");
  EXPECT_EQ(rule("rlimit_rule_checks_total", "<inline>", "token_bucket"), "0");
  check("bob",
        "/search");  // shadow-search-of-the-catalogue is over its limit of 1: admitted, counted
  const Parsed again = render();
  EXPECT_EQ(again.samples.at("rlimit_rule_over_limit_total{rule=\"shadow-search-of-the-catalogue\","
                             "algorithm=\"fixed_window\"}"),
            "1");
  EXPECT_EQ(again.samples.at("rlimit_checks_total"), std::to_string(limiter_.stats().checks));
  EXPECT_EQ(again.samples.at("rlimit_keys"), "3");  // alice, bob, /search
  EXPECT_EQ(again.samples.at("rlimit_key_table_fill_ratio"), "0.003");
}

TEST_F(MetricsTest, HistogramBucketsAreCumulative) {
  LatencyHistogram& h = dispatcher_.decision_times().unix_socket;
  h.observe(500);         // <= 1us
  h.observe(1'000);       // <= 1us (bounds are inclusive)
  h.observe(3'000, 2);    // <= 5us, twice
  h.observe(20'000'000);  // above 10ms: +Inf only
  const Parsed p = render();
  ASSERT_TRUE(p.problems.empty()) << p.problems[0];
  const auto bucket = [&](const char* le) {
    return p.samples.at(std::string("rlimit_decision_seconds_bucket{face=\"unix\",le=\"") + le +
                        "\"}");
  };
  EXPECT_EQ(bucket("1e-06"), "2");
  EXPECT_EQ(bucket("2.5e-06"), "2");
  EXPECT_EQ(bucket("5e-06"), "4");
  EXPECT_EQ(bucket("0.01"), "4");
  EXPECT_EQ(bucket("+Inf"), "5");
  EXPECT_EQ(p.samples.at("rlimit_decision_seconds_count{face=\"unix\"}"), "5");
  EXPECT_EQ(p.samples.at("rlimit_decision_seconds_sum{face=\"unix\"}"), "0.0200075");
  EXPECT_EQ(p.samples.at("rlimit_decision_seconds_count{face=\"http\"}"), "0");
}

TEST(LatencyHistogram, NegativeDurationsCountAsZero) {
  LatencyHistogram h;
  h.observe(-5);
  EXPECT_EQ(h.counts[0], 1u);
  EXPECT_EQ(h.sum_ns, 0u);
}

TEST_F(MetricsTest, ClusterFamiliesFromALiveClusterNode) {
  LoneClusterNode cluster;
  core::Limiter& limiter = cluster.limiter;
  PeerCounters peer;
  peer.peer_bad_mac = 3;
  peer.peer_bytes_sent = 40;
  StatusContext status = status_;
  status.cluster_mode = "gossip";
  status.cluster = &cluster.node;
  status.peer_counters = &peer;
  std::string text;
  write_metrics({.version = "v",
                 .limiter = limiter,
                 .counters = counters_,
                 .status = status,
                 .decision_times = dispatcher_.decision_times(),
                 .now = now_},
                text);
  const Parsed p = parse(text);
  ASSERT_TRUE(p.problems.empty()) << p.problems[0] << "\n" << text;
  EXPECT_EQ(p.type.at("rlimit_cluster_members"), "gauge");
  EXPECT_EQ(p.samples.at("rlimit_cluster_members{state=\"alive\"}"), "1");  // itself
  EXPECT_EQ(p.samples.at("rlimit_cluster_members{state=\"dead\"}"), "0");
  EXPECT_EQ(p.samples.at("rlimit_peer_dropped_total{cause=\"bad_mac\"}"), "3");
  EXPECT_EQ(p.samples.at("rlimit_peer_dropped_total{cause=\"foreign_cluster\"}"), "0");
  EXPECT_EQ(p.samples.at("rlimit_peer_bytes_total{direction=\"out\"}"), "40");
  EXPECT_TRUE(p.samples.contains("rlimit_cluster_bytes_total{direction=\"out\"}"));
  EXPECT_TRUE(p.samples.contains("rlimit_gossip_backlog_keys"));
  EXPECT_TRUE(p.samples.contains("rlimit_members_joins_sent_total"));
  // Fair shares' crowding, one family from the limiter's stats and the ledger's.
  EXPECT_EQ(p.type.at("rlimit_share_crowded_total"), "counter");
  EXPECT_EQ(p.samples.at("rlimit_share_crowded_total{by=\"origins\"}"), "0");
  EXPECT_EQ(p.samples.at("rlimit_share_crowded_total{by=\"burst\"}"), "0");
  EXPECT_EQ(p.samples.at("rlimit_share_crowded_total{by=\"new_keys\"}"), "0");
  for (const std::string name :
       {"rlimit_share_keys_crowded_total", "rlimit_share_idle_raise_capped_total",
        "rlimit_share_sparse_raised_total", "rlimit_share_sparse_raise_capped_total",
        "rlimit_share_contended_balance_total", "rlimit_share_askers_floored_total",
        "rlimit_share_debts_carried_total", "rlimit_share_debt_carried_units_total",
        "rlimit_share_credits_carried_total", "rlimit_share_credit_carried_units_total",
        "rlimit_share_debts_capped_total", "rlimit_share_passes_thinned_total",
        "rlimit_share_straggler_wakes_total", "rlimit_share_crowds_disproved_total",
        "rlimit_share_log_epochs_cut_total", "rlimit_share_single_crowd_epochs_total"}) {
    EXPECT_EQ(p.type.at(name), "counter") << name;
    EXPECT_EQ(p.samples.at(name), "0") << name;
  }
}

TEST(RulesDigest, SameRulesSameDigestWhateverTheOrder) {
  const core::RuleSet a = load_rules(kRules);
  core::RuleSet b = a;
  std::swap(b.rules[0], b.rules[1]);
  b.rules[0].where = {"other.toml", 99, 1};
  EXPECT_EQ(rules_digest(a), rules_digest(b));
  EXPECT_LT(rules_digest(a), std::uint64_t{1} << 52);
  core::RuleSet c = a;
  c.rules[0].params.limit = 3;
  EXPECT_NE(rules_digest(a), rules_digest(c));
  core::RuleSet d = a;
  d.rules[1].options.throttle.mode = core::alg::ThrottleMode::kHard;
  EXPECT_NE(rules_digest(a), rules_digest(d));
  core::RuleSet e = a;
  e.rules[0].name = "per-user2";
  EXPECT_NE(rules_digest(a), rules_digest(e));
  EXPECT_NE(rules_digest(a), rules_digest(core::RuleSet{}));
}

TEST(Readiness, SingleNodeIsReadyWithRulesAndNotWhileStopping) {
  Readiness r = readiness({.rules_loaded = true, .rules = 2});
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.answer.status, 200u);
  EXPECT_EQ(boost::json::parse(r.answer.body).at("ready").as_bool(), true);
  r = readiness({.rules_loaded = true, .rules = 2, .stopping = true});
  EXPECT_EQ(r.answer.status, 503u);
  EXPECT_EQ(boost::json::parse(r.answer.body).at("reason").as_string(), "shutting down");
  EXPECT_EQ(readiness({.rules_loaded = false}).answer.status, 503u);
}

TEST(Readiness, ClusterNodeWaitsForASeedOrTheTimeout) {
  ReadinessInput in{.rules_loaded = true,
                    .rules = 1,
                    .clustered = true,
                    .started_us = 1'000'000,
                    .now = 1'000'000 + 29'999'999,
                    .ready_after_seeds_unreachable_us = 30'000'000};
  Readiness r = readiness(in);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.answer.status, 503u);
  const boost::json::value body = boost::json::parse(r.answer.body);
  EXPECT_EQ(body.at("joined").as_bool(), false);
  EXPECT_EQ(body.at("ready_after_seeds_unreachable_ms").to_number<std::int64_t>(), 30'000);
  in.now += 1;  // the seeds stayed silent for the whole wait: serve alone
  EXPECT_TRUE(readiness(in).ready);
  in.now = in.started_us + 1;
  in.joined = true;
  in.live_members = 2;
  r = readiness(in);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(boost::json::parse(r.answer.body).at("live_members").to_number<std::int64_t>(), 2);
}

TEST(Healthz, AnswersOk) {
  const HttpAnswer a = healthz_answer();
  EXPECT_EQ(a.status, 200u);
  EXPECT_EQ(a.body, "ok\n");
}

}  // namespace
}  // namespace rlimit::shell
