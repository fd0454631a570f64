#include "report.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/fair_share.h"

namespace rlimit::sim {
namespace {

double seconds(TimeUs us) { return static_cast<double>(us) / 1e6; }

void row(std::ostream& out, std::string_view name, const std::string& value,
         std::string_view note = "") {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-34s %16s  ", std::string(name).c_str(), value.c_str());
  out << buf << note << "\n";
}

double traffic_seconds(const Results& r) {
  return std::max(1e-9, seconds(r.traffic_end_us - r.traffic_start_us));
}

}  // namespace

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string percent(double ratio) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100 * ratio);
  // A small negative that rounds to zero reads +0.00%, not -0.00%.
  if (std::string_view(buf) == "-0.00%") return "+0.00%";
  return buf;
}

std::string format_seconds(TimeUs us) {
  if (us < 0) return "never";
  if (us < 1'000'000) return fixed(static_cast<double>(us) / 1e3, 0) + "ms";
  return fixed(seconds(us), us % 1'000'000 == 0 ? 0 : 2) + "s";
}

double packets_per_node_s(const Results& r) {
  std::uint64_t total = 0;
  for (const NodeResult& n : r.per_node) total += n.packets_out;
  return static_cast<double>(total) / std::max<double>(1, r.nodes) / seconds(r.duration_us);
}

double bytes_per_node_s(const Results& r) {
  std::uint64_t total = 0;
  for (const NodeResult& n : r.per_node) total += n.bytes_out;
  return static_cast<double>(total) / std::max<double>(1, r.nodes) / seconds(r.duration_us);
}

namespace {

// Fair shares and forgiven history, in either mode.
void print_share_rows(std::ostream& out, const CoreTotals& c) {
  if (c.share_refused + c.share_probes > 0) {
    row(out, "fair shares: refused / probes",
        std::to_string(c.share_refused) + " / " + std::to_string(c.share_probes),
        "(checks the algorithm allowed, beyond this node's share; new keys probed)");
  }
  if (c.share_wake_epochs > 0) {
    row(out, "fair shares: epochs at a wake", std::to_string(c.share_wake_epochs),
        "(shares of a burst's pool as it stood when the key woke)");
  }
  if (c.share_log_epochs_cut > 0) {
    row(out, "fair shares: log epochs cut", std::to_string(c.share_log_epochs_cut),
        "(a sliding log's epochs ended where its room starts to free)");
  }
  if (c.share_single_crowd_epochs > 0) {
    row(out, "fair shares: log crowd of singles", std::to_string(c.share_single_crowd_epochs),
        "(a sliding log's epochs sharing the wake's pool, one of a crowd of single requests)");
  }
  if (c.share_askers_floored > 0) {
    row(out, "fair shares: crowds at the askers' floor", std::to_string(c.share_askers_floored),
        "(epochs whose crowd was 4/63 of the live nodes: asked in few of the key's bursts)");
  }
  if (c.share_crowded_epochs + c.share_crowded_bursts + c.share_crowded_starts > 0) {
    row(out, "fair shares: crowded by origins / bursts / new keys",
        std::to_string(c.share_crowded_epochs) + " / " + std::to_string(c.share_crowded_bursts) +
            " / " + std::to_string(c.share_crowded_starts),
        "(demand made dense: many more origins than the pool; a burst of 3 pools; a rule's "
        "keys new at once)");
  }
  if (c.share_keys_crowded + c.share_idle_raise_capped > 0) {
    row(out, "fair shares: keys crowded / idle raises capped",
        std::to_string(c.share_keys_crowded) + " / " + std::to_string(c.share_idle_raise_capped),
        "(keys new at once, gossiped not routed; epochs whose idle raise hit 1.5 x)");
  }
  if (c.share_sparse_raised > 0) {
    row(out, "fair shares: sparse turns raised / capped",
        std::to_string(c.share_sparse_raised) + " / " + std::to_string(c.share_sparse_raise_capped),
        "(epochs of a node asking a busy key less than once a horizon: its turn covers its "
        "interval, at most " +
            std::to_string(core::FairShare::kMaxSparseRaise) + " x)");
  }
  if (c.share_contended_balance > 0) {
    row(out, "fair shares: contended balances", std::to_string(c.share_contended_balance),
        "(epochs of a sliding log under dense demand, or of a sliding window, whose balance, "
        "below the epoch's refill (two on a window), was shared " +
            std::to_string(core::FairShare::kContendedBalanceX) + " x over, " +
            std::to_string(core::FairShare::kContendedAccruingBalanceX) + " x on a window)");
  }
  if (c.share_asks > 0) {
    row(out, "fair shares: asks / merged / crowds told",
        std::to_string(c.share_asks) + " / " + std::to_string(c.share_asks_merged) + " / " +
            std::to_string(c.share_crowds_told),
        "(keys refused and asked of their owners, where routed; peers' asks merged)");
  }
  if (c.share_debts_carried + c.share_debts_capped > 0) {
    row(out, "fair shares: debts carried / units / capped",
        std::to_string(c.share_debts_carried) + " / " + std::to_string(c.share_debt_carried_units) +
            " / " + std::to_string(c.share_debts_capped),
        "(a burst's debt the idle spell forgave, carried into the next)");
  }
  if (c.share_straggler_wakes > 0) {
    row(out, "fair shares: debts kept past a straggler", std::to_string(c.share_straggler_wakes),
        "(wakes whose news since the last held at most " +
            std::to_string(core::FairShare::kMostStragglerUnits) +
            " units: a debt or credit kept)");
  }
  if (c.share_crowds_disproved > 0) {
    row(out, "fair shares: crowds disproved", std::to_string(c.share_crowds_disproved),
        "(wakes whose last burst spent at most 1/" +
            std::to_string(core::FairShare::kDisprovedCrowdPools) + " of its pool, or ended " +
            std::to_string(core::FairShare::kDisprovingBurstRun) + " in a row of at most 1/" +
            std::to_string(core::FairShare::kRunBurstPools) + ": the key's crowd marks dropped)");
  }
  if (c.share_credits_carried > 0) {
    row(out, "fair shares: shortfalls credited / units",
        std::to_string(c.share_credits_carried) + " / " +
            std::to_string(c.share_credit_carried_units),
        "(room a burst left while refusing, lost at the cap, credited to the next)");
  }
  if (c.share_passes_thinned > 0) {
    row(out, "fair shares: first requests thinned", std::to_string(c.share_passes_thinned),
        "(epochs whose first request beyond the share a draw did not keep: a crowd)");
  }
  if (c.history_forgiven > 0) {
    row(out, "history forgiven (tokens)", std::to_string(c.history_forgiven),
        "from before a node started, beyond a key's burst");
  }
}

// Redis mode: what the nodes cost the store (core/store_sync.h).
void print_store(std::ostream& out, const Results& r) {
  const CoreTotals& c = r.core;
  const double node_s = static_cast<double>(r.nodes) * static_cast<double>(r.duration_us) / 1e6;
  const auto per_node_s = [&](std::uint64_t v) {
    return fixed(static_cast<double>(v) / std::max(1e-9, node_s), 1);
  };
  out << "\nStore (Redis mode; per node per simulated second, RESP bytes)\n";
  row(out, "round trips", fixed(packets_per_node_s(r), 1), "(one pipeline per batch)");
  row(out, "commands", per_node_s(c.store_commands),
      "(EVALSHA per key written, HGETALL per key read)");
  row(out, "keys written / read",
      per_node_s(c.store_keys_written) + " / " + per_node_s(c.store_keys_read));
  row(out, "bytes out", fixed(bytes_per_node_s(r), 0));
  std::uint64_t bytes_in = 0;
  for (const NodeResult& node : r.per_node) bytes_in += node.bytes_in;
  row(out, "bytes in", per_node_s(bytes_in));
  row(out, "batches / failed / timed out",
      std::to_string(c.store_batches) + " / " + std::to_string(c.store_batches_failed) + " / " +
          std::to_string(c.store_batches_timed_out));
  row(out, "batches leaving writes for later", std::to_string(c.store_batches_full));
  row(out, "store down (changes of state)", std::to_string(c.store_down));
  row(out, "tokens charged as stand-ins", std::to_string(c.store_tokens_charged_standin),
      "(others' estimated use while the store failed)");
  print_share_rows(out, c);
}

}  // namespace

// Simulated over wall time: one decimal, or three below 1 (a large cluster
// runs at a few hundredths of real time, which one decimal shows as 0.0).
std::string ratio_text(double ratio) { return fixed(ratio, ratio < 1 ? 3 : 1); }

void print_table(const Results& r, std::ostream& out) {
  const double simulated = seconds(r.duration_us);
  out << "rlimit-sim: " << r.scenario << " (seed " << r.seed << "): " << r.nodes << " nodes, "
      << fixed(simulated, 1) << " s simulated in " << fixed(r.wall_seconds, 2) << " s wall ("
      << ratio_text(simulated / std::max(1e-9, r.wall_seconds)) << "x real time)\n";
  if (!r.description.empty()) out << "  " << r.description << "\n";
  out << "  digest " << hex(r.digest) << "\n\n";

  const double span = traffic_seconds(r);
  const double ideal = std::max<double>(1, static_cast<double>(r.ideal));
  out << "Admission (tokens, traffic from " << format_seconds(r.traffic_start_us) << " to "
      << format_seconds(r.traffic_end_us) << "; limit " << fixed(r.limit_per_s, 1) << "/s)\n";
  row(out, "requested", std::to_string(r.arrivals),
      fixed(static_cast<double>(r.arrivals) / span, 1) + "/s");
  row(out, "ideal (one perfect limiter)", std::to_string(r.ideal),
      fixed(static_cast<double>(r.ideal) / span, 1) + "/s");
  row(out, "admitted by the cluster", std::to_string(r.admitted),
      fixed(static_cast<double>(r.admitted) / span, 1) + "/s, " + percent(r.error_ratio()) +
          " vs ideal");
  if (r.fail_open > 0) row(out, "  of which failed open", std::to_string(r.fail_open));
  row(out, "over-admission, whole run", std::to_string(r.over_run),
      percent(static_cast<double>(r.over_run) / ideal) +
          " of ideal (per key, admitted above ideal)");
  row(out, "under-admission, whole run", std::to_string(r.under_run),
      percent(static_cast<double>(r.under_run) / ideal) +
          " of ideal (per key, ideal above admitted)");
  row(out, "worst " + format_seconds(r.window_us) + " window, over",
      (r.worst_over_window >= 0 ? "+" : "") + std::to_string(r.worst_over_window),
      "at " + format_seconds(r.worst_over_at_us) + ", " +
          fixed(static_cast<double>(r.worst_over_window) / std::max(1e-9, r.limit_per_window()),
                2) +
          " x the limit per window");
  row(out, "worst " + format_seconds(r.window_us) + " window, under",
      "-" + std::to_string(r.worst_under_window),
      "at " + format_seconds(r.worst_under_at_us) + ", " +
          fixed(static_cast<double>(r.worst_under_window) / std::max(1e-9, r.limit_per_window()),
                2) +
          " x the limit per window");
  const auto limits = [&](std::int64_t tokens) {
    return fixed(static_cast<double>(tokens) / std::max(1e-9, r.limit_per_window()), 2) +
           " x the limit";
  };
  row(out, "most in a first " + format_seconds(r.window_us) + " window",
      std::to_string(r.first_window_admitted), limits(r.first_window_admitted) + " (cold start)");
  row(out, "most in a later window", std::to_string(r.worst_window_admitted),
      "at " + format_seconds(r.worst_window_at_us) + ", " + limits(r.worst_window_admitted));
  if (r.least_window_admitted >= 0) {
    row(out, "fewest in a later window", std::to_string(r.least_window_admitted),
        "at " + format_seconds(r.least_window_at_us) + ", " + limits(r.least_window_admitted) +
            " (of those whose demand reached the limit and the ideal half of it)");
  }
  if (r.least_window_vs_ideal() >= 0) {
    row(out, "fewest against the ideal", fixed(r.least_window_vs_ideal(), 2),
        "at " + format_seconds(r.least_window_vs_ideal_at_us) + ", " +
            std::to_string(r.least_window_vs_ideal_admitted) + " of the ideal's " +
            std::to_string(r.least_window_vs_ideal_ideal) + " (the same windows)");
  }
  if (r.least_window_vs_ideal_rate() >= 0) {
    row(out, "fewest against the ideal's rate", fixed(r.least_window_vs_ideal_rate(), 2),
        "at " + format_seconds(r.least_window_vs_ideal_rate_at_us) + ", " +
            std::to_string(r.least_window_vs_ideal_rate_admitted) + " of the ideal's " +
            fixed(r.least_window_vs_ideal_rate_ideal, 1) +
            " (the lower of its window and its rate around it; the same windows)");
  }
  if (r.ideal_least_window >= 0) {
    row(out, "the ideal's fewest in a later window", std::to_string(r.ideal_least_window),
        "at " + format_seconds(r.ideal_least_window_at_us) + ", " + limits(r.ideal_least_window) +
            " (of those whose demand reached the limit)");
  }
  const auto key_window = [&](const char* label, const KeyWindowFigure& f) {
    if (f.key.empty()) return;
    row(out, label, std::to_string(f.admitted),
        fixed(f.value, 2) + " x its ceiling of " + fixed(f.ceiling, 1) + " (" + f.key + " at " +
            format_seconds(f.at_us) + ", ideal " + std::to_string(f.ideal) + ")");
  };
  const auto key_over = [&](const char* label, const KeyWindowFigure& f) {
    if (f.key.empty()) return;
    row(out, label, "+" + fixed(f.value, 0),
        fixed(f.value / std::max(1e-9, f.ceiling), 2) + " x its ceiling (" + f.key + " at " +
            format_seconds(f.at_us) + ")");
  };
  key_window("one key's most in a first window", r.key_window_cold);
  key_window("one key's most in a later window", r.key_window_later);
  key_over("one key over ideal, first window", r.key_over_cold);
  key_over("one key over ideal, later window", r.key_over_later);
  row(out, "peak cumulative excess", std::to_string(r.peak_excess),
      "at " + format_seconds(r.peak_excess_at_us) + " (admitted - ideal since the start)");
  row(out, "excess at the end", std::to_string(r.final_excess), "(what is not repaid yet)");
  row(out, "requests denied, ideal allowed", std::to_string(r.denied_ideal_allowed),
      "(includes timing shifts: see docs/accuracy.md)");
  row(out, "requests allowed, ideal denied", std::to_string(r.allowed_ideal_denied));

  if (!r.convergence.empty()) {
    out << "\nConvergence (counters: every node knows all consumption from before the event;\n"
           "             balances: then every node's balance of every probed key agrees)\n";
    for (const Convergence& c : r.convergence) {
      row(out, c.event + " at " + format_seconds(c.at_us),
          format_seconds(c.counters_after_us) + " / " + format_seconds(c.balances_after_us),
          "balance spread " + fixed(c.spread_at_event, 1) + " at the event, " +
              fixed(c.spread_last, 1) + " at the last probe (tokens)");
    }
  }

  if (r.store_mode) return print_store(out, r);
  out << "\nNetwork (per node per simulated second, payload + envelope)\n";
  row(out, "packets out", fixed(packets_per_node_s(r), 1));
  row(out, "bytes out", fixed(bytes_per_node_s(r), 0));
  const NetworkStats& n = r.network;
  row(out, "datagrams sent / delivered",
      std::to_string(n.sent) + " / " + std::to_string(n.delivered));
  row(out, "lost / partitioned / over MTU",
      std::to_string(n.lost) + " / " + std::to_string(n.partitioned) + " / " +
          std::to_string(n.mtu_dropped));
  row(out, "duplicated / reordered / to down",
      std::to_string(n.duplicated) + " / " + std::to_string(n.reordered) + " / " +
          std::to_string(n.to_down_node));
  std::int64_t low = -1, high = -1;
  for (const NodeResult& node : r.per_node) {
    if (node.live_peers_end < 0) continue;
    low = low < 0 ? node.live_peers_end : std::min(low, node.live_peers_end);
    high = std::max(high, node.live_peers_end);
  }
  row(out, "live peers seen at the end", std::to_string(low) + ".." + std::to_string(high),
      "of " + std::to_string(r.nodes - 1));
  std::int64_t complete_us = 0;
  std::size_t incomplete = 0;
  for (const NodeResult& node : r.per_node) {
    if (node.view_complete_us < 0) ++incomplete;
    complete_us = std::max(complete_us, node.view_complete_us);
  }
  if (r.nodes > 1) {
    row(out, "every node knew every node by",
        incomplete > 0 ? "never" : format_seconds(complete_us),
        incomplete > 0 ? "(" + std::to_string(incomplete) + " nodes never did)"
                       : "(membership tables sent: " + std::to_string(r.core.tables_sent) + ")");
  }
  const CoreTotals& c = r.core;
  row(out, "suspicions / deaths / refutations",
      std::to_string(c.suspicions) + " / " + std::to_string(c.deaths) + " / " +
          std::to_string(c.refutations));
  row(out, "gossip rounds deferring backlog", std::to_string(c.gossip_backlog_deferred));
  if (c.routed_entries_to_owners + c.routed_entries_forwarded > 0) {
    row(out, "entries gossiped / to owners / by owners",
        std::to_string(c.entries_gossiped) + " / " + std::to_string(c.routed_entries_to_owners) +
            " / " + std::to_string(c.routed_entries_forwarded),
        "(docs/cluster.md, Owner routing; " + std::to_string(c.routed_newcomer_keys) +
            " whole keys to newcomers)");
  }
  print_share_rows(out, c);
  if (c.clock_went_back + c.key_table_full + c.remote_unknown_keys + c.invalid_checks +
          c.malformed_payloads >
      0) {
    row(out, "clock back / table full / unknown",
        std::to_string(c.clock_went_back) + " / " + std::to_string(c.key_table_full) + " / " +
            std::to_string(c.remote_unknown_keys));
    row(out, "invalid checks / malformed payloads",
        std::to_string(c.invalid_checks) + " / " + std::to_string(c.malformed_payloads));
  }

  if (r.per_node.size() <= 16) {
    out << "\nPer node\n";
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-6s %10s %10s %10s %12s %9s\n", "node", "requests",
                  "admitted", "pkts/s", "bytes/s", "restarts");
    out << buf;
    for (std::size_t i = 0; i < r.per_node.size(); ++i) {
      const NodeResult& node = r.per_node[i];
      std::snprintf(buf, sizeof buf, "  n%-5zu %10llu %10llu %10.1f %12.0f %9u\n", i,
                    static_cast<unsigned long long>(node.requests),
                    static_cast<unsigned long long>(node.admitted),
                    static_cast<double>(node.packets_out) / simulated,
                    static_cast<double>(node.bytes_out) / simulated, node.restarts);
      out << buf;
    }
  }
}

void write_json(const Results& r, std::ostream& out) {
  auto num = [](double v) { return fixed(v, 6); };
  out << "{\n";
  out << "  \"scenario\": " << quote(r.scenario) << ",\n";
  out << "  \"seed\": " << r.seed << ",\n";
  out << "  \"digest\": \"" << hex(r.digest) << "\",\n";
  out << "  \"nodes\": " << r.nodes << ",\n";
  out << "  \"duration_s\": " << num(seconds(r.duration_us)) << ",\n";
  out << "  \"wall_s\": " << num(r.wall_seconds) << ",\n";
  out << "  \"simulated_per_wall\": "
      << num(seconds(r.duration_us) / std::max(1e-9, r.wall_seconds)) << ",\n";
  out << "  \"traffic_start_s\": " << num(seconds(r.traffic_start_us)) << ",\n";
  out << "  \"traffic_end_s\": " << num(seconds(r.traffic_end_us)) << ",\n";
  out << "  \"limit_per_s\": " << num(r.limit_per_s) << ",\n";
  out << "  \"requests\": " << r.requests << ",\n";
  out << "  \"requested_tokens\": " << r.arrivals << ",\n";
  out << "  \"ideal_tokens\": " << r.ideal << ",\n";
  out << "  \"admitted_tokens\": " << r.admitted << ",\n";
  out << "  \"fail_open_tokens\": " << r.fail_open << ",\n";
  out << "  \"admitted_vs_ideal\": " << num(r.error_ratio()) << ",\n";
  out << "  \"over_admission_run_tokens\": " << r.over_run << ",\n";
  out << "  \"under_admission_run_tokens\": " << r.under_run << ",\n";
  out << "  \"window_s\": " << num(seconds(r.window_us)) << ",\n";
  out << "  \"worst_window_over_tokens\": " << r.worst_over_window << ",\n";
  out << "  \"worst_window_over_at_s\": " << num(seconds(r.worst_over_at_us)) << ",\n";
  out << "  \"worst_window_over_limits\": "
      << num(static_cast<double>(r.worst_over_window) / std::max(1e-9, r.limit_per_window()))
      << ",\n";
  out << "  \"worst_window_under_tokens\": " << r.worst_under_window << ",\n";
  out << "  \"worst_window_under_at_s\": " << num(seconds(r.worst_under_at_us)) << ",\n";
  out << "  \"first_window_admitted_tokens\": " << r.first_window_admitted << ",\n";
  out << "  \"worst_window_admitted_tokens\": " << r.worst_window_admitted << ",\n";
  out << "  \"worst_window_admitted_at_s\": " << num(seconds(r.worst_window_at_us)) << ",\n";
  out << "  \"least_window_admitted_tokens\": " << r.least_window_admitted << ",\n";
  out << "  \"least_window_admitted_at_s\": " << num(seconds(r.least_window_at_us)) << ",\n";
  out << "  \"least_window_vs_ideal\": " << num(r.least_window_vs_ideal()) << ",\n";
  out << "  \"least_window_vs_ideal_at_s\": " << num(seconds(r.least_window_vs_ideal_at_us))
      << ",\n";
  out << "  \"least_window_vs_ideal_rate\": " << num(r.least_window_vs_ideal_rate()) << ",\n";
  out << "  \"least_window_vs_ideal_rate_at_s\": "
      << num(seconds(r.least_window_vs_ideal_rate_at_us)) << ",\n";
  out << "  \"ideal_least_window_tokens\": " << r.ideal_least_window << ",\n";
  out << "  \"ideal_least_window_at_s\": " << num(seconds(r.ideal_least_window_at_us)) << ",\n";
  const auto key_json = [&](const char* name, const KeyWindowFigure& f) {
    out << "  \"" << name << "\": {\"value\": " << num(f.value)
        << ", \"admitted_tokens\": " << f.admitted << ", \"ideal_tokens\": " << f.ideal
        << ", \"ceiling_tokens\": " << num(f.ceiling) << ", \"key\": " << quote(f.key)
        << ", \"at_s\": " << num(seconds(f.at_us)) << "},\n";
  };
  key_json("key_window_first_ceilings", r.key_window_cold);
  key_json("key_window_later_ceilings", r.key_window_later);
  key_json("key_over_first_tokens", r.key_over_cold);
  key_json("key_over_later_tokens", r.key_over_later);
  out << "  \"peak_excess_tokens\": " << r.peak_excess << ",\n";
  out << "  \"peak_excess_at_s\": " << num(seconds(r.peak_excess_at_us)) << ",\n";
  out << "  \"final_excess_tokens\": " << r.final_excess << ",\n";
  out << "  \"denied_ideal_allowed_requests\": " << r.denied_ideal_allowed << ",\n";
  out << "  \"allowed_ideal_denied_requests\": " << r.allowed_ideal_denied << ",\n";
  out << "  \"packets_per_node_s\": " << num(packets_per_node_s(r)) << ",\n";
  out << "  \"bytes_per_node_s\": " << num(bytes_per_node_s(r)) << ",\n";
  out << "  \"convergence\": [";
  for (std::size_t i = 0; i < r.convergence.size(); ++i) {
    const Convergence& c = r.convergence[i];
    out << (i ? ", " : "") << "{\"event\": " << quote(c.event)
        << ", \"at_s\": " << num(seconds(c.at_us)) << ", \"counters_after_s\": "
        << (c.counters_after_us < 0 ? std::string("null") : num(seconds(c.counters_after_us)))
        << ", \"balances_after_s\": "
        << (c.balances_after_us < 0 ? std::string("null") : num(seconds(c.balances_after_us)))
        << ", \"spread_at_event_tokens\": " << num(c.spread_at_event)
        << ", \"spread_last_tokens\": " << num(c.spread_last) << "}";
  }
  out << "],\n";
  const NetworkStats& n = r.network;
  out << "  \"network\": {\"sent\": " << n.sent << ", \"delivered\": " << n.delivered
      << ", \"lost\": " << n.lost << ", \"partitioned\": " << n.partitioned
      << ", \"mtu_dropped\": " << n.mtu_dropped << ", \"duplicated\": " << n.duplicated
      << ", \"reordered\": " << n.reordered << ", \"to_down_node\": " << n.to_down_node
      << ", \"unknown_address\": " << n.unknown_address << "},\n";
  const CoreTotals& c = r.core;
  out << "  \"core\": {\"gossip_rounds\": " << c.gossip_rounds
      << ", \"gossip_backlog_deferred\": " << c.gossip_backlog_deferred
      << ", \"anti_entropy_pushes\": " << c.anti_entropy_pushes
      << ", \"entries_gossiped\": " << c.entries_gossiped
      << ", \"routed_entries_to_owners\": " << c.routed_entries_to_owners
      << ", \"routed_entries_forwarded\": " << c.routed_entries_forwarded
      << ", \"routed_newcomer_keys\": " << c.routed_newcomer_keys
      << ", \"piggyback_trimmed\": " << c.piggyback_trimmed
      << ", \"malformed_payloads\": " << c.malformed_payloads
      << ", \"remote_tokens_charged\": " << c.remote_tokens_charged
      << ", \"history_forgiven\": " << c.history_forgiven
      << ", \"share_refused\": " << c.share_refused << ", \"share_probes\": " << c.share_probes
      << ", \"share_wake_epochs\": " << c.share_wake_epochs
      << ", \"share_log_epochs_cut\": " << c.share_log_epochs_cut
      << ", \"share_single_crowd_epochs\": " << c.share_single_crowd_epochs
      << ", \"share_crowded_epochs\": " << c.share_crowded_epochs
      << ", \"share_crowded_bursts\": " << c.share_crowded_bursts
      << ", \"share_crowded_starts\": " << c.share_crowded_starts
      << ", \"share_keys_crowded\": " << c.share_keys_crowded
      << ", \"share_idle_raise_capped\": " << c.share_idle_raise_capped
      << ", \"share_sparse_raised\": " << c.share_sparse_raised
      << ", \"share_sparse_raise_capped\": " << c.share_sparse_raise_capped
      << ", \"share_contended_balance\": " << c.share_contended_balance
      << ", \"share_askers_floored\": " << c.share_askers_floored
      << ", \"share_debts_carried\": " << c.share_debts_carried
      << ", \"share_debt_carried_units\": " << c.share_debt_carried_units
      << ", \"share_debts_capped\": " << c.share_debts_capped
      << ", \"share_straggler_wakes\": " << c.share_straggler_wakes
      << ", \"share_crowds_disproved\": " << c.share_crowds_disproved
      << ", \"share_credits_carried\": " << c.share_credits_carried
      << ", \"share_credit_carried_units\": " << c.share_credit_carried_units
      << ", \"share_passes_thinned\": " << c.share_passes_thinned
      << ", \"remote_unknown_keys\": " << c.remote_unknown_keys
      << ", \"key_table_full\": " << c.key_table_full
      << ", \"clock_went_back\": " << c.clock_went_back
      << ", \"invalid_checks\": " << c.invalid_checks << ", \"suspicions\": " << c.suspicions
      << ", \"deaths\": " << c.deaths << ", \"refutations\": " << c.refutations
      << ", \"tables_sent\": " << c.tables_sent << "},\n";
  out << "  \"per_node\": [";
  for (std::size_t i = 0; i < r.per_node.size(); ++i) {
    const NodeResult& node = r.per_node[i];
    out << (i ? ",\n    " : "\n    ") << "{\"node\": " << i << ", \"requests\": " << node.requests
        << ", \"admitted_tokens\": " << node.admitted << ", \"packets_out\": " << node.packets_out
        << ", \"bytes_out\": " << node.bytes_out << ", \"packets_in\": " << node.packets_in
        << ", \"bytes_in\": " << node.bytes_in << ", \"restarts\": " << node.restarts
        << ", \"live_peers_end\": " << node.live_peers_end << "}";
  }
  out << "\n  ]\n}\n";
}

void write_csv(const Results& r, std::ostream& out) {
  const Series& s = r.series;
  const double per_s = 1e6 / static_cast<double>(s.sample_us);
  out << "t_s,limit_per_s,ideal_per_s,admitted_per_s,requested_per_s";
  const bool per_node = !s.per_node.empty();
  if (per_node) {
    for (std::uint32_t i = 0; i < r.nodes; ++i) out << ",n" << i << "_admitted_per_s";
  }
  out << "\n";
  for (std::size_t b = 0; b < s.samples(); ++b) {
    const TimeUs t = static_cast<TimeUs>(b) * s.sample_us;
    if (t >= r.duration_us) break;
    out << fixed(seconds(t), 3) << "," << fixed(r.limit_per_s, 3) << ","
        << fixed(static_cast<double>(s.ideal[b]) * per_s, 1) << ","
        << fixed(static_cast<double>(s.admitted[b]) * per_s, 1) << ","
        << fixed(static_cast<double>(s.arrivals[b]) * per_s, 1);
    if (per_node) {
      for (std::uint32_t i = 0; i < r.nodes; ++i) {
        out << "," << fixed(static_cast<double>(s.per_node[i * s.samples() + b]) * per_s, 1);
      }
    }
    out << "\n";
  }
}

}  // namespace rlimit::sim
