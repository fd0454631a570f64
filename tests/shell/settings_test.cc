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

  const SettingsChange change = merge_reloaded_settings(running, loaded);
  EXPECT_EQ(change.settings.node_id, "a");
  EXPECT_EQ(change.settings.socket_path, "/run/a.sock");
  EXPECT_EQ(change.settings.max_connections, 7u);
  EXPECT_EQ(change.settings.log_level, "debug");
  EXPECT_EQ(change.settings.limiter.max_keys, 99u);
  EXPECT_TRUE(mentions(change.ignored, "node_id"));
  EXPECT_TRUE(mentions(change.ignored, "socket_path"));
  EXPECT_EQ(change.ignored.size(), 2u);
  EXPECT_TRUE(mentions(change.applied, "max_connections 1024 -> 7"));
  EXPECT_EQ(change.applied.size(), 3u);

  const SettingsChange none = merge_reloaded_settings(running, running);
  EXPECT_TRUE(none.applied.empty());
  EXPECT_TRUE(none.ignored.empty());
}

}  // namespace
}  // namespace rlimit::shell
