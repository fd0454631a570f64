#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/config.h"
#include "shell/overrides.h"
#include "shell/reload.h"

namespace rlimit::shell {
namespace {

bool mentions(const std::vector<std::string>& lines, const std::string& word) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.find(word) != std::string::npos; });
}

TEST(OverridesTest, FlagsWinAndEmptySettingsGetDefaults) {
  config::DaemonSettings settings;
  settings.socket_path = "/from/file.sock";
  settings.log_level = "warn";
  SettingOverrides overrides;
  overrides.socket_path = "/from/flag.sock";
  overrides.socket_mode = 0600;
  overrides.max_keys = 42;
  apply_overrides(overrides, settings);
  EXPECT_EQ(settings.socket_path, "/from/flag.sock");
  EXPECT_EQ(settings.socket_mode, 0600u);
  EXPECT_EQ(settings.limiter.max_keys, 42u);
  EXPECT_EQ(settings.log_level, "warn");  // not overridden
  EXPECT_EQ(settings.node_id, host_name());

  config::DaemonSettings defaults;
  apply_overrides(SettingOverrides{}, defaults);
  EXPECT_FALSE(defaults.socket_path.empty());
}

TEST(OverridesTest, SocketModeIsOctal) {
  EXPECT_EQ(parse_socket_mode("0660"), 0660u);
  EXPECT_EQ(parse_socket_mode("600"), 0600u);
  EXPECT_EQ(parse_socket_mode("0777"), 0777u);
  EXPECT_FALSE(parse_socket_mode("0800"));
  EXPECT_FALSE(parse_socket_mode("1777"));
  EXPECT_FALSE(parse_socket_mode(""));
  EXPECT_FALSE(parse_socket_mode("rw"));
}

TEST(ReloadTest, LiveSettingsApplyAndRestartOnesAreKept) {
  config::DaemonSettings running;
  running.node_id = "a";
  running.socket_path = "/run/a.sock";
  config::DaemonSettings loaded = running;
  loaded.node_id = "b";
  loaded.socket_path = "/run/b.sock";
  loaded.max_connections = 7;
  loaded.log_level = "debug";
  loaded.limiter.max_keys = 99;
  loaded.busy_poll_us = 50;  // the event loop reads it once, at start

  const SettingsChange change = merge_reloaded_settings(running, loaded);
  EXPECT_EQ(change.settings.node_id, "a");
  EXPECT_EQ(change.settings.socket_path, "/run/a.sock");
  EXPECT_EQ(change.settings.max_connections, 7u);
  EXPECT_EQ(change.settings.log_level, "debug");
  EXPECT_EQ(change.settings.limiter.max_keys, 99u);
  EXPECT_TRUE(mentions(change.ignored, "node_id"));
  EXPECT_TRUE(mentions(change.ignored, "socket_path"));
  EXPECT_TRUE(mentions(change.ignored, "busy_poll_us"));
  EXPECT_EQ(change.settings.busy_poll_us, 0);
  EXPECT_EQ(change.ignored.size(), 3u);
  EXPECT_TRUE(mentions(change.applied, "max_connections 1024 -> 7"));
  EXPECT_EQ(change.applied.size(), 3u);

  const SettingsChange none = merge_reloaded_settings(running, running);
  EXPECT_TRUE(none.applied.empty());
  EXPECT_TRUE(none.ignored.empty());
}

// The logger's formatter is installed once, at start.
TEST(ReloadTest, LogFormatNeedsARestart) {
  config::DaemonSettings running;
  config::DaemonSettings loaded = running;
  loaded.log_format = "json";
  const SettingsChange change = merge_reloaded_settings(running, loaded);
  EXPECT_EQ(change.settings.log_format, "text");
  EXPECT_EQ(change.ignored, std::vector<std::string>{"log_format"});
  EXPECT_TRUE(change.applied.empty());

  SettingOverrides overrides;
  overrides.log_format = "json";
  apply_overrides(overrides, running);
  EXPECT_EQ(running.log_format, "json");
}

TEST(ClusterOverridesTest, FlagsWinOverTheFile) {
  config::ClusterSettings settings;
  settings.bind = "10.0.0.1:7946";
  settings.fanout = 3;
  SettingOverrides overrides;
  overrides.cluster_mode = config::ClusterMode::kMesh;
  overrides.seeds = std::vector<std::string>{"a:1", "b:2"};
  overrides.secret_file = "/etc/rlimit/keys";
  overrides.gossip_interval_us = 7000;
  overrides.cluster_name = "blue";
  apply_cluster_overrides(overrides, settings);
  EXPECT_EQ(settings.mode, config::ClusterMode::kMesh);
  EXPECT_EQ(settings.seeds, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(settings.secret_file, "/etc/rlimit/keys");
  EXPECT_EQ(settings.gossip_interval_us, 7000);
  EXPECT_EQ(settings.name, "blue");
  EXPECT_EQ(settings.bind, "10.0.0.1:7946");  // not overridden
  EXPECT_EQ(settings.fanout, 3u);

  EXPECT_EQ(parse_cluster_mode("gossip"), config::ClusterMode::kGossip);
  EXPECT_EQ(parse_cluster_mode("none"), config::ClusterMode::kNone);
  EXPECT_FALSE(parse_cluster_mode("Mesh").has_value());
}

TEST(ClusterOverridesTest, ClusterModeNeedsASecretFileAndGoodAddresses) {
  config::ClusterSettings settings;
  EXPECT_TRUE(check_cluster_settings(settings).empty());  // mode none: nothing to check

  settings.mode = config::ClusterMode::kGossip;
  std::vector<std::string> problems = check_cluster_settings(settings);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems, "secret")) << problems[0];

  settings.secret_file = "/keys";
  settings.bind = "127.0.0.1:0";  // a bind may ask for any port
  EXPECT_TRUE(check_cluster_settings(settings).empty());

  settings.advertise = "127.0.0.1:0";  // peers cannot reach port 0
  settings.seeds = {"ok.example:7946", "no-port"};
  settings.mtu_bytes = 100;
  problems = check_cluster_settings(settings);
  EXPECT_EQ(problems.size(), 3u);
  EXPECT_TRUE(mentions(problems, "advertise"));
  EXPECT_TRUE(mentions(problems, "no-port"));
  EXPECT_TRUE(mentions(problems, "mtu_bytes"));
}

TEST(ReloadTest, ClusterChangesAreNamed) {
  config::ClusterSettings running;
  config::ClusterSettings loaded = running;
  EXPECT_TRUE(changed_cluster_settings(running, loaded).empty());
  loaded.seeds = {"x:1"};
  loaded.fanout = 9;
  EXPECT_EQ(changed_cluster_settings(running, loaded),
            (std::vector<std::string>{"cluster.seeds", "cluster.fanout"}));
}

}  // namespace
}  // namespace rlimit::shell
