// The rlimitd event loop: the listening Unix socket and its sessions, the
// sweep timer, signals (SIGTERM/SIGINT stop gracefully, SIGHUP reloads the
// rules). One thread, so the core needs no locks. This header keeps Asio out
// of main.cc.
#pragma once

#include <string>

#include "config/config.h"
#include "shell/overrides.h"

namespace rlimit::shell {

struct ServerOptions {
  config::Config config;       // overrides already applied
  std::string config_path;     // empty: the built-in config; SIGHUP only logs
  SettingOverrides overrides;  // applied again to a reloaded file
};

// Runs the daemon in the calling thread until SIGTERM or SIGINT. Returns the
// process exit code: 0 after a clean stop, 1 if the socket could not be set up
// or the loop failed. Call once; expects logging to be set up and SIGPIPE
// ignored.
int run_server(ServerOptions options);

}  // namespace rlimit::shell
