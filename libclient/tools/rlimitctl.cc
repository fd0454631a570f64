// rlimitctl: inspect a running rlimitd from the command line.
//
//   rlimitctl [--socket PATH] [--timeout-ms N] check key=value... [--cost N] [--json]
//   rlimitctl ... peek key=value... [--cost N] [--json]
//   rlimitctl ... reserve key=value... [--cost N] [--max-wait-us N] [--json]
//   rlimitctl ... acquire key=value... [--cost N] [--max-wait-us N] [--json]
//   rlimitctl ... release LEASE... [--extend] [--json]
//   rlimitctl ... reset key=value... [--json]
//   rlimitctl [--socket PATH] [--timeout-ms N] status [--json]
//   rlimitctl [--socket PATH] [--timeout-ms N] members [--json]
//   rlimitctl [--socket PATH] [--timeout-ms N] rules show|validate FILE|apply FILE [--json]
//   rlimitctl convert envoy-ratelimit CONFIG.yaml [-o OUT.toml]
//
// Exit codes (scripts rely on them): 0 allowed / ok, 1 denied (release: some
// lease was not released), 2 usage error (including a check or reset the
// daemon rejected as invalid), 3 daemon unavailable or answering with a
// protocol error (reset: also a daemon with allow_reset = false). convert:
// 0 converted (warnings on stderr), 2 unreadable, malformed or invalid input
// (nothing written), or output that could not be written. rules: 0 ok, 2
// an invalid document (every error located file:line:column) or an
// unreadable file, 3 daemon unavailable or the apply refused (e.g. the state
// file could not be written); nothing changes unless the exit code is 0.
//
// Lease tokens are bytes; rlimitctl prints and reads them as hex.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "envoy_convert.h"
#include "json_writer.h"
#include "rlimit/client.h"
#include "text_format.h"

namespace {

using rlimit::tools::format_duration_us;
using rlimit::tools::format_rate;
using rlimit::tools::JsonWriter;
using rlimit::tools::TextTable;

constexpr int kExitAllowed = 0;
constexpr int kExitDenied = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnavailable = 3;

struct GlobalOptions {
  std::string socket_path;
  std::uint32_t timeout_ms = 1000;
};

rlimit::Client make_client(const GlobalOptions& global) {
  rlimit::ClientOptions options;
  options.socket_path = global.socket_path;
  options.timeout_ms = global.timeout_ms;
  // Closed, so an unreachable daemon shows as "not allowed" + kUnavailable and
  // is never mistaken for a real allowance.
  options.fail_mode = rlimit::FailMode::kClosed;
  return rlimit::Client(options);
}

std::string socket_shown(const GlobalOptions& global) {
  return global.socket_path.empty() ? "the default socket" : global.socket_path;
}

// "key=value" -> Descriptor; the value may itself contain '='.
std::optional<rlimit::Descriptor> parse_descriptor(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  return rlimit::Descriptor{text.substr(0, eq), text.substr(eq + 1)};
}

// Appends every "key=value" of `args` to `request`; false (after saying which
// argument) on the first that is not one.
bool add_descriptors(const std::vector<std::string>& args, rlimit::CheckRequest& request) {
  for (const std::string& arg : args) {
    auto descriptor = parse_descriptor(arg);
    if (!descriptor) {
      std::cerr << "rlimitctl: expected key=value, got '" << arg << "'\n";
      return false;
    }
    request.descriptors.push_back(std::move(*descriptor));
  }
  return true;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  return bytes;
}

int exit_code_for(const rlimit::Decision& decision) {
  switch (decision.status) {
    case rlimit::DecisionStatus::kUnavailable:
    case rlimit::DecisionStatus::kProtocolError:
      return kExitUnavailable;
    case rlimit::DecisionStatus::kInvalid:
      return kExitUsage;
    default:
      return decision.allowed ? kExitAllowed : kExitDenied;
  }
}

void print_check_json(const rlimit::Decision& d) {
  JsonWriter json;
  json.begin_object()
      .field("allowed", d.allowed)
      .field("status", rlimit::to_string(d.status))
      .field("retry_after_us", d.retry_after_us())
      .field("delay_us", d.delay_us);
  if (!d.error.empty()) json.field("error", d.error);
  json.key("rules").begin_array();
  for (const rlimit::RuleStatus& r : d.rules) {
    json.begin_object()
        .field("name", r.name)
        .field("allowed", r.allowed)
        .field("limit", r.limit)
        .field("period_ms", r.period_ms)
        .field("burst", r.burst)
        .field("remaining", r.remaining)
        .field("retry_after_us", r.retry_after_us)
        .field("reset_after_us", r.reset_after_us)
        .field("algorithm", r.algorithm)
        .field("delay_us", r.delay_us)
        .field("lease", to_hex(r.lease))
        .field("over_limit", r.over_limit)
        .end_object();
  }
  json.end_array().end_object();
  std::cout << json.str() << '\n';
}

void print_check_text(const rlimit::Decision& d) {
  std::cout << (d.allowed ? "allowed" : "DENIED") << " (status " << rlimit::to_string(d.status)
            << ")";
  if (!d.allowed && d.retry_after_us() != 0) {
    std::cout << ", retry after " << format_duration_us(d.retry_after_us());
  }
  if (d.allowed && d.delay_us > 0) std::cout << ", proceed after " << format_duration_us(d.delay_us);
  std::cout << '\n';
  if (!d.error.empty()) std::cout << "error: " << d.error << '\n';
  if (d.rules.empty()) {
    if (d.status == rlimit::DecisionStatus::kOk) std::cout << "no rule matched\n";
    return;
  }
  TextTable table({"RULE", "ALGORITHM", "ALLOWED", "LIMIT", "BURST", "REMAINING", "RETRY AFTER",
                   "RESET AFTER", "DELAY"});
  for (std::size_t c : {4, 5, 6, 7, 8}) table.align_right(c);
  for (const rlimit::RuleStatus& r : d.rules) {
    const std::string allowed =
        r.allowed ? (r.over_limit ? "yes (over limit)" : "yes") : "no";
    table.add_row({r.name, r.algorithm.empty() ? "-" : r.algorithm, allowed,
                   format_rate(r.limit, r.period_ms), std::to_string(r.burst),
                   std::to_string(r.remaining), format_duration_us(r.retry_after_us),
                   format_duration_us(r.reset_after_us), format_duration_us(r.delay_us)});
  }
  std::cout << table.render();
  for (const rlimit::RuleStatus& r : d.rules) {
    if (!r.lease.empty()) std::cout << "lease " << r.name << ": " << to_hex(r.lease) << '\n';
  }
}

// Which call a decision verb makes.
enum class Verb { kCheck, kPeek, kReserve, kAcquire };

int run_check(const GlobalOptions& global, const std::vector<std::string>& args, std::uint64_t cost,
              bool as_json, Verb verb = Verb::kCheck, std::int64_t max_wait_us = -1) {
  rlimit::CheckRequest request;
  request.cost = cost;
  if (max_wait_us >= 0) request.max_wait = std::chrono::microseconds(max_wait_us);
  if (!add_descriptors(args, request)) return kExitUsage;
  rlimit::Client client = make_client(global);
  rlimit::Decision decision;
  switch (verb) {
    case Verb::kCheck:
      decision = client.check(request);
      break;
    case Verb::kPeek:
      decision = client.peek(request);
      break;
    case Verb::kReserve:
      decision = client.reserve(request);
      break;
    case Verb::kAcquire:
      decision = client.acquire(request);
      break;
  }
  if (decision.status == rlimit::DecisionStatus::kUnavailable) {
    std::cerr << "rlimitctl: daemon unavailable at " << socket_shown(global) << ": "
              << decision.error << '\n';
  }
  if (as_json) {
    print_check_json(decision);
  } else if (decision.status != rlimit::DecisionStatus::kUnavailable) {
    print_check_text(decision);
  }
  return exit_code_for(decision);
}

int run_release(const GlobalOptions& global, const std::vector<std::string>& hex_leases,
                bool extend, bool as_json) {
  std::vector<std::string> leases;
  for (const std::string& hex : hex_leases) {
    auto bytes = from_hex(hex);
    if (!bytes) {
      std::cerr << "rlimitctl: a lease is hex digits (as printed by acquire), got '" << hex
                << "'\n";
      return kExitUsage;
    }
    leases.push_back(std::move(*bytes));
  }
  rlimit::Client client = make_client(global);
  std::string error;
  const std::vector<rlimit::LeaseStatus> statuses = client.release_leases(leases, extend, &error);
  if (!error.empty()) {
    std::cerr << "rlimitctl: no answer from " << socket_shown(global) << ": " << error << '\n';
    return kExitUnavailable;
  }
  bool all_done = true;
  JsonWriter json;
  json.begin_object().field("extend", extend).key("leases").begin_array();
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    all_done = all_done && statuses[i] == rlimit::LeaseStatus::kDone;
    if (as_json) {
      json.begin_object()
          .field("lease", hex_leases[i])
          .field("status", rlimit::to_string(statuses[i]))
          .end_object();
    } else {
      std::cout << hex_leases[i] << ": " << rlimit::to_string(statuses[i]) << '\n';
    }
  }
  json.end_array().end_object();
  if (as_json) std::cout << json.str() << '\n';
  return all_done ? kExitAllowed : kExitDenied;
}

int run_reset(const GlobalOptions& global, const std::vector<std::string>& args, bool as_json) {
  rlimit::CheckRequest request;
  if (!add_descriptors(args, request)) return kExitUsage;
  rlimit::Client client = make_client(global);
  std::string error;
  const auto result = client.reset(request, &error);
  if (!result) {
    std::cerr << "rlimitctl: reset refused or unanswered by " << socket_shown(global) << ": "
              << error << '\n';
    return error.find("INVALID_REQUEST") != std::string::npos ? kExitUsage : kExitUnavailable;
  }
  if (as_json) {
    JsonWriter json;
    json.begin_object().field("keys_reset", result->keys_reset).key("rules").begin_array();
    for (const std::string& rule : result->rules) json.value(rule);
    json.end_array().end_object();
    std::cout << json.str() << '\n';
  } else {
    std::cout << "reset " << result->keys_reset << " key" << (result->keys_reset == 1 ? "" : "s");
    if (!result->rules.empty()) {
      std::cout << " (rules:";
      for (const std::string& rule : result->rules) std::cout << ' ' << rule;
      std::cout << ')';
    }
    std::cout << '\n';
  }
  return kExitAllowed;
}

void print_status_json(const rlimit::DaemonStatus& s) {
  JsonWriter json;
  json.begin_object()
      .field("node_id", s.node_id)
      .field("version", s.version)
      .field("uptime_ms", s.uptime_ms)
      .field("config_source", s.config_source)
      .field("keys", s.keys)
      .field("max_keys", s.max_keys);
  json.key("rules").begin_array();
  for (const rlimit::RuleInfo& r : s.rules) {
    json.begin_object()
        .field("name", r.name)
        .field("algorithm", r.algorithm)
        .field("limit", r.limit)
        .field("period_ms", r.period_ms)
        .field("burst", r.burst)
        .field("match", r.match)
        .field("overrides", r.overrides)
        .end_object();
  }
  json.end_array();
  // An object keyed by counter name would lose the daemon's order and any
  // duplicate; an array keeps both.
  json.key("counters").begin_array();
  for (const auto& [name, value] : s.counters) {
    json.begin_object().field("name", name).field("value", value).end_object();
  }
  json.end_array().end_object();
  std::cout << json.str() << '\n';
}

void print_status_text(const rlimit::DaemonStatus& s) {
  TextTable info({"node", s.node_id});
  info.add_row({"version", s.version});
  info.add_row({"uptime", format_duration_us(static_cast<std::int64_t>(s.uptime_ms) * 1000)});
  info.add_row({"config", s.config_source});
  info.add_row({"keys", std::to_string(s.keys) + " / " + std::to_string(s.max_keys)});
  std::cout << info.render() << '\n';

  if (s.rules.empty()) {
    std::cout << "no rules\n";
  } else {
    TextTable rules({"RULE", "ALGORITHM", "LIMIT", "BURST", "OVERRIDES", "MATCH"});
    rules.align_right(3);
    rules.align_right(4);
    for (const rlimit::RuleInfo& r : s.rules) {
      rules.add_row({r.name, r.algorithm, format_rate(r.limit, r.period_ms),
                     std::to_string(r.burst), std::to_string(r.overrides), r.match});
    }
    std::cout << rules.render();
  }
  if (!s.counters.empty()) {
    TextTable counters({"COUNTER", "VALUE"});
    counters.align_right(1);
    for (const auto& [name, value] : s.counters) counters.add_row({name, std::to_string(value)});
    std::cout << '\n' << counters.render();
  }
}

int run_status(const GlobalOptions& global, bool as_json) {
  rlimit::Client client = make_client(global);
  std::string error;
  const auto status = client.status(&error);
  if (!status) {
    std::cerr << "rlimitctl: no status from " << socket_shown(global) << ": " << error << '\n';
    return kExitUnavailable;
  }
  if (as_json) {
    print_status_json(*status);
  } else {
    print_status_text(*status);
  }
  return kExitAllowed;
}

// Lower-case hex of `bytes` (digests).
std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    out.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
  }
  return out;
}

void print_members_json(const rlimit::ClusterMembers& m) {
  JsonWriter json;
  json.begin_object().field("cluster", m.cluster).field("mode", m.mode);
  json.key("members").begin_array();
  for (const rlimit::ClusterMember& member : m.members) {
    json.begin_object()
        .field("node_id", member.node_id)
        .field("address", member.address)
        .field("state", member.state)
        .field("incarnation", member.incarnation)
        .field("seq", member.seq)
        .field("last_heard_ms_ago", member.last_heard_ms_ago)
        .field("self", member.self)
        .field("rules_version", member.rules_version)
        .field("rules_origin", member.rules_origin)
        .field("rules_digest", hex(member.rules_digest))
        .end_object();
  }
  json.end_array().end_object();
  std::cout << json.str() << '\n';
}

// "v3 9f86d081884c" (version, short digest); "-" when none is advertised.
std::string rules_text(const rlimit::ClusterMember& member) {
  if (member.rules_digest.empty()) return "-";
  return "v" + std::to_string(member.rules_version) + " " + hex(member.rules_digest).substr(0, 12);
}

// "1.5s ago", "never" (no direct contact yet), "-" for the node itself.
std::string last_heard_text(const rlimit::ClusterMember& member) {
  if (member.self) return "-";
  if (member.last_heard_ms_ago < 0) return "never";
  if (member.last_heard_ms_ago == 0) return "just now";
  constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max() / 1000;
  return format_duration_us(std::min(member.last_heard_ms_ago, kMaxMs) * 1000) + " ago";
}

void print_members_text(const rlimit::ClusterMembers& m) {
  TextTable info({"cluster", m.cluster.empty() ? "(none)" : m.cluster});
  info.add_row({"mode", m.mode.empty() ? "(unknown)" : m.mode});
  info.add_row({"members", std::to_string(m.members.size())});
  std::cout << info.render();
  if (m.members.empty()) return;
  TextTable table({"NODE", "ADDRESS", "STATE", "INCARNATION", "SEQ", "LAST HEARD", "RULES"});
  for (std::size_t c : {3, 4, 5}) table.align_right(c);
  for (const rlimit::ClusterMember& member : m.members) {
    table.add_row({member.self ? member.node_id + " (self)" : member.node_id, member.address,
                   member.state, std::to_string(member.incarnation), std::to_string(member.seq),
                   last_heard_text(member), rules_text(member)});
  }
  std::cout << '\n' << table.render();
}

int run_members(const GlobalOptions& global, bool as_json) {
  rlimit::Client client = make_client(global);
  std::string error;
  const auto members = client.members(&error);
  if (!members) {
    std::cerr << "rlimitctl: no membership from " << socket_shown(global) << ": " << error << '\n';
    return kExitUnavailable;
  }
  if (as_json) {
    print_members_json(*members);
  } else {
    print_members_text(*members);
  }
  return kExitAllowed;
}

// rules show | validate FILE | apply FILE.
int run_rules(const GlobalOptions& global, const std::string& action, const std::string& path,
              bool as_json) {
  std::string text;
  if (action != "show") {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      std::cerr << "rlimitctl: cannot read " << path << ": " << std::strerror(errno) << '\n';
      return kExitUsage;
    }
    std::ostringstream contents;
    contents << file.rdbuf();
    text = contents.str();
  }
  rlimit::Client client = make_client(global);
  std::string error;
  const std::optional<rlimit::RulesResult> result = action == "show" ? client.rules(&error)
                                                    : action == "validate"
                                                        ? client.validate_rules(text, path, &error)
                                                        : client.apply_rules(text, path, &error);
  if (!result) {
    std::cerr << "rlimitctl: no answer from " << socket_shown(global) << ": " << error << '\n';
    return kExitUnavailable;
  }
  const char* status = result->status == rlimit::RulesResult::Status::kOk        ? "ok"
                       : result->status == rlimit::RulesResult::Status::kInvalid ? "invalid"
                                                                                 : "failed";
  if (as_json) {
    JsonWriter json;
    json.begin_object()
        .field("status", std::string(status))
        .field("version", result->version)
        .field("origin", result->origin)
        .field("digest", hex(result->digest));
    if (action == "show") json.field("text", result->text);
    if (action == "apply") {
      json.field("kept", static_cast<std::uint64_t>(result->kept))
          .field("changed", static_cast<std::uint64_t>(result->changed))
          .field("added", static_cast<std::uint64_t>(result->added))
          .field("removed", static_cast<std::uint64_t>(result->removed));
    }
    if (!result->message.empty()) json.field("message", result->message);
    json.key("errors").begin_array();
    for (const rlimit::RulesError& e : result->errors) {
      json.begin_object()
          .field("file", e.file)
          .field("line", static_cast<std::uint64_t>(e.line))
          .field("column", static_cast<std::uint64_t>(e.column))
          .field("message", e.message)
          .end_object();
    }
    json.end_array().end_object();
    std::cout << json.str() << '\n';
  } else {
    for (const rlimit::RulesError& e : result->errors) std::cerr << e.to_string() << '\n';
    if (result->status != rlimit::RulesResult::Status::kOk) {
      std::cerr << "rlimitctl: " << (result->message.empty() ? status : result->message) << '\n';
    }
    const std::string version = "version " + std::to_string(result->version) + " from " +
                                result->origin + ", digest " + hex(result->digest);
    if (action == "show") {
      std::cout << "# " << version << '\n' << result->text;
    } else if (action == "validate" && result->status == rlimit::RulesResult::Status::kOk) {
      std::cout << path << ": valid (in force: " << version << ")\n";
    } else if (action == "apply" && result->status == rlimit::RulesResult::Status::kOk) {
      std::cout << "applied: " << version << " (" << result->kept << " kept, " << result->changed
                << " changed, " << result->added << " added, " << result->removed << " removed)\n";
    }
  }
  switch (result->status) {
    case rlimit::RulesResult::Status::kOk:
      return kExitAllowed;
    case rlimit::RulesResult::Status::kInvalid:
      return kExitUsage;
    case rlimit::RulesResult::Status::kFailed:
      return kExitUnavailable;
  }
  return kExitUnavailable;
}

// `convert envoy-ratelimit`: reads `input` ("-": stdin), writes the rules to
// `output` ("" or "-": stdout) only when the input converted.
int run_convert_envoy(const std::string& input, const std::string& output) {
  std::ostringstream text;
  if (input == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(input, std::ios::binary);
    if (!in) {
      std::cerr << "rlimitctl: cannot read " << input << ": " << std::strerror(errno) << '\n';
      return kExitUsage;
    }
    text << in.rdbuf();
  }
  const rlimit::tools::EnvoyConvertResult result =
      rlimit::tools::convert_envoy_ratelimit(text.str(), input == "-" ? "<stdin>" : input);
  for (const std::string& error : result.errors) std::cerr << "rlimitctl: error: " << error << '\n';
  if (!result.ok()) {
    std::cerr << "rlimitctl: " << input << " not converted\n";
    return kExitUsage;
  }
  for (const std::string& warning : result.warnings) {
    std::cerr << "rlimitctl: warning: " << warning << '\n';
  }
  for (const std::string& note : result.notes) std::cerr << "rlimitctl: note: " << note << '\n';
  if (output.empty() || output == "-") {
    std::cout << result.toml << std::flush;
    return std::cout ? kExitAllowed : kExitUsage;
  }
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  out << result.toml;
  out.close();
  if (!out) {
    std::cerr << "rlimitctl: cannot write " << output << ": " << std::strerror(errno) << '\n';
    return kExitUsage;
  }
  return kExitAllowed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect a running rlimitd.", "rlimitctl"};
  app.require_subcommand(1);
  GlobalOptions global;
  app.add_option("--socket", global.socket_path,
                 "rlimitd's Unix socket (default: $XDG_RUNTIME_DIR/rlimitd.sock or "
                 "/tmp/rlimitd.sock)");
  app.add_option("--timeout-ms", global.timeout_ms, "Per-call timeout, connect included")
      ->capture_default_str();
  app.set_version_flag("--version", std::string(RLIMIT_VERSION));

  std::vector<std::string> descriptors;
  std::uint64_t cost = 1;
  bool check_json = false;
  CLI::App* check = app.add_subcommand(
      "check", "Ask for a decision. Exit 0 allowed, 1 denied, 2 usage, 3 unavailable.");
  check->fallthrough();
  check->add_option("descriptors", descriptors, "key=value descriptors, e.g. user=alice")
      ->required();
  check->add_option("--cost", cost, "Tokens the check consumes (0: just look)")
      ->capture_default_str();
  check->add_flag("--json", check_json, "Print the decision as JSON");

  // peek, reserve, acquire: a check in another mode, with check's options.
  struct ModeVerb {
    CLI::App* app = nullptr;
    std::vector<std::string> descriptors;
    std::uint64_t cost = 1;
    std::int64_t max_wait_us = -1;
    bool json = false;
  };
  ModeVerb peek, reserve, acquire;
  const auto add_mode_verb = [&](ModeVerb& verb, const char* name, const char* help,
                                 bool waits) {
    verb.app = app.add_subcommand(name, help);
    verb.app->fallthrough();
    verb.app->add_option("descriptors", verb.descriptors, "key=value descriptors")->required();
    verb.app->add_option("--cost", verb.cost, "Tokens the check consumes")->capture_default_str();
    if (waits) {
      verb.app->add_option("--max-wait-us", verb.max_wait_us,
                           "Longest wait accepted, in microseconds (-1: any)")
          ->capture_default_str();
    }
    verb.app->add_flag("--json", verb.json, "Print the decision as JSON");
  };
  add_mode_verb(peek, "peek", "Ask for a decision without consuming anything (exit codes as check).",
                false);
  add_mode_verb(reserve, "reserve",
                "Consume now and print the wait before proceeding (exit codes as check).", true);
  add_mode_verb(acquire, "acquire",
                "Reserve, then wait the delay before exiting; prints any lease (exit codes as "
                "check).",
                true);

  std::vector<std::string> release_leases;
  bool release_extend = false;
  bool release_json = false;
  CLI::App* release = app.add_subcommand(
      "release", "Release concurrency leases (hex, as printed). Exit 0 all released, 1 not all, "
                 "3 unavailable.");
  release->fallthrough();
  release->add_option("leases", release_leases, "Lease tokens in hex")->required();
  release->add_flag("--extend", release_extend, "Restart the leases' TTL instead of releasing");
  release->add_flag("--json", release_json, "Print the statuses as JSON");

  std::vector<std::string> reset_descriptors;
  bool reset_json = false;
  CLI::App* reset = app.add_subcommand(
      "reset", "Forget the state of every key a check with these descriptors would touch.");
  reset->fallthrough();
  reset->add_option("descriptors", reset_descriptors, "key=value descriptors")->required();
  reset->add_flag("--json", reset_json, "Print the result as JSON");

  bool status_json = false;
  CLI::App* status = app.add_subcommand("status", "Show the daemon's rules and counters.");
  status->fallthrough();
  status->add_flag("--json", status_json, "Print the status as JSON");

  bool members_json = false;
  CLI::App* members = app.add_subcommand(
      "members", "Show the cluster members as the daemon sees them. Exit 0 ok, 3 unavailable.");
  members->fallthrough();
  members->add_flag("--json", members_json, "Print the membership as JSON");

  std::string rules_file;
  bool rules_json = false;
  CLI::App* rules = app.add_subcommand(
      "rules",
      "The rules in force, and changing them for the whole cluster. Exit 0 ok, 2 invalid rules, "
      "3 unavailable or refused.");
  rules->require_subcommand(1);
  CLI::App* rules_show =
      rules->add_subcommand("show", "Print the rules in force (TOML) and their version.");
  CLI::App* rules_validate = rules->add_subcommand(
      "validate", "Have the daemon check a rules document whole; nothing changes.");
  CLI::App* rules_apply = rules->add_subcommand(
      "apply", "Apply a rules document here and across the cluster (state kept, persisted).");
  for (CLI::App* sub : {rules_show, rules_validate, rules_apply}) {
    sub->fallthrough();
    sub->add_flag("--json", rules_json, "Print the answer as JSON");
  }
  rules_validate->add_option("file", rules_file, "TOML with only [[rule]] and [[exempt]]")
      ->required();
  rules_apply->add_option("file", rules_file, "TOML with only [[rule]] and [[exempt]]")->required();

  CLI::App* convert = app.add_subcommand(
      "convert", "Convert another rate limiter's configuration into rlimit rules (no daemon).");
  convert->require_subcommand(1);
  std::string convert_input;
  std::string convert_output;
  CLI::App* convert_envoy = convert->add_subcommand(
      "envoy-ratelimit",
      "envoyproxy/ratelimit YAML to rlimit TOML; what cannot be expressed is said on stderr and "
      "in comments. Exit 0 converted, 2 malformed or invalid input.");
  convert_envoy->add_option("config", convert_input, "The ratelimit YAML file (-: stdin)")
      ->required();
  convert_envoy->add_option("-o,--output", convert_output, "Write the TOML here (default: stdout)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  if (convert_envoy->parsed()) return run_convert_envoy(convert_input, convert_output);
  try {
    if (check->parsed()) return run_check(global, descriptors, cost, check_json);
    if (peek.app->parsed()) {
      return run_check(global, peek.descriptors, peek.cost, peek.json, Verb::kPeek);
    }
    if (reserve.app->parsed()) {
      return run_check(global, reserve.descriptors, reserve.cost, reserve.json, Verb::kReserve,
                       reserve.max_wait_us);
    }
    if (acquire.app->parsed()) {
      return run_check(global, acquire.descriptors, acquire.cost, acquire.json, Verb::kAcquire,
                       acquire.max_wait_us);
    }
    if (release->parsed()) return run_release(global, release_leases, release_extend, release_json);
    if (reset->parsed()) return run_reset(global, reset_descriptors, reset_json);
    if (members->parsed()) return run_members(global, members_json);
    if (rules_show->parsed()) return run_rules(global, "show", "", rules_json);
    if (rules_validate->parsed()) return run_rules(global, "validate", rules_file, rules_json);
    if (rules_apply->parsed()) return run_rules(global, "apply", rules_file, rules_json);
    return run_status(global, status_json);
  } catch (const std::exception& e) {
    std::cerr << "rlimitctl: " << e.what() << '\n';
    return kExitUnavailable;
  }
}
