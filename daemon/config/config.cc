// The TOML loader: walks the parsed document once, checks every key against
// the schema in docs/configuration.md, and reports every problem it finds with
// its position rather than stopping at the first, so one edit-reload cycle can
// fix them all.
#include "config/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/duration.h"
#include "core/fair_share.h"
#include "core/glob.h"
#include "core/rule.h"
#include "core/rule_state.h"
#include "core/token_bucket.h"

namespace rlimit::config {
namespace {

constexpr std::string_view kBuiltInSource = "<built-in>";

// Bounds of the schema. Each is documented in docs/configuration.md.
constexpr std::size_t kMaxRuleNameBytes = 128;
// sockaddr_un::sun_path holds 108 bytes on Linux, including the final NUL.
constexpr std::size_t kMaxSocketPathBytes = 107;
constexpr std::uint32_t kMaxSocketMode = 0777;
// A config file is read whole into memory; anything larger is a mistake.
constexpr std::size_t kMaxConfigFileBytes = std::size_t{64} << 20;
// Values echoed in messages are cut so a runaway string cannot flood a log.
constexpr std::size_t kMaxQuotedBytes = 64;

struct IntRange {
  std::int64_t min;
  std::int64_t max;
};
constexpr IntRange kMaxFrameBytesRange{64, 16 * 1024 * 1024};
constexpr IntRange kMaxChecksPerFrameRange{1, 65'536};
constexpr IntRange kMaxResponseBytesRange{1024, 256 * 1024 * 1024};
constexpr IntRange kMaxConnectionsRange{1, 1'000'000};
constexpr IntRange kMaxKeysRange{1, 1'000'000'000};
constexpr IntRange kSweepBatchRange{1, 10'000'000};
constexpr IntRange kMaxRulesRange{1, 1'000'000};
constexpr IntRange kMaxDescriptorsPerCheckRange{1, 1024};
constexpr IntRange kTokensRange{0, core::kMaxTokens};
constexpr IntRange kMultiplierRange{1, core::kMaxTokens};
constexpr IntRange kFanoutRange{0, 64};
constexpr IntRange kMtuBytesRange{576, 65'000};
constexpr IntRange kIndirectProbesRange{0, 16};
constexpr IntRange kMaxMembersRange{2, 100'000};
// A fair share remembers how many ways its probe shared a key, at most the
// live nodes: kMaxProbeWays holds every cluster this allows.
static_assert(kMaxMembersRange.max <= core::FairShare::kMaxProbeWays);
constexpr IntRange kMaxPeerQueueBytesRange{std::int64_t{64} << 10, std::int64_t{1} << 30};
constexpr std::int64_t kDefaultMaxRules = 10'000;

struct DurationRange {
  std::int64_t min_us;
  std::int64_t max_us;
};
constexpr std::int64_t kMs = 1'000;
constexpr std::int64_t kSec = 1'000 * kMs;
constexpr std::int64_t kDay = 86'400 * kSec;
constexpr DurationRange kGossipIntervalRange{1 * kMs, 10 * kSec};
constexpr DurationRange kAntiEntropyIntervalRange{10 * kMs, 3'600 * kSec};
constexpr DurationRange kProbeIntervalRange{10 * kMs, 60 * kSec};
// Its upper bound is also probe_interval (checked once both are known).
constexpr DurationRange kProbeTimeoutRange{1 * kMs, 60 * kSec};
constexpr DurationRange kSuspicionTimeoutRange{10 * kMs, 600 * kSec};
constexpr DurationRange kDeadRetentionRange{1 * kSec, 7 * kDay};
// 0 turns rejoining off; any other value is at least kRejoinIntervalMinUs.
constexpr DurationRange kRejoinIntervalRange{0, 7 * kDay};
// A wake-up costs tens of microseconds; a poll window far beyond that only
// burns a core, so a typo cannot make the daemon spin for long.
constexpr DurationRange kBusyPollRange{0, 10 * kMs};
constexpr std::int64_t kRejoinIntervalMinUs = 1 * kSec;
// 0 turns table sync off; any other value is at least kTableSyncIntervalMinUs
// (a whole table is up to max_members records: not many a second).
constexpr DurationRange kTableSyncIntervalRange{0, 3'600 * kSec};
constexpr std::int64_t kTableSyncIntervalMinUs = 100 * kMs;
constexpr DurationRange kCounterRetentionRange{1 * kSec, 30 * kDay};
constexpr IntRange kMaxPacketsPerRoundRange{1, 4096};
constexpr DurationRange kReconnectBackoffRange{1 * kMs, 600 * kSec};
// 0 turns the clock check of replay protection off.
constexpr DurationRange kReplayMaxAgeRange{0, 1 * kDay};

constexpr std::size_t kMaxClusterNameBytes = 64;
constexpr std::size_t kMaxSeeds = 64;
constexpr std::size_t kMaxHostNameBytes = 253;
constexpr std::size_t kMaxHostLabelBytes = 63;
// The limiter tags a bucket with its override's index in one byte (0 = none).
constexpr std::size_t kMaxOverridesPerRule = 255;

constexpr std::string_view kTopLevelKeys[] = {"daemon", "cluster", "redis", "http",
                                              "grpc",   "rule",    "exempt"};
constexpr std::string_view kRedisKeys[] = {
    "addresses",       "cluster",         "username",        "password_file",
    "key_prefix",      "sync_interval",   "connect_timeout", "command_timeout",
    "max_writes_per_batch", "max_reads_per_batch", "standin_max", "tls"};
constexpr DurationRange kRedisSyncIntervalRange{1 * kMs, 60 * kSec};
constexpr DurationRange kRedisTimeoutRange{1 * kMs, 60 * kSec};
constexpr DurationRange kRedisStandinRange{0, 3600 * kSec};
constexpr IntRange kRedisBatchKeysRange{1, 1'000'000};
constexpr std::size_t kMaxRedisAddresses = 64;
constexpr std::size_t kMaxRedisKeyPrefixBytes = 256;
constexpr std::string_view kHttpKeys[] = {"listen",          "deny_status",     "ietf_headers",
                                          "max_body_bytes",  "max_header_bytes", "max_connections",
                                          "request_timeout", "idle_timeout", "rules_api", "rules_token_file",
                                          "ready_after_seeds_unreachable"};
constexpr std::string_view kGrpcKeys[] = {"listen", "unix_socket", "ietf_headers",
                                          "max_message_bytes", "max_pending"};
constexpr IntRange kHttpBodyBytesRange{64, 16 * 1024 * 1024};
constexpr IntRange kHttpHeaderBytesRange{1024, 1024 * 1024};
constexpr IntRange kGrpcMessageBytesRange{64, 16 * 1024 * 1024};
constexpr IntRange kGrpcMaxPendingRange{1, 1'000'000};
constexpr IntRange kMaxRulesBytesRange{1024, 64 * 1024 * 1024};
// Bounds on what peers may make a node hold (docs/cluster.md, "Bounds").
constexpr IntRange kMaxOriginsRange{2, 1 << 16};  // Ledger::kMaxOrigins
constexpr IntRange kMaxLedgerKeysRange{1, 1'000'000'000};
constexpr IntRange kMaxEntriesPerKeyRange{2, 1 << 20};
constexpr IntRange kOwnersPerKeyRange{0, 8};  // core::KeyOwners::kMaxOwners
constexpr IntRange kRoutedMaxOriginsRange{1, 1 << 20};
constexpr IntRange kRoutedMinMembersRange{1, 1 << 20};
constexpr std::string_view kDaemonKeys[] = {
    "node_id",         "socket",          "socket_mode",
    "log_level",       "max_frame_bytes", "max_checks_per_frame",
    "max_connections", "max_keys",        "key_table_full",
    "inline_limits",   "sweep_interval",  "sweep_batch",
    "shutdown_grace",  "max_rules",       "max_descriptors_per_check",
    "max_response_bytes", "allow_reset",     "write_timeout",
    "idle_timeout",    "busy_poll",       "log_format", "rules_state_file"};
constexpr std::string_view kClusterKeys[] = {"mode",
                                             "name",
                                             "bind",
                                             "advertise",
                                             "seeds",
                                             "secret_file",
                                             "gossip_interval",
                                             "fanout",
                                             "mtu_bytes",
                                             "anti_entropy_interval",
                                             "probe_interval",
                                             "probe_timeout",
                                             "indirect_probes",
                                             "suspicion_timeout",
                                             "dead_retention",
                                             "rejoin_interval",
                                             "table_sync_interval",
                                             "max_members",
                                             "reconnect_backoff_min",
                                             "reconnect_backoff_max",
                                             "max_peer_queue_bytes",
                                             "max_packets_per_round",
                                             "counter_retention",
                                             "fair_share",
                                             "max_rules_bytes",
                                             "replay_max_age",
                                             "accept_unsequenced",
                                             "max_origins",
                                             "max_ledger_keys",
                                             "max_entries_per_key",
                                             "owners_per_key",
                                             "routed_max_origins",
                                             "routed_min_members"};
constexpr std::string_view kClusterModes[] = {"none", "gossip", "mesh", "redis"};
constexpr std::string_view kRuleKeys[] = {
    "name",        "match",        "limit",       "period",        "burst",
    "algorithm",   "override",     "shaper",      "max_delay",     "max_entries",
    "warmup",      "cold_factor",  "lease_ttl",   "local",         "mode",
    "soft_percent", "elastic_threshold_percent",  "start"};
constexpr std::string_view kThrottleModes[] = {"hard", "soft", "shadow", "elastic"};
constexpr std::string_view kOverrideKeys[] = {"match", "multiplier", "limit", "period", "burst"};
constexpr std::string_view kExemptKeys[] = {"match", "rules"};
constexpr std::string_view kRulesDocumentKeys[] = {"rule", "exempt"};
constexpr std::string_view kMatcherKeys[] = {"equals", "prefix", "glob", "each"};
constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};
constexpr std::string_view kLogFormats[] = {"text", "json"};

// `"text"` with quotes, backslashes and control bytes escaped, cut at
// kMaxQuotedBytes.
std::string quote(std::string_view text) {
  std::string out = "\"";
  const std::size_t shown = std::min(text.size(), kMaxQuotedBytes);
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < text.size()) out += "...";
  out += '"';
  return out;
}

// How a descriptor key reads inside a dotted path: bare when TOML would allow
// it bare, quoted otherwise.
std::string key_in_path(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(key) : quote(key);
}

const char* type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

template <typename T>
constexpr const char* wanted_name() {
  if constexpr (std::is_same_v<T, toml::table>)
    return "a table";
  else if constexpr (std::is_same_v<T, toml::array>)
    return "an array";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "an integer";
  else if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else
    static_assert(sizeof(T) == 0, "unsupported type");
}

// What toml::node::as<T>() gives: `const toml::value<T>*` for values, `const
// toml::table*` and `const toml::array*` for containers.
template <typename T>
using TypedNode = decltype(std::declval<const toml::node&>().template as<T>());

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean "limit"?)" for a near miss, else the list of valid keys.
std::string unknown_key_hint(std::string_view key, std::span<const std::string_view> allowed) {
  std::string_view best;
  std::size_t best_distance = 3;  // farther than 2 edits is not a typo
  for (std::string_view candidate : allowed) {
    // At least the difference in length apart: a key that long or short is
    // no typo of this one, and its distance costs length x length to find.
    const std::size_t length_gap = key.size() > candidate.size() ? key.size() - candidate.size()
                                                                 : candidate.size() - key.size();
    if (length_gap >= best_distance) continue;
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance && d < candidate.size()) {
      best = candidate;
      best_distance = d;
    }
  }
  if (!best.empty()) return " (did you mean " + quote(best) + "?)";
  std::string list = " (expected one of: ";
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) list += ", ";
    list += allowed[i];
  }
  return list + ")";
}

bool valid_rule_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxRuleNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

bool valid_cluster_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxClusterNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Labels of A-Z a-z 0-9 - _ (underscores occur in container and service
// names), 1 to 63 bytes each, not starting or ending with '-'.
bool valid_host_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxHostNameBytes) return false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > kMaxHostLabelBytes) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    const bool ok = std::all_of(label.begin(), label.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' ||
             c == '_';
    });
    if (!ok) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// An IPv6 literal without brackets, optionally with a zone ("fe80::1%eth0").
bool valid_ipv6(std::string_view text) {
  std::string_view address = text;
  if (const std::size_t percent = text.find('%'); percent != std::string_view::npos) {
    address = text.substr(0, percent);
    const std::string_view zone = text.substr(percent + 1);
    if (zone.empty() || zone.size() > 15) return false;  // IFNAMSIZ - 1
    const bool ok = std::all_of(zone.begin(), zone.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' ||
             c == '_' || c == '.';
    });
    if (!ok) return false;
  }
  if (address.size() >= INET6_ADDRSTRLEN) return false;
  const std::string copy(address);  // inet_pton wants a NUL-terminated string
  in6_addr parsed{};
  return ::inet_pton(AF_INET6, copy.c_str(), &parsed) == 1;
}

bool valid_ipv4(std::string_view text) {
  if (text.size() >= INET_ADDRSTRLEN) return false;
  const std::string copy(text);
  in_addr parsed{};
  return ::inet_pton(AF_INET, copy.c_str(), &parsed) == 1;
}

// 0.0.0.0 or ::, as parse_host_port returns them: no peer can reach them.
bool is_wildcard_host(std::string_view host) {
  if (host.find(':') != std::string_view::npos) {
    const std::string copy(host.substr(0, host.find('%')));
    in6_addr parsed{};
    if (::inet_pton(AF_INET6, copy.c_str(), &parsed) != 1) return false;
    return std::all_of(std::begin(parsed.s6_addr), std::end(parsed.s6_addr),
                       [](std::uint8_t b) { return b == 0; });
  }
  return host == "0.0.0.0";
}

// "0660" or "660": 3 or 4 octal digits, at most 0777.
std::optional<std::uint32_t> parse_socket_mode(std::string_view text) {
  if (text.size() < 3 || text.size() > 4) return std::nullopt;
  std::uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (mode > kMaxSocketMode) return std::nullopt;
  return mode;
}

// Walks one parsed document. Every check that fails records an error and
// carries on, so one pass finds all problems; a value is produced only from
// parts that passed.
class Loader {
 public:
  explicit Loader(std::string_view file) : file_(file) {}

  LoadResult load(const toml::table& root) {
    LoadResult result;
    Config& config = result.config;
    config.source = file_;
    check_keys(root, kTopLevelKeys, "top level: ");

    std::optional<std::int64_t> max_rules = kDefaultMaxRules;
    if (const toml::node* node = root.get("daemon")) {
      if (const toml::table* daemon = expect<toml::table>(*node, "daemon", " ([daemon])")) {
        read_daemon(*daemon, config.daemon, max_rules);
      }
    }
    if (const toml::node* node = root.get("cluster")) {
      if (const toml::table* cluster = expect<toml::table>(*node, "cluster", " ([cluster])")) {
        read_cluster(*cluster, config.cluster);
      }
    }
    if (const toml::node* node = root.get("redis")) {
      if (const toml::table* redis = expect<toml::table>(*node, "redis", " ([redis])")) {
        read_redis(*redis, config.redis);
      }
    }
    if (const toml::node* node = root.get("http")) {
      if (const toml::table* http = expect<toml::table>(*node, "http", " ([http])")) {
        read_http(*http, config.http);
      }
    }
    if (const toml::node* node = root.get("grpc")) {
      if (const toml::table* grpc = expect<toml::table>(*node, "grpc", " ([grpc])")) {
        read_grpc(*grpc, config.grpc);
      }
    }
    if (max_rules) config.daemon.max_rules = static_cast<std::uint32_t>(*max_rules);
    max_descriptors_per_check_ = config.daemon.limiter.max_descriptors_per_check;
    read_rule_tables(root, max_rules, config.cluster.mode, config.rules);
    return finish(std::move(result));
  }

  // A rules document (load_rules): only [[rule]] and [[exempt]].
  LoadResult load_rules(const toml::table& root, const RulesLoadOptions& options) {
    LoadResult result;
    result.config.source = file_;
    check_keys(root, kRulesDocumentKeys, "rules document (only [[rule]] and [[exempt]]): ");
    max_descriptors_per_check_ = options.max_descriptors_per_check;
    read_rule_tables(root, static_cast<std::int64_t>(options.max_rules), options.mode,
                     result.config.rules);
    return finish(std::move(result));
  }

 private:
  // The [[rule]] and [[exempt]] tables of `root`, shared by config files and
  // rules documents.
  void read_rule_tables(const toml::table& root, const std::optional<std::int64_t>& max_rules,
                        ClusterMode mode, core::RuleSet& out) {
    if (const toml::node* node = root.get("rule")) read_rules(*node, max_rules, out.rules);
    if (const toml::node* node = root.get("exempt")) read_exemptions(*node, out.exemptions);
    for (ConfigError& e : check_rules_for_cluster(out, mode)) errors_.push_back(std::move(e));
  }

  LoadResult finish(LoadResult result) {

    // Checks run key by key and toml++ keeps tables sorted by key, so put the
    // messages back in the order a reader of the file meets them.
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const ConfigError& a, const ConfigError& b) {
                       return std::pair(a.line, a.column) < std::pair(b.line, b.column);
                     });
    result.errors = std::move(errors_);
    if (!result.errors.empty()) {
      // A half-built config must not be mistaken for a usable one.
      result.config = Config{};
      result.config.source = file_;
    }
    return result;
  }

  void error(const toml::source_position& at, std::string message) {
    errors_.push_back(ConfigError{file_, at.line, at.column, std::move(message)});
  }
  void error(const toml::node& at, std::string message) {
    error(at.source().begin, std::move(message));
  }

  core::SourceLocation where(const toml::node& node) const {
    return core::SourceLocation{file_, node.source().begin.line, node.source().begin.column};
  }

  // `node` as T, or nullptr after reporting "<what> must be <T>, not <type>".
  template <typename T>
  TypedNode<T> expect(const toml::node& node, const std::string& what,
                      std::string_view example = {}) {
    const auto* typed = node.as<T>();
    if (typed == nullptr) {
      error(node, what + " must be " + wanted_name<T>() + std::string(example) + ", not " +
                      type_name(node));
    }
    return typed;
  }

  void check_keys(const toml::table& table, std::span<const std::string_view> allowed,
                  const std::string& prefix) {
    for (auto&& [key, node] : table) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      error(key.source().begin,
            prefix + "unknown key " + quote(key.str()) + unknown_key_hint(key.str(), allowed));
    }
  }

  const toml::node* required(const toml::table& table, std::string_view key,
                             const std::string& prefix) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
      error(table, prefix + "missing required key " + quote(key));
    }
    return node;
  }

  std::optional<std::int64_t> read_integer(const toml::node& node, const std::string& what,
                                           IntRange range) {
    const auto* value = expect<std::int64_t>(node, what);
    if (value == nullptr) return std::nullopt;
    const std::int64_t n = value->get();
    if (n >= range.min && n <= range.max) return n;
    const std::string shown = what + " " + std::to_string(n) + ": ";
    if (range.min == 0 && n < 0) {
      error(node, shown + "must not be negative");
    } else if (n < range.min) {
      error(node, shown + "must be at least " + std::to_string(range.min));
    } else {
      error(node, shown + "must be at most " + std::to_string(range.max));
    }
    return std::nullopt;
  }

  // A duration string of at least `min_us`, at most core::kMaxPeriodUs.
  std::optional<std::int64_t> read_duration(const toml::node& node, const std::string& what,
                                            std::int64_t min_us) {
    const auto* value = expect<std::string>(node, what, " such as \"1s\"");
    if (value == nullptr) return std::nullopt;
    const std::string& text = value->get();
    const std::string shown = what + " " + quote(text) + ": ";
    const core::DurationParse parsed = core::parse_duration(text);
    if (!parsed.us) {
      error(node, shown + (parsed.error.empty() ? "not a duration" : parsed.error));
      return std::nullopt;
    }
    const std::int64_t us = *parsed.us;
    if (us < min_us) {
      error(node, shown + (min_us == 1 ? "must be greater than zero" : "must not be negative"));
      return std::nullopt;
    }
    if (us > core::kMaxPeriodUs) {
      constexpr std::int64_t kUsPerDay = std::int64_t{86'400} * 1'000'000;
      error(node,
            shown + "must be at most " + std::to_string(core::kMaxPeriodUs / kUsPerDay) + "d");
      return std::nullopt;
    }
    return us;
  }

  // A duration string within `range`.
  std::optional<std::int64_t> read_duration_in(const toml::node& node, const std::string& what,
                                               DurationRange range) {
    const auto* value = expect<std::string>(node, what, " such as \"1s\"");
    if (value == nullptr) return std::nullopt;
    const std::string& text = value->get();
    const std::string shown = what + " " + quote(text) + ": ";
    const core::DurationParse parsed = core::parse_duration(text);
    if (!parsed.us) {
      error(node, shown + (parsed.error.empty() ? "not a duration" : parsed.error));
      return std::nullopt;
    }
    if (*parsed.us < range.min_us) {
      error(node, shown + "must be at least " + core::format_duration(range.min_us));
      return std::nullopt;
    }
    if (*parsed.us > range.max_us) {
      error(node, shown + "must be at most " + core::format_duration(range.max_us));
      return std::nullopt;
    }
    return *parsed.us;
  }

  // One of `allowed`, or nullopt after reporting the choices.
  std::optional<std::string> read_choice(const toml::node& node, const std::string& what,
                                         std::span<const std::string_view> allowed) {
    const auto* value = expect<std::string>(node, what);
    if (value == nullptr) return std::nullopt;
    const std::string& text = value->get();
    if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) return text;
    std::string list;
    for (std::size_t i = 0; i < allowed.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ");
      list += allowed[i];
    }
    error(node, what + " " + quote(text) + ": must be " + list);
    return std::nullopt;
  }

  // ----- [daemon] ---------------------------------------------------------

  // Fills `out` from `daemon`; `max_rules` becomes nullopt if its value is bad
  // (the rule count is then not checked: one error is enough).
  void read_daemon(const toml::table& daemon, DaemonSettings& out,
                   std::optional<std::int64_t>& max_rules) {
    const std::string prefix = "daemon: ";
    check_keys(daemon, kDaemonKeys, prefix);
    auto what = [&](std::string_view key) { return prefix + std::string(key); };

    if (const toml::node* node = daemon.get("node_id")) {
      if (const auto* v = expect<std::string>(*node, what("node_id"))) out.node_id = v->get();
    }
    if (const toml::node* node = daemon.get("socket")) {
      if (const auto* v = expect<std::string>(*node, what("socket"))) {
        const std::string& path = v->get();
        if (path.find('\0') != std::string::npos) {
          error(*node, what("socket") + " " + quote(path) + ": must not contain a NUL byte");
        } else if (path.size() > kMaxSocketPathBytes) {
          error(*node, what("socket") + " " + quote(path) + ": longer than " +
                           std::to_string(kMaxSocketPathBytes) +
                           " bytes, the most a Unix socket address holds");
        } else {
          out.socket_path = path;
        }
      }
    }
    if (const toml::node* node = daemon.get("socket_mode")) {
      // A bare integer would be read as decimal (660 is not 0660), so only the
      // unambiguous octal string is accepted.
      if (const auto* v = expect<std::string>(*node, what("socket_mode"),
                                              " of octal digits such as \"0660\"")) {
        if (const auto mode = parse_socket_mode(v->get())) {
          out.socket_mode = *mode;
        } else {
          error(*node, what("socket_mode") + " " + quote(v->get()) +
                           ": must be 3 or 4 octal digits, at most 0777");
        }
      }
    }
    if (const toml::node* node = daemon.get("log_level")) {
      if (auto level = read_choice(*node, what("log_level"), kLogLevels)) {
        out.log_level = std::move(*level);
      }
    }
    if (const toml::node* node = daemon.get("log_format")) {
      if (auto format = read_choice(*node, what("log_format"), kLogFormats)) {
        out.log_format = std::move(*format);
      }
    }
    read_uint32(daemon, "max_frame_bytes", prefix, kMaxFrameBytesRange, out.max_frame_bytes);
    read_uint32(daemon, "max_response_bytes", prefix, kMaxResponseBytesRange,
                out.max_response_bytes);
    read_uint32(daemon, "max_checks_per_frame", prefix, kMaxChecksPerFrameRange,
                out.max_checks_per_frame);
    read_uint32(daemon, "max_connections", prefix, kMaxConnectionsRange, out.max_connections);
    if (const toml::node* node = daemon.get("max_keys")) {
      if (auto n = read_integer(*node, what("max_keys"), kMaxKeysRange)) {
        out.limiter.max_keys = static_cast<std::size_t>(*n);
      }
    }
    if (const toml::node* node = daemon.get("key_table_full")) {
      static constexpr std::string_view kPolicies[] = {"allow", "deny"};
      if (auto policy = read_choice(*node, what("key_table_full"), kPolicies)) {
        out.limiter.key_table_full =
            *policy == "deny" ? core::KeyTableFullPolicy::kDeny : core::KeyTableFullPolicy::kAllow;
      }
    }
    if (const toml::node* node = daemon.get("inline_limits")) {
      if (const auto* v = expect<bool>(*node, what("inline_limits"))) {
        out.limiter.allow_inline_limits = v->get();
      }
    }
    if (const toml::node* node = daemon.get("allow_reset")) {
      if (const auto* v = expect<bool>(*node, what("allow_reset"))) out.allow_reset = v->get();
    }
    if (const toml::node* node = daemon.get("rules_state_file")) {
      if (const auto* v = expect<std::string>(*node, what("rules_state_file"))) {
        out.rules_state_file = v->get();
      }
    }
    if (const toml::node* node = daemon.get("sweep_interval")) {
      if (auto us = read_duration(*node, what("sweep_interval"), 1)) out.sweep_interval_us = *us;
    }
    read_uint32(daemon, "sweep_batch", prefix, kSweepBatchRange, out.sweep_batch);
    if (const toml::node* node = daemon.get("shutdown_grace")) {
      if (auto us = read_duration(*node, what("shutdown_grace"), 0)) out.shutdown_grace_us = *us;
    }
    if (const toml::node* node = daemon.get("write_timeout")) {
      if (auto us = read_duration(*node, what("write_timeout"), 0)) out.write_timeout_us = *us;
    }
    if (const toml::node* node = daemon.get("idle_timeout")) {
      if (auto us = read_duration(*node, what("idle_timeout"), 0)) out.idle_timeout_us = *us;
    }
    if (const toml::node* node = daemon.get("busy_poll")) {
      if (auto us = read_duration_in(*node, what("busy_poll"), kBusyPollRange)) {
        out.busy_poll_us = *us;
      }
    }
    if (const toml::node* node = daemon.get("max_descriptors_per_check")) {
      if (auto n = read_integer(*node, what("max_descriptors_per_check"), kMaxDescriptorsPerCheckRange)) {
        out.limiter.max_descriptors_per_check = static_cast<std::size_t>(*n);
      }
    }
    if (const toml::node* node = daemon.get("max_rules")) {
      max_rules = read_integer(*node, what("max_rules"), kMaxRulesRange);
    }
  }

  void read_uint32(const toml::table& table, std::string_view key, const std::string& prefix,
                   IntRange range, std::uint32_t& out) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return;
    if (auto n = read_integer(*node, prefix + std::string(key), range)) {
      out = static_cast<std::uint32_t>(*n);
    }
  }

  // ----- [redis] ---------------------------------------------------------

  void read_redis(const toml::table& redis, RedisSettings& out) {
    const std::string prefix = "redis: ";
    check_keys(redis, kRedisKeys, prefix);
    auto what = [&](std::string_view key) { return prefix + std::string(key); };
    if (const toml::node* node = redis.get("addresses")) {
      if (const auto* list =
              expect<toml::array>(*node, what("addresses"), " of \"host:port\" strings")) {
        out.addresses.clear();
        if (list->empty()) error(*node, what("addresses") + ": at least one host:port");
        if (list->size() > kMaxRedisAddresses) {
          error((*list)[kMaxRedisAddresses],
                what("addresses") + ": too many: " + std::to_string(list->size()) +
                    ", at most " + std::to_string(kMaxRedisAddresses));
        }
        for (const toml::node& element : *list) {
          if (auto address = read_host_port(element, what("addresses") + " entry")) {
            out.addresses.push_back(std::move(*address));
          }
        }
      }
    }
    if (const toml::node* node = redis.get("cluster")) {
      if (const auto* v = expect<bool>(*node, what("cluster"))) out.cluster = v->get();
    }
    if (const toml::node* node = redis.get("tls")) {
      if (const auto* v = expect<bool>(*node, what("tls")); v != nullptr && v->get()) {
        error(*node, what("tls") +
                         " = true: not supported: Debian 12's hiredis (0.14) has no TLS; reach "
                         "Redis over loopback or a private network, or through a TLS tunnel "
                         "(stunnel) on this host");
      }
    }
    for (const auto& [key, field] :
         {std::pair{"username", &out.username}, std::pair{"password_file", &out.password_file}}) {
      if (const toml::node* node = redis.get(key)) {
        if (const auto* v = expect<std::string>(*node, what(key))) {
          if (v->get().find('\0') != std::string::npos) {
            error(*node, what(key) + ": must not contain a NUL byte");
          } else {
            *field = v->get();
          }
        }
      }
    }
    if (const toml::node* node = redis.get("key_prefix")) {
      if (const auto* v = expect<std::string>(*node, what("key_prefix"))) {
        if (v->get().size() > kMaxRedisKeyPrefixBytes) {
          error(*node, what("key_prefix") + ": at most " +
                           std::to_string(kMaxRedisKeyPrefixBytes) + " bytes");
        } else {
          out.key_prefix = v->get();
        }
      }
    }
    read_cluster_duration(redis, "sync_interval", prefix, kRedisSyncIntervalRange,
                          out.sync_interval_us);
    read_cluster_duration(redis, "connect_timeout", prefix, kRedisTimeoutRange,
                          out.connect_timeout_us);
    read_cluster_duration(redis, "command_timeout", prefix, kRedisTimeoutRange,
                          out.command_timeout_us);
    read_uint32(redis, "max_writes_per_batch", prefix, kRedisBatchKeysRange,
                out.max_writes_per_batch);
    read_uint32(redis, "max_reads_per_batch", prefix, IntRange{0, kRedisBatchKeysRange.max},
                out.max_reads_per_batch);
    read_cluster_duration(redis, "standin_max", prefix, kRedisStandinRange, out.standin_max_us);
  }

  // ----- [http] and [grpc] ------------------------------------------------

  void read_http(const toml::table& http, HttpSettings& out) {
    const std::string prefix = "http: ";
    check_keys(http, kHttpKeys, prefix);
    auto what = [&](std::string_view key) { return prefix + std::string(key); };
    if (const toml::node* node = http.get("listen")) {
      if (auto address = read_host_port(*node, what("listen"))) out.listen = std::move(*address);
    }
    if (const toml::node* node = http.get("deny_status")) {
      if (const auto* v = expect<std::int64_t>(*node, what("deny_status"))) {
        if (v->get() == 429 || v->get() == 403) {
          out.deny_status = static_cast<std::uint32_t>(v->get());
        } else {
          error(*node, what("deny_status") + " " + std::to_string(v->get()) +
                           ": must be 429 or 403 (nginx auth_request turns any other denial "
                           "status into a 500)");
        }
      }
    }
    if (const toml::node* node = http.get("ietf_headers")) {
      if (const auto* v = expect<bool>(*node, what("ietf_headers"))) out.ietf_headers = v->get();
    }
    read_uint32(http, "max_body_bytes", prefix, kHttpBodyBytesRange, out.max_body_bytes);
    read_uint32(http, "max_header_bytes", prefix, kHttpHeaderBytesRange, out.max_header_bytes);
    read_uint32(http, "max_connections", prefix, kMaxConnectionsRange, out.max_connections);
    if (const toml::node* node = http.get("request_timeout")) {
      if (auto us = read_duration(*node, what("request_timeout"), 1)) out.request_timeout_us = *us;
    }
    if (const toml::node* node = http.get("idle_timeout")) {
      if (auto us = read_duration(*node, what("idle_timeout"), 1)) out.idle_timeout_us = *us;
    }
    if (const toml::node* node = http.get("ready_after_seeds_unreachable")) {
      if (auto us = read_duration(*node, what("ready_after_seeds_unreachable"), 0)) {
        out.ready_after_seeds_unreachable_us = *us;
      }
    }
    if (const toml::node* node = http.get("rules_api")) {
      if (const auto* v = expect<bool>(*node, what("rules_api"))) out.rules_api = v->get();
    }
    if (const toml::node* node = http.get("rules_token_file")) {
      if (const auto* v = expect<std::string>(*node, what("rules_token_file"))) {
        out.rules_token_file = v->get();
      }
    }
  }

  void read_grpc(const toml::table& grpc, GrpcSettings& out) {
    const std::string prefix = "grpc: ";
    check_keys(grpc, kGrpcKeys, prefix);
    auto what = [&](std::string_view key) { return prefix + std::string(key); };
    if (const toml::node* node = grpc.get("listen")) {
      if (auto address = read_host_port(*node, what("listen"))) out.listen = std::move(*address);
    }
    if (const toml::node* node = grpc.get("unix_socket")) {
      if (const auto* v = expect<std::string>(*node, what("unix_socket"))) {
        const std::string& path = v->get();
        if (path.empty() || path.find('\0') != std::string::npos ||
            path.size() > kMaxSocketPathBytes) {
          error(*node, what("unix_socket") + " " + quote(path) + ": must be a path of 1 to " +
                           std::to_string(kMaxSocketPathBytes) + " bytes without NUL");
        } else {
          out.unix_socket = path;
        }
      }
    }
    if (const toml::node* node = grpc.get("ietf_headers")) {
      if (const auto* v = expect<bool>(*node, what("ietf_headers"))) out.ietf_headers = v->get();
    }
    read_uint32(grpc, "max_message_bytes", prefix, kGrpcMessageBytesRange, out.max_message_bytes);
    read_uint32(grpc, "max_pending", prefix, kGrpcMaxPendingRange, out.max_pending);
  }

  // ----- [cluster] --------------------------------------------------------

  // A "host:port" string (the text itself is kept: the shell splits it again
  // with parse_host_port), or nullopt after reporting why not.
  std::optional<std::string> read_host_port(const toml::node& node, const std::string& what,
                                            std::string* host = nullptr) {
    const auto* value = expect<std::string>(node, what, " such as \"10.0.0.1:7946\"");
    if (value == nullptr) return std::nullopt;
    std::string problem;
    if (!parse_host_port(value->get(), host, nullptr, &problem)) {
      error(node, what + " " + quote(value->get()) + ": " + problem);
      return std::nullopt;
    }
    return value->get();
  }

  // Reads the duration at `key` into `out`; false if the key is present but bad.
  bool read_cluster_duration(const toml::table& table, std::string_view key,
                             const std::string& prefix, DurationRange range, std::int64_t& out) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return true;
    const auto us = read_duration_in(*node, prefix + std::string(key), range);
    if (us) out = *us;
    return us.has_value();
  }

  // `lower` (at `lower_key`) must not exceed `upper` (at `upper_key`); both
  // already valid. The error goes to whichever of the two the file sets,
  // preferring the lower one.
  void check_order(const toml::table& table, const std::string& prefix, std::string_view lower_key,
                   std::int64_t lower, std::string_view upper_key, std::int64_t upper) {
    if (lower <= upper) return;
    const toml::node* lower_node = table.get(lower_key);
    const toml::node* upper_node = table.get(upper_key);
    const std::string lower_name(lower_key);
    const std::string upper_name(upper_key);
    // Both passed read_duration_in, so a node present here holds a string.
    const auto text = [](const toml::node& node) { return quote(node.value_or(std::string())); };
    if (lower_node != nullptr) {
      error(*lower_node, prefix + lower_name + " " + text(*lower_node) + ": must not exceed " +
                             upper_name + " (" + core::format_duration(upper) +
                             (upper_node != nullptr ? "" : " by default") + ")");
    } else if (upper_node != nullptr) {
      error(*upper_node, prefix + upper_name + " " + text(*upper_node) +
                             ": must not be less than " + lower_name + " (" +
                             core::format_duration(lower) + " by default); set " + lower_name +
                             " too");
    }
  }

  void read_cluster(const toml::table& cluster, ClusterSettings& out) {
    const std::string prefix = "cluster: ";
    check_keys(cluster, kClusterKeys, prefix);
    auto what = [&](std::string_view key) { return prefix + std::string(key); };

    const toml::node* mode_node = cluster.get("mode");
    if (mode_node != nullptr) {
      if (auto mode = read_choice(*mode_node, what("mode"), kClusterModes)) {
        out.mode = *mode == "gossip"  ? ClusterMode::kGossip
                   : *mode == "mesh"  ? ClusterMode::kMesh
                   : *mode == "redis" ? ClusterMode::kRedis
                                      : ClusterMode::kNone;
      }
    }
    if (const toml::node* node = cluster.get("name")) {
      if (const auto* v = expect<std::string>(*node, what("name"))) {
        if (valid_cluster_name(v->get())) {
          out.name = v->get();
        } else {
          error(*node, what("name") + " " + quote(v->get()) + ": must be 1 to " +
                           std::to_string(kMaxClusterNameBytes) +
                           " characters from A-Z a-z 0-9 _ . : -");
        }
      }
    }
    const toml::node* bind_node = cluster.get("bind");
    std::string bind_host;
    bool bind_wildcard = false;
    if (bind_node != nullptr) {
      if (auto bind = read_host_port(*bind_node, what("bind"), &bind_host)) {
        out.bind = std::move(*bind);
        bind_wildcard = is_wildcard_host(bind_host);
      }
    }
    const toml::node* advertise_node = cluster.get("advertise");
    if (advertise_node != nullptr) {
      std::string host;
      if (auto advertise = read_host_port(*advertise_node, what("advertise"), &host)) {
        if (is_wildcard_host(host)) {
          error(*advertise_node, what("advertise") + " " + quote(*advertise) +
                                     ": a wildcard address peers cannot reach");
        } else {
          out.advertise = std::move(*advertise);
        }
      }
    }
    if (const toml::node* node = cluster.get("seeds")) {
      if (const auto* seeds =
              expect<toml::array>(*node, what("seeds"), " of \"host:port\" strings")) {
        if (seeds->size() > kMaxSeeds) {
          error((*seeds)[kMaxSeeds], what("seeds") +
                                         ": too many seeds: " + std::to_string(seeds->size()) +
                                         ", at most " + std::to_string(kMaxSeeds));
        }
        for (const toml::node& element : *seeds) {
          if (auto seed = read_host_port(element, what("seeds") + " entry")) {
            out.seeds.push_back(std::move(*seed));
          }
        }
      }
    }
    bool secret_given = false;
    if (const toml::node* node = cluster.get("secret_file")) {
      secret_given = true;
      if (const auto* v = expect<std::string>(*node, what("secret_file"))) {
        const std::string& path = v->get();
        if (path.empty()) {
          error(*node, what("secret_file") + " must not be empty");
        } else if (path.find('\0') != std::string::npos) {
          error(*node, what("secret_file") + " " + quote(path) + ": must not contain a NUL byte");
        } else {
          out.secret_file = path;
        }
      }
    }

    read_cluster_duration(cluster, "gossip_interval", prefix, kGossipIntervalRange,
                          out.gossip_interval_us);
    read_cluster_duration(cluster, "anti_entropy_interval", prefix, kAntiEntropyIntervalRange,
                          out.anti_entropy_interval_us);
    const bool probe_interval_ok = read_cluster_duration(
        cluster, "probe_interval", prefix, kProbeIntervalRange, out.probe_interval_us);
    const bool probe_timeout_ok = read_cluster_duration(cluster, "probe_timeout", prefix,
                                                        kProbeTimeoutRange, out.probe_timeout_us);
    read_cluster_duration(cluster, "suspicion_timeout", prefix, kSuspicionTimeoutRange,
                          out.suspicion_timeout_us);
    read_cluster_duration(cluster, "dead_retention", prefix, kDeadRetentionRange,
                          out.dead_retention_us);
    // An interval where 0 means never and anything else has a floor.
    auto read_never_or_at_least = [&](const char* name, DurationRange range,
                                      std::int64_t min_us, std::int64_t& out_us) {
      std::int64_t value_us = out_us;
      if (!read_cluster_duration(cluster, name, prefix, range, value_us)) return;
      if (value_us != 0 && value_us < min_us) {
        const toml::node& node = *cluster.get(name);
        error(node, prefix + name + " " + quote(node.value_or(std::string())) +
                        ": must be 0s (never) or at least " + core::format_duration(min_us));
      } else {
        out_us = value_us;
      }
    };
    read_never_or_at_least("rejoin_interval", kRejoinIntervalRange, kRejoinIntervalMinUs,
                           out.rejoin_interval_us);
    read_never_or_at_least("table_sync_interval", kTableSyncIntervalRange,
                           kTableSyncIntervalMinUs, out.table_sync_interval_us);
    const bool backoff_min_ok =
        read_cluster_duration(cluster, "reconnect_backoff_min", prefix, kReconnectBackoffRange,
                              out.reconnect_backoff_min_us);
    const bool backoff_max_ok =
        read_cluster_duration(cluster, "reconnect_backoff_max", prefix, kReconnectBackoffRange,
                              out.reconnect_backoff_max_us);
    read_uint32(cluster, "fanout", prefix, kFanoutRange, out.fanout);
    read_uint32(cluster, "mtu_bytes", prefix, kMtuBytesRange, out.mtu_bytes);
    read_uint32(cluster, "indirect_probes", prefix, kIndirectProbesRange, out.indirect_probes);
    read_uint32(cluster, "max_members", prefix, kMaxMembersRange, out.max_members);
    read_uint32(cluster, "max_peer_queue_bytes", prefix, kMaxPeerQueueBytesRange,
                out.max_peer_queue_bytes);
    read_uint32(cluster, "max_packets_per_round", prefix, kMaxPacketsPerRoundRange,
                out.max_packets_per_round);
    read_cluster_duration(cluster, "counter_retention", prefix, kCounterRetentionRange,
                          out.counter_retention_us);
    if (const toml::node* node = cluster.get("fair_share")) {
      if (const auto* v = expect<bool>(*node, prefix + "fair_share")) out.fair_share = v->get();
    }
    read_uint32(cluster, "max_rules_bytes", prefix, kMaxRulesBytesRange, out.max_rules_bytes);
    read_cluster_duration(cluster, "replay_max_age", prefix, kReplayMaxAgeRange,
                          out.replay_max_age_us);
    if (const toml::node* node = cluster.get("accept_unsequenced")) {
      if (const auto* v = expect<bool>(*node, prefix + "accept_unsequenced")) {
        out.accept_unsequenced = v->get();
      }
    }
    read_uint32(cluster, "max_origins", prefix, kMaxOriginsRange, out.max_origins);
    read_uint32(cluster, "max_ledger_keys", prefix, kMaxLedgerKeysRange, out.max_ledger_keys);
    read_uint32(cluster, "max_entries_per_key", prefix, kMaxEntriesPerKeyRange,
                out.max_entries_per_key);
    read_uint32(cluster, "owners_per_key", prefix, kOwnersPerKeyRange, out.owners_per_key);
    read_uint32(cluster, "routed_max_origins", prefix, kRoutedMaxOriginsRange,
                out.routed_max_origins);
    read_uint32(cluster, "routed_min_members", prefix, kRoutedMinMembersRange,
                out.routed_min_members);

    // Relations between keys, judged only on values that passed on their own.
    if (probe_interval_ok && probe_timeout_ok) {
      check_order(cluster, prefix, "probe_timeout", out.probe_timeout_us, "probe_interval",
                  out.probe_interval_us);
    }
    if (backoff_min_ok && backoff_max_ok) {
      check_order(cluster, prefix, "reconnect_backoff_min", out.reconnect_backoff_min_us,
                  "reconnect_backoff_max", out.reconnect_backoff_max_us);
    }
    // Redis mode has no peer port: Redis carries the counters.
    if (out.mode != ClusterMode::kNone && out.mode != ClusterMode::kRedis) {
      const std::string mode_name(cluster_mode_name(out.mode));
      if (!secret_given) {
        // mode_node is set: only the file can make the mode other than none.
        error(*mode_node, "cluster mode " + mode_name +
                              " needs secret_file (the keyring that authenticates peers)");
      }
      if (bind_wildcard && advertise_node == nullptr) {
        error(*bind_node, what("bind") + " " + quote(out.bind) +
                              ": a wildcard address peers cannot reach; set advertise to one "
                              "they can");
      }
    }
  }

  // ----- matchers ---------------------------------------------------------

  // A `match` table: descriptor key -> matcher, sorted by key.
  std::optional<std::vector<core::DescriptorMatch>> read_match(const toml::node& node,
                                                               const std::string& what,
                                                               bool allow_empty) {
    const auto* table = expect<toml::table>(node, what, " such as { user = \"alice\" }");
    if (table == nullptr) return std::nullopt;
    if (!allow_empty && table->empty()) {
      error(node, what + " must not be empty");
      return std::nullopt;
    }
    std::vector<core::DescriptorMatch> matches;
    bool ok = true;
    for (auto&& [key, value] : *table) {
      if (key.str().empty()) {
        error(key.source().begin, what + ": a descriptor key must not be empty");
        ok = false;
        continue;
      }
      auto matcher = read_value_matcher(value, what + "." + key_in_path(key.str()));
      if (!matcher) {
        ok = false;
        continue;
      }
      matches.push_back(core::DescriptorMatch{std::string(key.str()), std::move(*matcher)});
    }
    if (!ok) return std::nullopt;
    std::sort(matches.begin(), matches.end(),
              [](const core::DescriptorMatch& a, const core::DescriptorMatch& b) {
                return a.key < b.key;
              });
    return matches;
  }

  std::optional<core::ValueMatcher> read_value_matcher(const toml::node& node,
                                                       const std::string& what) {
    core::ValueMatcher matcher;
    if (const auto* exact = node.as<std::string>()) {
      matcher.kind = core::ValueMatchKind::kExact;
      matcher.pattern = exact->get();
      return matcher;
    }
    const auto* table = node.as<toml::table>();
    if (table == nullptr) {
      error(node, what + " must be a string or a table such as { prefix = \"/api/\" }, not " +
                      std::string(type_name(node)));
      return std::nullopt;
    }
    const std::size_t errors_before = errors_.size();
    check_keys(*table, kMatcherKeys, what + ": ");

    int patterns = 0;
    for (std::string_view key : {"equals", "prefix", "glob"}) {
      const toml::node* pattern_node = table->get(key);
      if (pattern_node == nullptr) continue;
      ++patterns;
      const auto* pattern = expect<std::string>(*pattern_node, what + "." + std::string(key));
      if (pattern == nullptr) continue;
      matcher.pattern = pattern->get();
      if (key == "equals") {
        matcher.kind = core::ValueMatchKind::kExact;
      } else if (key == "prefix") {
        matcher.kind = core::ValueMatchKind::kPrefix;
      } else {
        matcher.kind = core::ValueMatchKind::kGlob;
        std::string glob_error;
        matcher.glob = core::Glob::compile(matcher.pattern, &glob_error);
        if (!matcher.glob) {
          // The glob's message already quotes the pattern.
          error(*pattern_node,
                what + ": " +
                    (glob_error.empty() ? "invalid glob " + quote(matcher.pattern) : glob_error));
        }
      }
    }
    if (patterns > 1) {
      error(node, what + ": use only one of equals, prefix or glob");
    }
    if (const toml::node* each = table->get("each")) {
      if (const auto* flag = expect<bool>(*each, what + ".each")) matcher.each = flag->get();
    }
    if (errors_.size() != errors_before) return std::nullopt;
    return matcher;
  }

  // A match needing more descriptors than one check may carry would never
  // match: that is a mistake in the file, not a rule to keep.
  void check_matchable(const toml::node& node, const std::string& what,
                       const std::vector<core::DescriptorMatch>& match) {
    if (match.size() > max_descriptors_per_check_) {
      error(node, what + " names " + std::to_string(match.size()) +
                      " descriptors, but a check carries at most " +
                      std::to_string(max_descriptors_per_check_));
    }
  }

  // ----- [[rule]] ---------------------------------------------------------

  void read_rules(const toml::node& node, const std::optional<std::int64_t>& max_rules,
                  std::vector<core::Rule>& out) {
    const auto* rules = expect<toml::array>(node, "rule", " of tables ([[rule]])");
    if (rules == nullptr) return;
    if (max_rules && rules->size() > static_cast<std::size_t>(*max_rules)) {
      // Pointing at the first rule past the limit shows where the cut falls.
      error((*rules)[static_cast<std::size_t>(*max_rules)],
            "too many rules: " + std::to_string(rules->size()) +
                " [[rule]] entries, but daemon.max_rules is " + std::to_string(*max_rules));
    }
    for (std::size_t i = 0; i < rules->size(); ++i) {
      const toml::node& entry = (*rules)[i];
      const std::string label = "rule #" + std::to_string(i + 1);
      const auto* table = expect<toml::table>(entry, label, " ([[rule]])");
      if (table == nullptr) continue;
      if (auto rule = read_rule(*table, label)) {
        out.push_back(std::move(*rule));
      }
    }
  }

  std::optional<core::Rule> read_rule(const toml::table& table, const std::string& label) {
    const std::size_t errors_before = errors_.size();
    core::Rule rule;
    rule.where = where(table);

    // Messages name the rule once its name is known to be a string.
    std::string prefix = label + ": ";
    if (const toml::node* name_node = required(table, "name", prefix)) {
      if (const auto* name = expect<std::string>(*name_node, prefix + "name")) {
        rule.name = name->get();
        prefix = "rule " + quote(rule.name) + ": ";
        if (!valid_rule_name(rule.name)) {
          error(*name_node, "rule name " + quote(rule.name) + ": must be 1 to " +
                                std::to_string(kMaxRuleNameBytes) +
                                " characters from A-Z a-z 0-9 _ . : -");
        } else if (auto it = rule_names_.find(rule.name); it != rule_names_.end()) {
          error(*name_node, prefix + "duplicate rule name (first defined at line " +
                                std::to_string(it->second) + ")");
        } else {
          rule_names_.emplace(rule.name, table.source().begin.line);
        }
      }
    }
    check_keys(table, kRuleKeys, prefix);

    if (const toml::node* node = required(table, "match", prefix)) {
      if (auto match = read_match(*node, prefix + "match", /*allow_empty=*/true)) {
        rule.match = std::move(*match);
        check_matchable(*node, prefix + "match", rule.match);
      }
    }
    if (const toml::node* node = table.get("algorithm")) {
      if (const auto* name = expect<std::string>(*node, prefix + "algorithm")) {
        if (auto algorithm = core::algorithm_from_name(name->get())) {
          rule.algorithm = *algorithm;
        } else {
          std::string names;
          for (std::size_t i = 0; i < core::kAlgorithmCount; ++i) {
            names += (i == 0 ? "" : ", ") +
                     std::string(core::algorithm_name(static_cast<core::Algorithm>(i)));
          }
          error(*node, prefix + "unknown algorithm " + quote(name->get()) + " (supported: " +
                           names + ")");
        }
      }
    }
    const core::Algorithm algorithm = rule.algorithm;
    const bool is_concurrency = algorithm == core::Algorithm::kConcurrency;
    std::optional<std::int64_t> limit;
    std::optional<std::int64_t> period_us;
    std::optional<std::int64_t> burst;
    if (const toml::node* node = required(table, "limit", prefix)) {
      limit = read_integer(*node, prefix + "limit", kTokensRange);
    }
    read_algorithm_options(table, prefix, algorithm, rule.options);
    if (is_concurrency) {
      // Leases expire after lease_ttl; there is no period.
      reject_key(table, "period", prefix, "concurrency (leases expire after lease_ttl)");
      period_us = rule.options.lease_ttl_us > 0 ? rule.options.lease_ttl_us : 1;
    } else if (const toml::node* node = required(table, "period", prefix)) {
      period_us = read_duration(*node, prefix + "period", 1);
    }
    const bool uses_burst = algorithm == core::Algorithm::kTokenBucket ||
                            algorithm == core::Algorithm::kLeakyBucket ||
                            algorithm == core::Algorithm::kGcra ||
                            algorithm == core::Algorithm::kSmoothBursty;
    const toml::node* burst_node = table.get("burst");
    if (burst_node != nullptr && !uses_burst) {
      error(*burst_node, prefix + "burst does not apply to " + core::algorithm_name(algorithm) +
                             " (it applies to token_bucket, leaky_bucket, gcra, smooth_bursty)");
    } else if (burst_node != nullptr) {
      burst = read_integer(*burst_node, prefix + "burst", kTokensRange);
    } else {
      burst = limit;
    }

    std::optional<core::BucketParams> params;
    if (limit && period_us && burst) {
      params = core::BucketParams{*limit, *period_us, *burst};
      rule.params = *params;
      std::string why;
      if (errors_.size() == errors_before &&
          !core::make_algorithm_params(algorithm, *params, rule.options, &why)) {
        error(table, prefix + why);
      }
    }
    if (const toml::node* node = table.get("override")) {
      const auto* overrides =
          expect<toml::array>(*node, prefix + "override", " of tables ([[rule.override]])");
      if (overrides != nullptr && overrides->size() > kMaxOverridesPerRule) {
        error((*overrides)[kMaxOverridesPerRule],
              prefix + "too many overrides: " + std::to_string(overrides->size()) + ", at most " +
                  std::to_string(kMaxOverridesPerRule));
      }
      for (std::size_t i = 0; overrides != nullptr && i < overrides->size(); ++i) {
        auto override_rule =
            read_override((*overrides)[i], prefix + "override #" + std::to_string(i + 1), params,
                          /*rule_sets_burst=*/burst_node != nullptr);
        if (override_rule) {
          std::string why;
          if (!core::make_algorithm_params(algorithm, override_rule->params, rule.options, &why)) {
            error((*overrides)[i], prefix + "override #" + std::to_string(i + 1) + ": " + why);
          }
          rule.overrides.push_back(std::move(*override_rule));
        }
      }
    }

    if (errors_.size() != errors_before) return std::nullopt;
    return rule;
  }

  // Reports `key` in `table` as not applying to `what`.
  void reject_key(const toml::table& table, std::string_view key, const std::string& prefix,
                  const std::string& what) {
    if (const toml::node* node = table.get(key)) {
      error(*node, prefix + std::string(key) + " does not apply to " + what);
    }
  }

  // The rule keys beyond limit, period and burst: each is refused (located)
  // where the rule's algorithm does not use it.
  void read_algorithm_options(const toml::table& table, const std::string& prefix,
                              core::Algorithm algorithm, core::AlgorithmOptions& options) {
    using core::Algorithm;
    const std::string name = core::algorithm_name(algorithm);
    const bool smooth =
        algorithm == Algorithm::kSmoothBursty || algorithm == Algorithm::kSmoothWarmingUp;
    const auto only_for = [&](std::string_view key, bool applies, const std::string& which) {
      const toml::node* node = table.get(key);
      if (node != nullptr && !applies) {
        error(*node, prefix + std::string(key) + " does not apply to " + name + " (only to " +
                         which + ")");
        return static_cast<const toml::node*>(nullptr);
      }
      return node;
    };
    if (const toml::node* node = only_for("shaper", algorithm == Algorithm::kLeakyBucket,
                                          "leaky_bucket")) {
      if (const auto* flag = expect<bool>(*node, prefix + "shaper")) options.shaper = flag->get();
    }
    const bool shaper = algorithm == Algorithm::kLeakyBucket && options.shaper;
    if (const toml::node* node =
            only_for("max_delay", shaper || smooth,
                     "leaky_bucket with shaper = true, smooth_bursty, smooth_warming_up")) {
      if (auto us = read_duration(*node, prefix + "max_delay", 0)) options.max_delay_us = *us;
    }
    if (const toml::node* node =
            only_for("max_entries", algorithm == Algorithm::kSlidingLog, "sliding_log")) {
      if (auto n = read_integer(*node, prefix + "max_entries",
                                IntRange{1, core::alg::SlidingLog::kMaxEntriesBound})) {
        options.max_entries = *n;
      }
    }
    const bool warming = algorithm == Algorithm::kSmoothWarmingUp;
    if (const toml::node* node = only_for("warmup", warming, "smooth_warming_up")) {
      if (auto us = read_duration(*node, prefix + "warmup", 0)) options.warmup_us = *us;
    }
    if (const toml::node* node = only_for("cold_factor", warming, "smooth_warming_up")) {
      if (auto n = read_integer(*node, prefix + "cold_factor",
                                IntRange{1, core::alg::SmoothWarmingUp::kMaxColdFactor})) {
        options.cold_factor = *n;
      }
    }
    if (const toml::node* node =
            only_for("start", algorithm == Algorithm::kSmoothBursty, "smooth_bursty")) {
      if (const auto* start = expect<std::string>(*node, prefix + "start")) {
        if (start->get() == "empty") {
          options.start_empty = true;
        } else if (start->get() != "full") {
          error(*node,
                prefix + "unknown start " + quote(start->get()) + " (supported: full, empty)");
        }
      }
    }
    const bool concurrency = algorithm == Algorithm::kConcurrency;
    if (const toml::node* node = only_for("lease_ttl", concurrency, "concurrency")) {
      if (auto us = read_duration(*node, prefix + "lease_ttl", 1)) options.lease_ttl_us = *us;
    } else if (concurrency) {
      required(table, "lease_ttl", prefix);
    }
    if (const toml::node* node = table.get("local")) {
      if (const auto* flag = expect<bool>(*node, prefix + "local")) options.local = flag->get();
    }
    core::alg::ThrottleParams& throttle = options.throttle;
    if (const toml::node* node = table.get("mode")) {
      if (const auto* mode = expect<std::string>(*node, prefix + "mode")) {
        const auto* it = std::find(std::begin(kThrottleModes), std::end(kThrottleModes), mode->get());
        if (it == std::end(kThrottleModes)) {
          error(*node, prefix + "unknown mode " + quote(mode->get()) +
                           " (supported: hard, soft, shadow, elastic)");
        } else {
          throttle.mode = static_cast<core::alg::ThrottleMode>(it - std::begin(kThrottleModes));
        }
      }
    }
    const bool soft = throttle.mode == core::alg::ThrottleMode::kSoft;
    const bool elastic = throttle.mode == core::alg::ThrottleMode::kElastic;
    if (const toml::node* node = table.get("soft_percent")) {
      if (!soft) {
        error(*node, prefix + "soft_percent applies only with mode = \"soft\"");
      } else if (auto n = read_integer(*node, prefix + "soft_percent", IntRange{0, 100})) {
        throttle.soft_percent = *n;
      }
    } else if (soft) {
      required(table, "soft_percent", prefix);
    }
    if (const toml::node* node = table.get("elastic_threshold_percent")) {
      if (!elastic) {
        error(*node, prefix + "elastic_threshold_percent applies only with mode = \"elastic\"");
      } else if (auto n = read_integer(*node, prefix + "elastic_threshold_percent",
                                       IntRange{1, 100})) {
        throttle.elastic_threshold_permille = *n * 10;
      }
    } else if (elastic) {
      required(table, "elastic_threshold_percent", prefix);
    }
  }

  // `base` is the rule's own parameters (nullopt if they were invalid: the
  // override is then only checked, not built).
  std::optional<core::Override> read_override(const toml::node& node, const std::string& label,
                                              const std::optional<core::BucketParams>& base,
                                              bool rule_sets_burst) {
    const auto* table = expect<toml::table>(node, label, " ([[rule.override]])");
    if (table == nullptr) return std::nullopt;
    const std::size_t errors_before = errors_.size();
    const std::string prefix = label + ": ";
    check_keys(*table, kOverrideKeys, prefix);

    core::Override result;
    if (const toml::node* match_node = required(*table, "match", prefix)) {
      if (auto match = read_match(*match_node, prefix + "match", /*allow_empty=*/false)) {
        result.match = std::move(*match);
        check_matchable(*match_node, prefix + "match", result.match);
      }
    }
    const toml::node* multiplier_node = table->get("multiplier");
    const toml::node* limit_node = table->get("limit");
    const toml::node* period_node = table->get("period");
    const toml::node* burst_node = table->get("burst");
    std::optional<std::int64_t> multiplier;
    std::optional<std::int64_t> limit;
    std::optional<std::int64_t> period_us;
    std::optional<std::int64_t> burst;
    if (multiplier_node) {
      multiplier = read_integer(*multiplier_node, prefix + "multiplier", kMultiplierRange);
    }
    if (limit_node) limit = read_integer(*limit_node, prefix + "limit", kTokensRange);
    if (period_node) period_us = read_duration(*period_node, prefix + "period", 1);
    if (burst_node) burst = read_integer(*burst_node, prefix + "burst", kTokensRange);

    if (multiplier_node && (limit_node || burst_node)) {
      error(*multiplier_node, prefix + "use either multiplier or limit/burst");
    }
    if (!multiplier_node && !limit_node && !period_node && !burst_node) {
      // Identical parameters would only split the matching requests off into
      // buckets of their own, which is never what such an entry means.
      error(*table, prefix + "sets nothing: give multiplier, or limit, period and/or burst");
    }
    if (errors_.size() != errors_before || !base) return std::nullopt;

    core::BucketParams& params = result.params;
    params.period_us = period_us.value_or(base->period_us);
    if (multiplier) {
      const std::int64_t m = *multiplier;
      if (base->limit > core::kMaxTokens / m || base->burst > core::kMaxTokens / m) {
        error(*multiplier_node, prefix + "multiplier " + std::to_string(m) +
                                    ": the scaled limit or burst exceeds " +
                                    std::to_string(core::kMaxTokens));
        return std::nullopt;
      }
      params.limit = base->limit * m;
      params.burst = base->burst * m;
    } else {
      params.limit = limit.value_or(base->limit);
      // Burst follows the rule's explicit burst; when the rule left burst at
      // its default (= limit), the override's default is its own limit too.
      params.burst = burst ? *burst : rule_sets_burst ? base->burst : params.limit;
    }
    return result;
  }

  // ----- [[exempt]] -------------------------------------------------------

  void read_exemptions(const toml::node& node, std::vector<core::Exemption>& out) {
    const auto* entries = expect<toml::array>(node, "exempt", " of tables ([[exempt]])");
    if (entries == nullptr) return;
    for (std::size_t i = 0; i < entries->size(); ++i) {
      if (auto exemption = read_exemption((*entries)[i], "exempt #" + std::to_string(i + 1))) {
        out.push_back(std::move(*exemption));
      }
    }
  }

  std::optional<core::Exemption> read_exemption(const toml::node& node, const std::string& label) {
    const auto* table = expect<toml::table>(node, label, " ([[exempt]])");
    if (table == nullptr) return std::nullopt;
    const std::size_t errors_before = errors_.size();
    const std::string prefix = label + ": ";
    check_keys(*table, kExemptKeys, prefix);

    core::Exemption exemption;
    exemption.where = where(*table);
    if (const toml::node* match_node = required(*table, "match", prefix)) {
      if (auto match = read_match(*match_node, prefix + "match", /*allow_empty=*/false)) {
        exemption.match = std::move(*match);
        check_matchable(*match_node, prefix + "match", exemption.match);
      }
    }
    if (const toml::node* rules_node = table->get("rules")) {
      if (const auto* rules =
              expect<toml::array>(*rules_node, prefix + "rules", " of rule names")) {
        if (rules->empty()) {
          // An empty list reading as "every rule" would invert its meaning.
          error(*rules_node, prefix + "rules must not be empty (leave it out to skip every rule)");
        }
        for (const toml::node& element : *rules) {
          const auto* name = expect<std::string>(element, prefix + "rules entry");
          if (name == nullptr) continue;
          if (!rule_names_.contains(name->get())) {
            error(element, prefix + "unknown rule " + quote(name->get()));
            continue;
          }
          exemption.rules.push_back(name->get());
        }
      }
    }
    if (errors_.size() != errors_before) return std::nullopt;
    return exemption;
  }

  std::string file_;
  std::vector<ConfigError> errors_;
  std::size_t max_descriptors_per_check_ = core::LimiterOptions{}.max_descriptors_per_check;
  // Every validly named rule -> the line it starts on, including rules with
  // other errors: duplicates are caught, and an exemption naming a rule is not
  // blamed for that rule's own problems.
  std::map<std::string, std::uint32_t, std::less<>> rule_names_;
};

}  // namespace

std::vector<ConfigError> check_rules_for_cluster(const core::RuleSet& rules, ClusterMode mode) {
  std::vector<ConfigError> errors;
  if (mode == ClusterMode::kNone) return errors;
  for (const core::Rule& rule : rules.rules) {
    std::string why;
    const std::optional<core::AlgorithmParams> params =
        core::make_algorithm_params(rule.algorithm, rule.params, rule.options, &why);
    if (!params || rule.options.local) continue;
    if (core::replication_of(*params) == core::alg::Replication::kLocalOnly) {
      errors.push_back(ConfigError{
          rule.where.file, rule.where.line, rule.where.column,
          "rule " + quote(rule.name) + ": " + core::algorithm_name(rule.algorithm) +
              " cannot be shared by a cluster (a lease is held on the node that issued it, and "
              "in-flight counts go down, which consumption counters cannot express); set "
              "local = true to enforce it on each node separately, or run without [cluster]"});
    }
  }
  return errors;
}

std::string_view cluster_mode_name(ClusterMode mode) {
  switch (mode) {
    case ClusterMode::kNone:
      return "none";
    case ClusterMode::kGossip:
      return "gossip";
    case ClusterMode::kMesh:
      return "mesh";
    case ClusterMode::kRedis:
      return "redis";
  }
  return "none";
}

bool parse_host_port(std::string_view text, std::string* host, std::uint16_t* port,
                     std::string* error) {
  const auto fail = [&](std::string message) {
    if (error != nullptr) *error = std::move(message);
    return false;
  };
  if (text.empty()) return fail("empty; expected host:port, such as 10.0.0.1:7946");
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return fail("must not contain spaces or control characters");
  }
  std::string_view host_part;
  std::string_view port_part;
  bool bracketed = false;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("unclosed '[' around an IPv6 address");
    host_part = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return fail("missing port (expected [address]:port, such as [::1]:7946)");
    if (rest.front() != ':') return fail("expected ':' and a port after ']'");
    port_part = rest.substr(1);
    bracketed = true;
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return fail("missing port (expected host:port, such as 10.0.0.1:7946)");
    }
    host_part = text.substr(0, colon);
    port_part = text.substr(colon + 1);
    if (host_part.find(':') != std::string_view::npos) {
      return fail("an IPv6 address must be in brackets, as in [::1]:7946");
    }
  }

  if (host_part.empty()) return fail("missing host before the port");
  if (bracketed) {
    if (!valid_ipv6(host_part)) return fail("not an IPv6 address inside [ ]");
  } else if (std::all_of(host_part.begin(), host_part.end(),
                         [](char c) { return is_digit(c) || c == '.'; })) {
    // All digits and dots: meant as an IPv4 address, never a host name.
    if (!valid_ipv4(host_part)) return fail("not an IPv4 address");
  } else if (!valid_host_name(host_part)) {
    return fail("not a valid host name (labels of A-Z a-z 0-9 - _, separated by dots)");
  }

  if (port_part.empty()) return fail("missing port after ':'");
  if (!std::all_of(port_part.begin(), port_part.end(), is_digit)) {
    return fail("port must be a decimal number from 1 to 65535");
  }
  std::uint32_t number = 0;
  for (char c : port_part) {
    number = number * 10 + static_cast<std::uint32_t>(c - '0');
    if (number > 65'535) break;
  }
  if (number == 0 || number > 65'535) return fail("port must be from 1 to 65535");

  if (host != nullptr) *host = std::string(host_part);
  if (port != nullptr) *port = static_cast<std::uint16_t>(number);
  return true;
}

std::vector<std::string> split_seed_list(std::string_view comma_separated) {
  std::vector<std::string> seeds;
  std::size_t start = 0;
  while (start <= comma_separated.size()) {
    std::size_t comma = comma_separated.find(',', start);
    if (comma == std::string_view::npos) comma = comma_separated.size();
    std::string_view entry = comma_separated.substr(start, comma - start);
    while (!entry.empty() && (entry.front() == ' ' || entry.front() == '\t'))
      entry.remove_prefix(1);
    while (!entry.empty() && (entry.back() == ' ' || entry.back() == '\t')) entry.remove_suffix(1);
    if (!entry.empty()) seeds.emplace_back(entry);
    start = comma + 1;
  }
  return seeds;
}

std::string ConfigError::to_string() const {
  // Line 0 means the file as a whole (it could not be read).
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

namespace {

// Parses `text`; on a syntax error fills `failed` with it instead.
std::optional<toml::table> parse_toml(std::string_view text, std::string_view file_name,
                                      LoadResult& failed) {
  try {
    return toml::parse(text, file_name);
  } catch (const toml::parse_error& e) {
    failed.config.source = std::string(file_name);
    failed.errors.push_back(ConfigError{std::string(file_name), e.source().begin.line,
                                        e.source().begin.column,
                                        "invalid TOML: " + std::string(e.description())});
    return std::nullopt;
  }
}

}  // namespace

LoadResult load_config(std::string_view text, std::string_view file_name) {
  LoadResult failed;
  std::optional<toml::table> root = parse_toml(text, file_name, failed);
  if (!root) return failed;
  LoadResult result = Loader(file_name).load(*root);
  if (result.ok()) {
    // The file's rules as a rules document (comments and layout are not kept).
    toml::table rules;
    if (const toml::node* node = root->get("rule")) rules.insert("rule", *node);
    if (const toml::node* node = root->get("exempt")) rules.insert("exempt", *node);
    std::ostringstream text_out;
    if (!rules.empty()) text_out << toml::toml_formatter(rules) << '\n';
    result.config.rules_text = text_out.str();
  }
  return result;
}

std::string canonical_rules_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 1);
  for (const char c : text) {
    // Every CR right before a LF goes, a run of them too: dropping only the
    // last would leave a CRLF ("\r\r\n" -> "\r\n"), and the text would not
    // be canonical (a second pass would change it, and its digest).
    if (c == '\n') {
      while (!out.empty() && out.back() == '\r') out.pop_back();
    }
    out.push_back(c);
  }
  // The same at the end: "a\r" must not become "a\r\n".
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (!out.empty()) out.push_back('\n');
  return out;
}

LoadResult load_rules(std::string_view text, std::string_view name,
                      const RulesLoadOptions& options) {
  LoadResult failed;
  if (text.size() > kMaxConfigFileBytes) {
    failed.errors.push_back(ConfigError{std::string(name), 0, 0,
                                        "rules document is larger than " +
                                            std::to_string(kMaxConfigFileBytes >> 20) + " MiB"});
    return failed;
  }
  const std::string canonical = canonical_rules_text(text);
  std::optional<toml::table> root = parse_toml(canonical, name, failed);
  if (!root) return failed;
  LoadResult result = Loader(name).load_rules(*root, options);
  if (result.ok()) result.config.rules_text = canonical;
  return result;
}

LoadResult load_config_file(const std::string& path) {
  auto fail = [&](std::string message) {
    LoadResult result;
    result.config.source = path;
    result.errors.push_back(ConfigError{path, 0, 0, std::move(message)});
    return result;
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return fail(std::string("cannot open config file: ") + std::strerror(errno));
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (text.size() > kMaxConfigFileBytes) {
      return fail("config file is larger than " + std::to_string(kMaxConfigFileBytes >> 20) +
                  " MiB");
    }
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get())) {
    return fail(std::string("cannot read config file: ") + std::strerror(errno));
  }
  return load_config(text, path);
}

Config default_config() {
  Config config;
  config.source = std::string(kBuiltInSource);
  core::Rule rule;
  rule.name = "per-user";
  core::ValueMatcher each_user;
  each_user.kind = core::ValueMatchKind::kAny;
  each_user.each = true;
  rule.match.push_back(core::DescriptorMatch{"user", std::move(each_user)});
  rule.params = core::BucketParams{.limit = 10, .period_us = 1'000'000, .burst = 20};
  rule.where = core::SourceLocation{std::string(kBuiltInSource), 0, 0};
  config.rules.rules.push_back(std::move(rule));
  config.rules_text =
      "[[rule]]\nname = \"per-user\"\nmatch = { user = { each = true } }\nlimit = 10\n"
      "period = \"1s\"\nburst = 20\n";
  return config;
}

}  // namespace rlimit::config
