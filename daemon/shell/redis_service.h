// Redis mode's daemon side ([cluster] mode = "redis"; docs/cluster.md,
// "Redis mode"): owns the core::StoreSync that decides what to share and the
// RedisStore that carries it, and drives them from the event loop: a timer
// ticks the sync, each batch it builds goes to the store's worker thread, and
// the result is posted back to the loop and merged. No Redis call is ever on
// the request path: checks are decided from the Limiter alone, as in the
// gossip modes. The store's health changes are logged once each.
//
// Runs on the server's single io_context thread; not thread-safe. Keeps Asio
// out of its header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "core/limiter.h"
#include "core/store_sync.h"
#include "shell/redis_store.h"

namespace boost::asio {
class io_context;
}

namespace rlimit::shell {

// The store's options for `settings`; `password` is the password file's
// first line (""). Pure.
RedisStoreOptions make_redis_store_options(const config::RedisSettings& settings,
                                           std::string password);
core::StoreSyncOptions make_store_sync_options(const config::RedisSettings& settings);

// Reads the password file's first line (surrounding whitespace trimmed); on
// failure nullopt and `error` says what and where.
std::optional<std::string> read_redis_password(const std::string& path, std::string& error);

class RedisService {
 public:
  // Enables replication on `limiter` as origin `node_id`, `incarnation`
  // (larger on every restart), starts the store's worker and the timer.
  // `limiter` must outlive the service. On failure returns null and sets
  // `error`.
  static std::unique_ptr<RedisService> start(boost::asio::io_context& io,
                                             const config::RedisSettings& settings,
                                             const std::string& node_id, std::uint64_t incarnation,
                                             core::Limiter& limiter, std::string& error);
  ~RedisService();
  RedisService(const RedisService&) = delete;
  RedisService& operator=(const RedisService&) = delete;

  // Stops the timer, writes once more every key whose own counter the store
  // may lack (waiting for the answer at most twice the connect and command
  // timeouts), and stops the store. Idempotent.
  void stop();

  const core::StoreSync& sync() const;
  RedisStoreStats store_stats() const;
  // Calls f(name, value) for the store_* and redis_* counters of status.
  void for_each_counter(const std::function<void(std::string_view, std::uint64_t)>& f) const;

 private:
  struct State;
  explicit RedisService(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace rlimit::shell
