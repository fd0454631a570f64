// rlimitctl: inspect a running rlimitd from the command line.
//
//   rlimitctl [--socket PATH] [--timeout-ms N] check key=value... [--cost N] [--json]
//   rlimitctl [--socket PATH] [--timeout-ms N] status [--json]
//   rlimitctl [--socket PATH] [--timeout-ms N] members [--json]
//
// Exit codes (scripts rely on them): 0 allowed / ok, 1 denied, 2 usage error
// (including a check the daemon rejected as invalid), 3 daemon unavailable or
// answering with a protocol error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

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
      .field("retry_after_us", d.retry_after_us());
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
  std::cout << '\n';
  if (!d.error.empty()) std::cout << "error: " << d.error << '\n';
  if (d.rules.empty()) {
    if (d.status == rlimit::DecisionStatus::kOk) std::cout << "no rule matched\n";
    return;
  }
  TextTable table({"RULE", "ALLOWED", "LIMIT", "BURST", "REMAINING", "RETRY AFTER", "RESET AFTER"});
  for (std::size_t c : {3, 4, 5, 6}) table.align_right(c);
  for (const rlimit::RuleStatus& r : d.rules) {
    table.add_row({r.name, r.allowed ? "yes" : "no", format_rate(r.limit, r.period_ms),
                   std::to_string(r.burst), std::to_string(r.remaining),
                   format_duration_us(r.retry_after_us), format_duration_us(r.reset_after_us)});
  }
  std::cout << table.render();
}

int run_check(const GlobalOptions& global, const std::vector<std::string>& args, std::uint64_t cost,
              bool as_json) {
  rlimit::CheckRequest request;
  request.cost = cost;
  for (const std::string& arg : args) {
    auto descriptor = parse_descriptor(arg);
    if (!descriptor) {
      std::cerr << "rlimitctl: expected key=value, got '" << arg << "'\n";
      return kExitUsage;
    }
    request.descriptors.push_back(std::move(*descriptor));
  }
  rlimit::Client client = make_client(global);
  const rlimit::Decision decision = client.check(request);
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
        .end_object();
  }
  json.end_array().end_object();
  std::cout << json.str() << '\n';
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
  TextTable table({"NODE", "ADDRESS", "STATE", "INCARNATION", "SEQ", "LAST HEARD"});
  for (std::size_t c : {3, 4, 5}) table.align_right(c);
  for (const rlimit::ClusterMember& member : m.members) {
    table.add_row({member.self ? member.node_id + " (self)" : member.node_id, member.address,
                   member.state, std::to_string(member.incarnation), std::to_string(member.seq),
                   last_heard_text(member)});
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

  bool status_json = false;
  CLI::App* status = app.add_subcommand("status", "Show the daemon's rules and counters.");
  status->fallthrough();
  status->add_flag("--json", status_json, "Print the status as JSON");

  bool members_json = false;
  CLI::App* members = app.add_subcommand(
      "members", "Show the cluster members as the daemon sees them. Exit 0 ok, 3 unavailable.");
  members->fallthrough();
  members->add_flag("--json", members_json, "Print the membership as JSON");

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

  try {
    if (check->parsed()) return run_check(global, descriptors, cost, check_json);
    if (members->parsed()) return run_members(global, members_json);
    return run_status(global, status_json);
  } catch (const std::exception& e) {
    std::cerr << "rlimitctl: " << e.what() << '\n';
    return kExitUnavailable;
  }
}
