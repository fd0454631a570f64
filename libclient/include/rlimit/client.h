// rlimit::Client: asks a local rlimitd whether requests may proceed.
//
// Threading: a Client is NOT thread-safe. Use one Client per thread (they are
// cheap: one Unix socket each), or guard a shared one with a mutex. Distinct
// Clients never share state.
//
// Failure stance: when the daemon is unreachable, or slower than
// Options::timeout_ms, check() returns at once with `allowed` set by
// Options::fail_mode (open by default: "if we don't know whether we should
// rate-limit, we shouldn't") and `status` saying why. The Client reconnects by
// itself on a later call, no more often than the reconnect backoff allows.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlimit/export.h"

namespace rlimit {

struct Descriptor {
  std::string key;
  std::string value;
};

// An ad-hoc limit sent with the check instead of configured as a rule.
struct InlineLimit {
  std::string key;
  std::uint64_t limit = 0;
  std::uint64_t period_ms = 1000;
  std::uint64_t burst = 0;  // 0: same as limit
};

// What the daemon does with a check (docs/protocol.md, "Modes").
enum class CheckMode {
  kCheck,    // decide; consume when allowed
  kPeek,     // decide as kCheck would; consume nothing
  kReserve,  // admit now if the wait fits max_wait, consume now, report the wait (delay_us)
};

struct CheckRequest {
  std::vector<Descriptor> descriptors;
  std::uint64_t cost = 1;
  std::optional<InlineLimit> inline_limit;
  CheckMode mode = CheckMode::kCheck;
  // The longest wait the caller accepts: replaces the max_delay of the rules
  // that hand out waits (leaky_bucket shaper, smooth_*); in kReserve, bounds
  // the reservation. nullopt: none given (the rules' own; any reservation).
  std::optional<std::chrono::microseconds> max_wait;
};

enum class FailMode { kOpen, kClosed };

enum class DecisionStatus {
  kOk,             // decided by the daemon's rules (maybe none matched)
  kExempt,         // an exemption matched; nothing charged
  kInvalid,        // the daemon rejected the check; see `error`
  kKeyTableFull,   // the daemon could not track a new key; its policy decided
  kUnavailable,    // no daemon answered (connect failed, timeout, closed); FailMode decided
  kProtocolError,  // the daemon answered with an error; FailMode decided
};
// "ok", "exempt", "invalid", "key_table_full", "unavailable", "protocol_error".
RLIMIT_API const char* to_string(DecisionStatus status);

struct RuleStatus {
  std::string name;
  bool allowed = false;
  std::uint64_t limit = 0;
  std::uint64_t period_ms = 0;
  std::uint64_t burst = 0;
  std::uint64_t remaining = 0;
  std::int64_t retry_after_us = 0;  // 0 when allowed, -1 when never
  std::int64_t reset_after_us = 0;
  std::string algorithm;     // "token_bucket", "concurrency", ...; empty from an older daemon
  std::int64_t delay_us = 0;  // this rule's wait before proceeding (shaper, smooth_*, reserve)
  // A concurrency rule's lease: an opaque token (bytes) for release() or
  // extend() once the work is done. Empty when none.
  std::string lease;
  bool over_limit = false;  // refused by the algorithm, admitted by a soft/shadow/elastic mode
};

struct RLIMIT_API Decision {
  bool allowed = false;
  DecisionStatus status = DecisionStatus::kOk;
  std::string error;
  std::vector<RuleStatus> rules;
  // When allowed: how long to wait before proceeding (the longest of the
  // rules' delay_us). acquire() has already waited it.
  std::int64_t delay_us = 0;
  // Largest retry_after_us among denying rules (-1 if one never allows; 0 if allowed).
  std::int64_t retry_after_us() const;
  // The rules' lease tokens, in rule order: release each when the work is done.
  std::vector<std::string> leases() const;
  // Some rule's throttle mode admitted what its algorithm refused.
  bool over_limit() const;
};

// What the daemon did with one lease (release() and extend()).
enum class LeaseStatus {
  kDone,       // released (or extended)
  kUnknown,    // no such live lease: expired, released already, never issued
  kNotALease,  // the token names no concurrency rule's key (or its rule changed)
  kMalformed,  // the token is not one the daemon issued (too short)
  kFailed,     // no answer (daemon unavailable, error reply): see the error text
};
// "done", "unknown", "not_a_lease", "malformed", "failed".
RLIMIT_API const char* to_string(LeaseStatus status);

struct ResetResult {
  std::uint64_t keys_reset = 0;    // keys that held state and were forgotten
  std::vector<std::string> rules;  // rules (and inline limit key) the reset touched
};

struct RuleInfo {
  std::string name;
  std::string algorithm;
  std::uint64_t limit = 0;
  std::uint64_t period_ms = 0;
  std::uint64_t burst = 0;
  std::string match;
  std::uint32_t overrides = 0;
};

struct DaemonStatus {
  std::string node_id;
  std::string version;
  std::uint64_t uptime_ms = 0;
  std::uint64_t keys = 0;
  std::uint64_t max_keys = 0;
  std::string config_source;
  std::vector<RuleInfo> rules;
  std::vector<std::pair<std::string, std::uint64_t>> counters;  // in daemon order
};

// One node of the daemon's cluster, as that daemon sees it.
struct RLIMIT_API ClusterMember {
  std::string node_id;
  std::string address;                  // host:port of its peer socket
  std::string state;                    // "alive", "suspect", "dead", "left"
  std::uint64_t incarnation = 0;        // bumped by the node to refute suspicion
  std::uint64_t seq = 0;                // latest state sequence number seen from it
  std::int64_t last_heard_ms_ago = -1;  // -1: never heard from directly
  bool self = false;                    // the daemon answering
  // The rule set it advertises (self: the one in force): version (0: its
  // config file's), the node that applied it, SHA-256 of the text (32 raw
  // bytes; empty from a daemon too old to say).
  std::uint64_t rules_version = 0;
  std::string rules_origin;
  std::string rules_digest;
};

struct RLIMIT_API ClusterMembers {
  std::string cluster;                 // cluster name; empty when clustering is off
  std::string mode;                    // "none", "gossip", "mesh"
  std::vector<ClusterMember> members;  // in the daemon's order
};

// A rules document's problem, located in the name it was sent under.
struct RulesError {
  std::string file;
  std::uint32_t line = 0;  // 0: the document as a whole
  std::uint32_t column = 0;
  std::string message;
  std::string to_string() const;  // "file:line:column: message"
};

// The answer to rules(), validate_rules() and apply_rules() (docs/cluster.md,
// "Rules across the cluster").
struct RulesResult {
  enum class Status {
    kOk,
    kInvalid,  // the document is not valid (errors); nothing changed
    kFailed,   // valid but not applied (message: e.g. the state file); nothing changed
  };
  Status status = Status::kOk;
  // The rules in force after the call: version (0: the config file's), the
  // node that applied them, SHA-256 of the text (32 raw bytes), and (rules()
  // only) the text.
  std::uint64_t version = 0;
  std::string origin;
  std::string digest;
  std::string text;
  std::vector<RulesError> errors;
  std::string message;
  // apply_rules(): rules whose state was kept, changed (state reset), added, removed.
  std::uint32_t kept = 0, changed = 0, added = 0, removed = 0;
};

struct ClientOptions {
  std::string socket_path;       // empty: the default ($XDG_RUNTIME_DIR or /tmp)/rlimitd.sock
  std::uint32_t timeout_ms = 5;  // per call, connect included
  FailMode fail_mode = FailMode::kOpen;
  std::uint32_t reconnect_backoff_min_ms = 10;    // after a failed connect
  std::uint32_t reconnect_backoff_max_ms = 1000;  // doubling up to this
  std::uint32_t max_frame_bytes = 64 * 1024;
  // submit(): at most this many tickets outstanding (submitted, not yet
  // received); a submit beyond it is not sent, and its ticket is answered at
  // once by FailMode with kUnavailable and an error naming this bound.
  std::uint32_t max_pending = 65536;
};

class RLIMIT_API Client {
 public:
  // Does not connect: the first call does. A moved-from Client may only be
  // destroyed or assigned to.
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  // One synchronous check.
  Decision check(const std::vector<Descriptor>& descriptors, std::uint64_t cost = 1);
  // For literals: check({{"user", "alice"}}) would otherwise be ambiguous with
  // the CheckRequest overload (an aggregate whose first member is the list).
  Decision check(std::initializer_list<Descriptor> descriptors, std::uint64_t cost = 1);
  Decision check(const CheckRequest& request);

  // The modes (CheckRequest::mode set here, the rest as given):
  // peek() decides as check() would and consumes nothing.
  Decision peek(const CheckRequest& request);
  // reserve() consumes now and returns the wait before proceeding in
  // delay_us, refusing when it would exceed `max_wait` (nullopt: the
  // request's own max_wait, or none).
  Decision reserve(const CheckRequest& request,
                   std::optional<std::chrono::microseconds> max_wait = std::nullopt);
  // acquire() reserves, then sleeps delay_us in this thread (beyond
  // timeout_ms, which bounds the round trip only) before returning.
  Decision acquire(const CheckRequest& request,
                   std::optional<std::chrono::microseconds> max_wait = std::nullopt);

  // Releases a concurrency lease (RuleStatus::lease), or with extend()
  // restarts its TTL (a heartbeat for long work). `error` says why on kFailed.
  LeaseStatus release(std::string_view lease, std::string* error = nullptr);
  LeaseStatus extend(std::string_view lease, std::string* error = nullptr);
  // Several at once (e.g. Decision::leases()), one round trip; a status per
  // lease, in order (all kFailed when there was no answer).
  std::vector<LeaseStatus> release_leases(std::span<const std::string> leases, bool extend = false,
                                          std::string* error = nullptr);

  // Forgets the daemon's state for every key a check with these
  // descriptors (and inline limit; cost and mode are ignored) would touch,
  // or nullopt with `error` set (unavailable, bad input, or a daemon with
  // allow_reset = false).
  std::optional<ResetResult> reset(const CheckRequest& request, std::string* error = nullptr);
  std::optional<ResetResult> reset(std::span<const Descriptor> descriptors,
                                   std::string* error = nullptr);

  // Several checks in one frame, decided in order; one round trip.
  std::vector<Decision> check_batch(std::span<const CheckRequest> requests);

  // Pipelining from one thread: submit() queues a check and returns its ticket
  // (sending when the output buffer fills or on flush()); receive() flushes
  // and returns the oldest outstanding decision with its ticket. Up to
  // `pending()` checks may be in flight, at most ClientOptions::max_pending. On a connection failure, every
  // outstanding ticket is answered by FailMode with kUnavailable.
  // Each of flush() and receive() waits at most timeout_ms. Tickets are
  // nonzero; receive() with nothing pending returns ticket 0 and a kInvalid
  // decision (not allowed). Synchronous calls may be mixed with pipelining:
  // replies to earlier tickets are kept for receive().
  std::uint64_t submit(const CheckRequest& request);
  void flush();
  std::pair<std::uint64_t, Decision> receive();
  std::size_t pending() const;
  // Submits answered at once because max_pending tickets were outstanding.
  std::uint64_t refused_over_max_pending() const;

  // The daemon's status, or nullopt with `error` set.
  std::optional<DaemonStatus> status(std::string* error = nullptr);

  // The cluster membership as the daemon sees it, or nullopt with `error`
  // set (a daemon too old to know the request answers with an
  // UNKNOWN_MESSAGE_TYPE error).
  std::optional<ClusterMembers> members(std::string* error = nullptr);

  // The rules in force (text, version, origin, digest); nullopt with `error`
  // set when the daemon is unavailable or refuses.
  std::optional<RulesResult> rules(std::string* error = nullptr);
  // Has the daemon check `text` (a TOML rules document: [[rule]] and
  // [[exempt]] only) whole, exactly as it would apply it; changes nothing.
  // `name` locates the errors (e.g. the file name).
  std::optional<RulesResult> validate_rules(std::string_view text, std::string_view name,
                                            std::string* error = nullptr);
  // Validates, persists and installs `text` (state kept for unchanged rules,
  // as a SIGHUP reload does) and spreads it to the daemon's cluster; all or
  // nothing (status says which). The document must fit max_frame_bytes.
  std::optional<RulesResult> apply_rules(std::string_view text, std::string_view name,
                                         std::string* error = nullptr);

  // True while a connection is open.
  bool connected() const;
  const ClientOptions& options() const;

 private:
  std::optional<RulesResult> rules_request(int action, std::string_view text, std::string_view name,
                                           std::string* error);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlimit
