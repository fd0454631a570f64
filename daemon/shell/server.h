// The rlimitd event loop: the listening Unix socket and its sessions, the
// sweep timer, the cluster service (peer socket, gossip timer) when
// clustering is on, signals (SIGTERM/SIGINT leave the cluster and stop
// gracefully, SIGHUP reloads the rules and the keyring). One thread, so the
// core needs no locks. This header keeps Asio out of main.cc.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "shell/envelope.h"
#include "shell/overrides.h"

namespace rlimit::shell {

struct ServerOptions {
  config::Config config;       // overrides already applied
  std::string config_path;     // empty: the built-in config; SIGHUP only logs
  SettingOverrides overrides;  // applied again to a reloaded file
  // Loaded from config.cluster.secret_file; required unless the cluster mode
  // is kNone.
  std::optional<Keyring> keyring;
};

// Runs the daemon in the calling thread until SIGTERM or SIGINT. Returns the
// process exit code: 0 after a clean stop, 1 if a socket (client or peer)
// could not be set up or the loop failed. Call once; expects logging to be set up and SIGPIPE
// ignored.
int run_server(ServerOptions options);

}  // namespace rlimit::shell
