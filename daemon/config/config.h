// The daemon's configuration: settings of the process plus the rule set, as
// loaded from a TOML file (see docs/configuration.md) or built in.
// Loading is pure: text in, a Config or located errors out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/limiter.h"
#include "core/rule.h"

namespace rlimit::config {

struct DaemonSettings {
  std::string node_id;           // default: the host name (filled by the daemon)
  std::string socket_path;       // default: wire::default_socket_path()
  std::uint32_t socket_mode = 0660;
  std::string log_level = "info";  // trace, debug, info, warn, error, critical, off
  std::string log_format = "text";  // text, or json: one object per line (restart to change)
  std::uint32_t max_frame_bytes = 64 * 1024;       // requests
  std::uint32_t max_response_bytes = 16 * 1024 * 1024;
  std::uint32_t max_checks_per_frame = 1024;
  std::uint32_t max_connections = 1024;
  std::int64_t sweep_interval_us = 100'000;   // how often idle buckets are swept
  std::uint32_t sweep_batch = 10'000;          // entries visited per sweep
  std::int64_t shutdown_grace_us = 2'000'000;  // time to finish in-flight replies
  // A connection whose answer has not been fully written this long after the
  // write began (its client stopped reading) is closed. 0: never.
  std::int64_t write_timeout_us = 10'000'000;
  // A connection that sends nothing for this long is closed. 0: never (the
  // default: pooled clients keep idle connections).
  std::int64_t idle_timeout_us = 0;
  // After the event loop runs out of ready work it keeps polling for this
  // long (yielding the CPU to anything runnable between polls) before it
  // sleeps in epoll_wait. 0: never (the default). Buys latency with CPU:
  // a client on another CPU need not wake this one (docs/performance.md).
  std::int64_t busy_poll_us = 0;
  bool allow_reset = true;  // clients may send ResetRequest (rlimitctl reset)
  // Where rules applied through the rules API (or received from a peer) are
  // kept, so a restart comes back with them; "": not kept.
  std::string rules_state_file;
  std::uint32_t max_rules = 10'000;  // [[rule]] entries in a config file or rules document
  core::LimiterOptions limiter;
};

enum class ClusterMode { kNone, kGossip, kMesh, kRedis };

// The [cluster] section. With mode kNone the daemon is a single node and
// none of the rest matters.
struct ClusterSettings {
  ClusterMode mode = ClusterMode::kNone;
  std::string name = "rlimit";         // must match on every node
  std::string bind = "127.0.0.1:7946"; // host:port of the UDP (gossip) or TCP (mesh) peer socket
  std::string advertise;               // host:port peers use to reach us; default: bind
  std::vector<std::string> seeds;      // host:port
  std::string secret_file;             // keyring: one secret per line, first signs; required unless mode is kNone
  std::int64_t gossip_interval_us = 20'000;
  std::uint32_t fanout = 3;
  std::uint32_t mtu_bytes = 1400;
  std::int64_t anti_entropy_interval_us = 1'000'000;
  std::int64_t probe_interval_us = 500'000;
  std::int64_t probe_timeout_us = 200'000;
  std::uint32_t indirect_probes = 3;
  std::int64_t suspicion_timeout_us = 2'000'000;
  std::int64_t dead_retention_us = 60'000'000;
  std::int64_t rejoin_interval_us = 10'000'000;  // join again through a seed; 0: never
  std::int64_t table_sync_interval_us = 1'000'000;  // whole table to a differing peer; 0: never
  std::uint32_t max_members = 4096;
  std::int64_t reconnect_backoff_min_us = 50'000;   // mesh
  std::int64_t reconnect_backoff_max_us = 5'000'000;
  std::uint32_t max_peer_queue_bytes = 4 * 1024 * 1024;  // mesh: queued output per peer connection
  std::uint32_t max_packets_per_round = 16;      // per peer per gossip round; the rest waits
  std::int64_t counter_retention_us = 60'000'000;  // minimum life of an idle key's counters
  bool fair_share = true;  // spend a fair share of a key others spend on (core/fair_share.h)
  // A rule set received from a peer larger than this is refused (counted).
  std::uint32_t max_rules_bytes = 1 << 20;
  // Replay protection (core/replay_window.h): a message sent more than this
  // from the receiver's clock is refused (0: no clock check); messages
  // without a sequence number (nodes that predate it) are refused unless
  // accept_unsequenced (a rolling upgrade).
  std::int64_t replay_max_age_us = 60'000'000;
  bool accept_unsequenced = false;
  // What peers may make this node hold (core/ledger.h): origin names,
  // keys with counters, and counter entries per key. Beyond: refused, counted.
  std::uint32_t max_origins = 1 << 16;
  std::uint32_t max_ledger_keys = 4'000'000;
  std::uint32_t max_entries_per_key = 16'384;
  // Owner routing (docs/cluster.md, "Owner routing"): while a node sees at
  // least routed_min_members live members (itself included), a key with at
  // most routed_max_origins origins goes to owners_per_key owners instead of
  // being gossiped; 0 owners: every key is gossiped. The defaults are
  // core::ClusterOptions'.
  std::uint32_t owners_per_key = 2;
  std::uint32_t routed_min_members = 128;
  std::uint32_t routed_max_origins = 16;
};

// The [redis] section: the store of Redis mode ([cluster] mode = "redis";
// docs/cluster.md, "Redis mode"). Each node decides locally and shares its
// per-origin counters through Redis in the background (core/store_sync.h,
// shell/redis_store.h). No TLS: Debian 12's hiredis (0.14) has none.
struct RedisSettings {
  // host:port of the server, or of some Redis Cluster nodes (the rest are
  // found with CLUSTER SLOTS).
  std::vector<std::string> addresses{"127.0.0.1:6379"};
  bool cluster = false;       // Redis Cluster (slots, MOVED, ASK) rather than one server
  std::string username;       // ACL user; "": AUTH with the password alone
  std::string password_file;  // the password is the file's first line; "": no AUTH
  std::string key_prefix = "rlimit:";
  std::int64_t sync_interval_us = 100'000;  // one batch (one pipeline per Redis node) per interval
  std::int64_t connect_timeout_us = 500'000;
  std::int64_t command_timeout_us = 500'000;
  std::uint32_t max_writes_per_batch = 4096;  // keys written per batch; the rest waits (counted)
  std::uint32_t max_reads_per_batch = 512;    // keys read per batch, in rotation
  // While the store fails, a key's other origins are charged at their earlier
  // rates for at most this long after its last news (core::StoreSync,
  // "stand-ins"); 0: never.
  std::int64_t standin_max_us = 60'000'000;
};

// The [http] section: the HTTP check face (GET/POST /v1/check, for nginx
// auth_request, Traefik ForwardAuth and any HTTP client). Off while `listen`
// is empty. Changes need a restart.
struct HttpSettings {
  std::string listen;              // host:port of the listener; empty: no listener
  std::uint32_t deny_status = 429; // 429, or 403 for nginx auth_request
  bool ietf_headers = true;        // RateLimit-Policy, RateLimit, Retry-After on answers
  std::uint32_t max_body_bytes = 64 * 1024;     // POST bodies; larger: 413, counted
  std::uint32_t max_header_bytes = 16 * 1024;   // request line + headers; larger: 431, counted
  std::uint32_t max_connections = 1024;         // beyond: closed at once, counted
  std::int64_t request_timeout_us = 10'000'000; // a request must arrive whole within this
  std::int64_t idle_timeout_us = 60'000'000;    // a kept-alive connection idle this long is closed
  // /readyz: a cluster node none of whose seeds answered within this of start
  // becomes ready alone (shell/health.h).
  std::int64_t ready_after_seeds_unreachable_us = 30'000'000;
  bool rules_api = false;        // GET/PUT /v1/rules (docs/cluster.md, "Rules across the cluster")
  std::string rules_token_file;  // a bearer token for /v1/rules; "": none asked
};

// The [grpc] section: Envoy's RateLimitService v3 (ShouldRateLimit), for
// Envoy's ratelimit filter, Istio and Contour. Off unless `listen` or
// `unix_socket` is set (either or both). Changes need a restart.
struct GrpcSettings {
  std::string listen;       // host:port (loopback advised: the API is unauthenticated)
  std::string unix_socket;  // path of a Unix socket
  bool ietf_headers = true; // response_headers_to_add carries the IETF fields and Retry-After
  std::uint32_t max_message_bytes = 64 * 1024;  // larger requests: RESOURCE_EXHAUSTED, counted
  std::uint32_t max_pending = 4096;  // calls waiting for the event loop; beyond: UNAVAILABLE, counted
};

struct Config {
  DaemonSettings daemon;
  ClusterSettings cluster;
  RedisSettings redis;
  HttpSettings http;
  GrpcSettings grpc;
  core::RuleSet rules;
  // The rules as a rules document (load_rules): the file's [[rule]] and
  // [[exempt]] tables as the loader read them, or a rules document's
  // canonical text.
  std::string rules_text;
  std::string source;  // file name, or "<built-in>"
};

// One problem in a config, located.
struct ConfigError {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string message;
  std::string to_string() const;  // "file:line:column: message"
};

struct LoadResult {
  Config config;                    // meaningful only when errors is empty
  std::vector<ConfigError> errors;  // every problem found, in file order
  bool ok() const { return errors.empty(); }
};

// Parses `text` (the contents of `file_name`, used in messages).
LoadResult load_config(std::string_view text, std::string_view file_name);

// The rules that cannot run in cluster mode `mode` as configured (a
// concurrency rule without local = true), one located error each; empty for
// kNone. load_config() applies it with the file's mode; the daemon applies it
// again once command-line flags may have changed the mode, and on reload.
std::vector<ConfigError> check_rules_for_cluster(const core::RuleSet& rules, ClusterMode mode);

// "none", "gossip" or "mesh": the [cluster] mode as the file spells it.
std::string_view cluster_mode_name(ClusterMode mode);

// Splits a peer address "host:port" (the form of [cluster] bind, advertise and
// seeds, and of the matching command-line flags). `host` is an IPv4 literal
// ("10.0.0.1"), a bracketed IPv6 literal ("[fd00::1]", "[fe80::1%eth0]") or a
// host name (labels of A-Z a-z 0-9 - _, at most 253 bytes); `port` is
// 1..65535 in decimal. On success sets `*host` (an IPv6 address without its
// brackets) and `*port`, and returns true; otherwise sets `*error` to why (a
// message without the input, e.g. "missing port (expected host:port)") and
// returns false, leaving `*host` and `*port` alone. Any pointer may be null.
// Pure: nothing is resolved.
bool parse_host_port(std::string_view text, std::string* host, std::uint16_t* port,
                     std::string* error);

// The --seeds flag: "a:1, b:2,,c:3" -> {"a:1", "b:2", "c:3"}. Splits at commas,
// trims spaces and tabs around each entry and drops empty ones; the entries
// are not checked (use parse_host_port).
std::vector<std::string> split_seed_list(std::string_view comma_separated);

// What a rules document is checked against: the running daemon's bounds
// and cluster mode.
struct RulesLoadOptions {
  std::uint32_t max_rules = 10'000;
  std::size_t max_descriptors_per_check = core::LimiterOptions{}.max_descriptors_per_check;
  ClusterMode mode = ClusterMode::kNone;
};

// Parses a rules document: TOML with only [[rule]] and [[exempt]] tables,
// checked exactly as a config file's (the same loader), every problem
// located in `name`. On success config.rules holds the rules and
// config.rules_text the canonical text (canonical_rules_text); the rest of
// config is left at its defaults.
LoadResult load_rules(std::string_view text, std::string_view name,
                      const RulesLoadOptions& options);

// A rules document's canonical text, the one its digest is taken over: CRLF
// line ends become LF (CRs before a LF are dropped, however many), and it
// ends in exactly one newline, without a CR before it (empty stays empty).
// Idempotent: the canonical text of a canonical text is itself.
std::string canonical_rules_text(std::string_view text);

// Reads and parses a file; an unreadable file is one error at line 0.
LoadResult load_config_file(const std::string& path);

// The built-in configuration used when rlimitd runs without --config: one
// node, the default socket, and one example rule (`per-user`: 10/s per
// distinct `user`, burst 20).
Config default_config();

}  // namespace rlimit::config
