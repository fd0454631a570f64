// What a SIGHUP reload may change in a running daemon. Rules and the bounds
// read on every use apply at once; settings baked into open resources (the
// socket, the node's identity, the limiter's policies) need a restart and are
// kept, with a log line saying so. Pure.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace rlimit::shell {

struct SettingsChange {
  config::DaemonSettings settings;   // what to run with from now on
  std::vector<std::string> applied;  // "max_connections 1024 -> 64"
  std::vector<std::string> ignored;  // "socket_path": needs a restart
};

// Merges freshly loaded settings (overrides already applied) into the
// running ones.
SettingsChange merge_reloaded_settings(const config::DaemonSettings& running,
                                       const config::DaemonSettings& loaded);

// The [cluster] settings that differ between the running and the reloaded
// config ("cluster.seeds"). All need a restart; only the secret file's
// contents are re-read on reload (the keyring, for rotation).
std::vector<std::string> changed_cluster_settings(const config::ClusterSettings& running,
                                                  const config::ClusterSettings& loaded);

}  // namespace rlimit::shell
