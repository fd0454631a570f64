// The rules API's shell side (docs/cluster.md, "Rules across the cluster"):
// validates rules documents with the daemon's own config loader, computes
// their digest (SHA-256), applies them through the same path as a SIGHUP
// reload (the install function the server passes: Limiter::replace_rules,
// state kept for unchanged rules), persists them atomically to [daemon]
// rules_state_file, and tells the cluster what is now in force. The version
// order and the transfer between nodes live in core/rules_sync.h. The file is
// written by a Persist function: synchronously by default, off the event loop
// in the daemon (state_file_writer.h), so applies finish later, in the order
// asked. No Asio; not thread-safe (the event loop's).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "core/limiter.h"
#include "core/rules_sync.h"
#include "shell/http_check.h"

namespace rlimit::v1 {
class RulesRequest;
class RulesResponse;
}  // namespace rlimit::v1

namespace rlimit::shell {

// What the rules API and the status report count; names rules_*.
struct RulesCounters {
  std::uint64_t validations = 0;         // validate requests
  std::uint64_t applies = 0;             // rule sets applied here (API or SIGHUP-free apply)
  std::uint64_t applies_invalid = 0;     // apply or validate of an invalid document
  std::uint64_t persist_failures = 0;    // state file not written: the apply failed
  std::uint64_t received_applied = 0;    // rule sets from peers applied
  std::uint64_t received_refused = 0;    // rule sets from peers not valid here, or digest wrong
  std::uint64_t state_file_invalid = 0;  // at start: the state file could not be used
  std::uint64_t http_unauthorized = 0;   // /v1/rules without the right bearer token
  std::uint64_t http_requests = 0;       // /v1/rules requests answered
};

template <typename F>
void for_each_rules_counter(const RulesCounters& c, F&& f) {
  static_assert(sizeof(RulesCounters) == 9 * sizeof(std::uint64_t),
                "list every RulesCounters field in for_each_rules_counter");
  f(std::string_view("rules_validations"), c.validations);
  f(std::string_view("rules_applies"), c.applies);
  f(std::string_view("rules_applies_invalid"), c.applies_invalid);
  f(std::string_view("rules_persist_failures"), c.persist_failures);
  f(std::string_view("rules_received_applied"), c.received_applied);
  f(std::string_view("rules_received_refused"), c.received_refused);
  f(std::string_view("rules_state_file_invalid"), c.state_file_invalid);
  f(std::string_view("rules_http_unauthorized"), c.http_unauthorized);
  f(std::string_view("rules_http_requests"), c.http_requests);
}

template <typename F>
void for_each_rules_sync_stat(const core::RulesSyncStats& s, F&& f) {
  static_assert(sizeof(core::RulesSyncStats) == 16 * sizeof(std::uint64_t),
                "list every RulesSyncStats field in for_each_rules_sync_stat");
  f(std::string_view("rules_sync_adverts_newer"), s.adverts_newer);
  f(std::string_view("rules_sync_transfers_started"), s.transfers_started);
  f(std::string_view("rules_sync_transfers_completed"), s.transfers_completed);
  f(std::string_view("rules_sync_transfers_abandoned"), s.transfers_abandoned);
  f(std::string_view("rules_sync_transfers_superseded"), s.transfers_superseded);
  f(std::string_view("rules_sync_too_large"), s.too_large);
  f(std::string_view("rules_sync_requests_sent"), s.requests_sent);
  f(std::string_view("rules_sync_retries"), s.retries);
  f(std::string_view("rules_sync_requests_served"), s.requests_served);
  f(std::string_view("rules_sync_requests_unknown"), s.requests_unknown);
  f(std::string_view("rules_sync_chunks_sent"), s.chunks_sent);
  f(std::string_view("rules_sync_chunks_received"), s.chunks_received);
  f(std::string_view("rules_sync_chunks_duplicate"), s.chunks_duplicate);
  f(std::string_view("rules_sync_chunks_stale"), s.chunks_stale);
  f(std::string_view("rules_sync_chunks_malformed"), s.chunks_malformed);
  f(std::string_view("rules_sync_refused"), s.refused);
}

// SHA-256 of `text`: 32 raw bytes.
std::string sha256(std::string_view text);
// Lower-case hex of `bytes`.
std::string to_hex(std::string_view bytes);

// A rule set in force: its version, the node that applied it, the digest
// of its text, and the text (a rules document).
struct RulesDocument {
  core::RulesVersion version;
  std::string text;
};

// The state file: a header of TOML comments (version, origin, digest) then
// the document, so the file is itself a rules document.
std::string format_state_file(const RulesDocument& document);
// Parses a state file's contents; nullopt with `error` set if the header is
// missing or the digest does not match the text.
std::optional<RulesDocument> parse_state_file(std::string_view contents, std::string& error);
// Writes `contents` to `path` atomically: a temporary file in the same
// directory, fsync, rename over `path`, fsync of the directory. Returns why
// it failed, or nullopt.
std::optional<std::string> write_file_atomically(const std::string& path,
                                                 std::string_view contents);

class RulesService {
 public:
  // Installs a rule set in the limiter keeping state (the server's shared
  // path with SIGHUP reload).
  using Install = std::function<core::ReplaceSummary(core::RuleSet rules)>;
  // Called after a rule set is in force (to advertise it to the cluster).
  using Changed = std::function<void(const RulesDocument& document)>;
  // Writes the state file's `contents` and calls `done` with why it failed
  // (or nullopt) exactly once, on the event loop, now or later; writes
  // finish in the order asked.
  using Persisted = std::function<void(std::optional<std::string> error)>;
  using Persist = std::function<void(std::string contents, Persisted done)>;

  struct Options {
    std::string node_id;
    std::string state_file;  // "": not persisted
    config::RulesLoadOptions load;
    // The largest document an apply accepts: in a cluster, [cluster]
    // max_rules_bytes, which every peer enforces on what it fetches (a larger
    // apply would hold here and be refused everywhere else). 0: no bound.
    std::size_t max_text_bytes = 0;
  };

  enum class Status { kOk, kInvalid, kFailed };
  struct Outcome {
    Status status = Status::kOk;
    std::vector<config::ConfigError> errors;  // kInvalid: every problem, located
    std::string message;                      // kFailed (and kInvalid): why
    core::ReplaceSummary summary;             // kOk apply: what changed
  };

  // Called once an apply has finished, with how.
  using Done = std::function<void(Outcome outcome)>;

  RulesService(Options options, Install install, RulesCounters& counters);

  // Where the state file is written from now on (default: write_file_atomically
  // on the caller's thread). Set before serving.
  void set_persist(Persist persist) {
    persist_ = std::move(persist);
    persist_is_synchronous_ = false;
  }

  // The config file's rules (version 0), as loaded at start or on SIGHUP.
  void set_config_rules(std::string text);
  // At start, before serving: the state file's rule set, installed if it is
  // newer than the config's. Logs what it did.
  void load_state_file();
  void set_changed_hook(Changed changed) { changed_ = std::move(changed); }
  // The highest version known in the cluster (RulesSync::max_version_seen).
  void set_version_source(std::function<std::uint64_t()> source) {
    max_version_seen_ = std::move(source);
  }

  const RulesDocument& current() const { return current_; }
  const RulesCounters& counters() const { return counters_; }

  // Checks a document whole; changes nothing.
  Outcome validate(std::string_view text, std::string_view name);
  // Validates, persists and installs as version max(known) + 1 from this
  // node (known: in force, being persisted, or seen in the cluster); all or
  // nothing. `done` runs once the state file is written (and the rules in
  // force) or the apply failed: at once if invalid or not persisted, else
  // when the Persist function says so.
  void apply(std::string_view text, std::string_view name, Done done);
  // A rule set received from a peer: its digest checked, validated,
  // persisted and installed; kInvalid or kFailed leave everything as it was.
  // A version no newer than what is in force or being persisted is moot
  // (kOk, nothing done).
  void apply_received(const core::RulesVersion& version, std::string_view text,
                      std::string_view from, Done done);
  // The same, answered at once: only while the Persist function is the
  // synchronous default (no set_persist); kFailed otherwise.
  Outcome apply(std::string_view text, std::string_view name);
  Outcome apply_received(const core::RulesVersion& version, std::string_view text,
                         std::string_view from);
  // Applies whose state file is being written.
  std::size_t applies_in_progress() const { return in_progress_; }
  // True once set_persist gave a Persist that may finish later.
  bool persists_in_background() const { return !persist_is_synchronous_; }

 private:
  void install(RulesDocument document, config::LoadResult loaded, Done done);
  // The newest version in force or being persisted.
  const core::RulesVersion& newest() const {
    return in_progress_ > 0 ? newest_in_progress_ : current_.version;
  }

  Options options_;
  Install install_;
  Changed changed_;
  std::function<std::uint64_t()> max_version_seen_;
  RulesCounters& counters_;
  RulesDocument current_;
  Persist persist_;
  bool persist_is_synchronous_ = true;
  std::size_t in_progress_ = 0;            // applies waiting for their state file
  core::RulesVersion newest_in_progress_;  // the last of them
};

// Answers a socket client's rules request (show, validate, apply) into
// `response` (cleared first), an apply through the answered-at-once apply.
void answer_rules_request(RulesService& rules, const v1::RulesRequest& request,
                          v1::RulesResponse& response);
// Fills `response` (cleared first) for `request` given what was done
// (`outcome`: nothing for a show).
void fill_rules_response(const RulesService& rules, const v1::RulesRequest& request,
                         const RulesService::Outcome& outcome, v1::RulesResponse& response);

// The HTTP rules API ([http] rules_api): GET /v1/rules answers the rules in
// force, PUT /v1/rules applies the body (a rules document); JSON both ways
// (docs/configuration.md, "[http]"). With a non-empty `token`, a request must carry
// "Authorization: Bearer <token>" (compared in constant time) or gets 401,
// counted.
// Through the answered-at-once apply.
HttpAnswer answer_rules_http(RulesService& rules, RulesCounters& counters,
                             const HttpRequestView& request, std::string_view token);
// answer_rules_http in two steps, for an apply that finishes later: the
// answer, or nullopt for a PUT whose body is to be applied; then the answer
// to that apply.
std::optional<HttpAnswer> answer_rules_http_before_apply(RulesService& rules,
                                                         RulesCounters& counters,
                                                         const HttpRequestView& request,
                                                         std::string_view token);
HttpAnswer answer_rules_http_applied(const RulesService& rules,
                                     const RulesService::Outcome& outcome);

// Reads a bearer token file: its contents without surrounding whitespace;
// nullopt with `error` set if unreadable or empty.
std::optional<std::string> read_token_file(const std::string& path, std::string& error);

}  // namespace rlimit::shell
