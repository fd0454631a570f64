// Shared fixture for integration tests: a temp dir, a config writer, and a
// started rlimitd on a socket inside the temp dir.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "rlimit/client.h"
#include "support/daemon_process.h"

namespace rlimit::testing {

class DaemonTest : public ::testing::Test {
 protected:
  std::string socket_path() const { return dir_.file("rlimitd.sock"); }

  // Writes `rules_toml` (plus a [daemon] section pointing at our socket) to
  // rlimitd.toml and starts the daemon on it.
  void start(const std::string& rules_toml, std::vector<std::string> extra_args = {}) {
    config_path_ = write_config(rules_toml);
    std::vector<std::string> args = {"--config", config_path_, "--log-level", "debug"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    daemon_ = std::make_unique<DaemonProcess>(dir_, args);
    ASSERT_TRUE(daemon_->wait_ready(socket_path())) << daemon_->log();
  }

  std::string write_config(const std::string& rules_toml, const std::string& name = "rlimitd.toml") {
    return dir_.write(name, "[daemon]\nsocket = \"" + socket_path() + "\"\nnode_id = \"test\"\n" +
                                rules_toml);
  }

  Client client(std::uint32_t timeout_ms = 2000, FailMode mode = FailMode::kOpen) {
    ClientOptions options;
    options.socket_path = socket_path();
    options.timeout_ms = timeout_ms;
    options.fail_mode = mode;
    options.reconnect_backoff_min_ms = 1;
    return Client(options);
  }

  // The named counter from the daemon's status, or -1.
  long long counter(Client& c, const std::string& name) {
    auto status = c.status();
    if (!status) return -1;
    for (const auto& [n, v] : status->counters) {
      if (n == name) return static_cast<long long>(v);
    }
    return -1;
  }

  void TearDown() override {
    if (daemon_ && daemon_->running()) {
      const auto code = daemon_->stop(SIGTERM);
      EXPECT_EQ(code, 0) << daemon_->log();
    }
  }

  TempDir dir_;
  std::string config_path_;
  std::unique_ptr<DaemonProcess> daemon_;
};

inline std::vector<Descriptor> user(const std::string& name) { return {{"user", name}}; }

}  // namespace rlimit::testing
