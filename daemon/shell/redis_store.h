// The shell's Redis client for Redis mode (issue 16, docs/cluster.md "Redis
// mode"): carries a core::StoreBatch to Redis or Redis Cluster and hands back
// a core::StoreResult, on its own worker thread so the event loop never waits
// for Redis.
//
// Data model: one Redis hash per core key, named key_prefix + key (any
// bytes), one field per (origin, incarnation) (redis_hash_codec.h), valued
// by the consumed count in decimal. A write is one EVALSHA of a small script
// that raises each given field only if the new value is larger (compared as
// decimal strings, never as Lua numbers), sets PEXPIRE ttl_ms and returns
// HGETALL; so a write retried, duplicated or reordered changes nothing. A
// read is HGETALL. Every command for one Redis node in a batch goes in one
// pipeline: one round trip per node per batch while healthy.
//
// Failure: a node that cannot be reached fails only the keys it serves
// (listed in failed_writes when written); reconnects to a node are spaced by
// a backoff (reconnect_backoff_min_ms doubling to _max_ms), so while Redis is
// down a batch fails at once without a connect attempt. Redis Cluster: the
// slot map comes from CLUSTER SLOTS (at the first batch, after a MOVED or a
// connection failure, and every slots_refresh_interval_ms); MOVED and ASK
// are followed within the batch, at most max_redirects times per command.
//
// Limits: hiredis 0.14.1 (Debian 12) has no TLS, so neither has this client;
// a host name is resolved (getaddrinfo, not bounded by connect_timeout_ms) on
// the worker thread at each connect. command_timeout_ms bounds each socket
// read or write wait, so a pipeline of N replies can take longer when a node
// trickles them.
//
// Ownership and threads: RedisStore owns its worker thread and its hiredis
// connections. submit(), stats() and stop() are thread-safe. `done` runs on
// the worker thread, without locks held; it must not throw, call stop() or
// destroy the store (the daemon posts the result to its loop). The destructor
// stops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/store.h"

namespace rlimit::shell {

struct RedisStoreOptions {
  // "host:port": IPv4 literal, [IPv6] literal or host name. A single server
  // takes exactly one; a cluster takes one or more seed nodes (the rest is
  // learned from CLUSTER SLOTS).
  std::vector<std::string> addresses;
  bool cluster = false;
  // AUTH: "AUTH username password" when username is set (an ACL user),
  // "AUTH password" when only password is set, nothing when both are empty.
  // The caller reads them from a file.
  std::string username;
  std::string password;
  std::string key_prefix = "rlimit:";
  std::int64_t connect_timeout_ms = 200;
  std::int64_t command_timeout_ms = 500;
  // At most one connect attempt per node per backoff; the backoff doubles
  // after each failed attempt up to the max and falls back to the min on
  // success.
  std::int64_t reconnect_backoff_min_ms = 100;
  std::int64_t reconnect_backoff_max_ms = 5'000;
  // Batches waiting while one runs; a submit beyond it is refused (counted).
  std::size_t max_queued_batches = 1;
  // Redis Cluster only.
  std::int64_t slots_refresh_interval_ms = 30'000;
  std::int64_t slots_refresh_min_interval_ms = 500;  // between refreshes a MOVED asks for
  std::uint32_t max_redirects = 2;                   // MOVED/ASK followed per command per batch
};

// Counters since construction (a snapshot; monotonic).
struct RedisStoreStats {
  std::uint64_t batches_submitted = 0;
  std::uint64_t batches_refused_queue_full = 0;  // over max_queued_batches
  std::uint64_t batches_refused_stopped = 0;     // submitted after stop()
  std::uint64_t batches_completed = 0;           // done called (any outcome)
  std::uint64_t batches_failed = 0;              // ... with ok == false
  std::uint64_t batches_cancelled = 0;           // ... because the store stopped
  std::uint64_t commands = 0;
  std::uint64_t round_trips = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t connects = 0;             // attempts
  std::uint64_t connect_failures = 0;     // attempts that failed (refused, timeout, AUTH, ...)
  std::uint64_t connects_deferred = 0;    // a node's keys failed at once: in backoff
  std::uint64_t connections_lost = 0;     // I/O error or timeout on an open connection
  std::uint64_t moved = 0;                // MOVED replies
  std::uint64_t ask = 0;                  // ASK replies
  std::uint64_t noscript = 0;             // NOSCRIPT replies (the script sent again with EVAL)
  std::uint64_t redirects_exhausted = 0;  // commands failed after max_redirects
  std::uint64_t slot_refreshes = 0;       // CLUSTER SLOTS maps installed
  std::uint64_t slot_refresh_failures = 0;
  std::uint64_t fields_skipped = 0;  // hash fields that did not decode
};

class RedisStore {
 public:
  using Done = std::function<void(core::StoreResult)>;

  // "" when `options` can be used, else why not (e.g. a bad address).
  static std::string check_options(const RedisStoreOptions& options);

  // Starts the worker; connects lazily, at the first batch. Throws
  // std::invalid_argument with check_options()'s message when it is not "".
  explicit RedisStore(RedisStoreOptions options);
  ~RedisStore();
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Queues `batch`: returns nullopt, and `done` runs exactly once on the
  // worker thread with the batch's result (a failed one if the store stops
  // first). When the batch cannot be queued (max_queued_batches waiting, or
  // stopped) returns its failed result at once and never calls `done`.
  std::optional<core::StoreResult> submit(core::StoreBatch batch, Done done);

  // Finishes the running batch (bounded by the timeouts), completes the queued
  // ones as failed, closes the connections and joins the worker. Idempotent.
  void stop();

  RedisStoreStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A failed result for every operation of `batch` (each write listed in
// failed_writes), with `error`.
core::StoreResult failed_store_result(const core::StoreBatch& batch, std::string error);

}  // namespace rlimit::shell
