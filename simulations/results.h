// What one simulated run measured: the figures of the report (docs/accuracy.md
// defines each), the per-node traffic, and the time series the CSV and SVG
// are drawn from. Quantities of requests are in tokens (request cost).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "network.h"
#include "scenario.h"

namespace rlimit::sim {

struct NodeResult {
  std::uint64_t requests = 0;
  std::uint64_t admitted = 0;  // tokens
  std::uint64_t packets_out = 0;
  std::uint64_t bytes_out = 0;  // payloads plus the envelope
  std::uint64_t packets_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint32_t restarts = 0;
  std::int64_t live_peers_end = -1;  // -1: down at the end
  // When this node first knew every node of the cluster as live (simulated
  // time); -1: never.
  std::int64_t view_complete_us = -1;
};

// After a partition heals or a crashed node restarts. Counters converged:
// every live node knows (within converge_tokens) all the consumption of every
// key that any node knew at the event. Balances agreed: after that, every
// live node's balance of every probed key is within converge_tokens of the
// others'. docs/accuracy.md explains why the second may never happen.
struct Convergence {
  std::string event;  // "partition 0 healed", "node 2 restarted"
  TimeUs at_us = 0;
  TimeUs counters_after_us = -1;  // -1: not within converge_max or the run
  TimeUs balances_after_us = -1;
  double spread_at_event = 0;  // largest disagreement about a balance at the event, tokens
  double spread_last = 0;      // ... at the last probe
};

// Counters summed over every node and incarnation.
struct CoreTotals {
  std::uint64_t gossip_rounds = 0;
  std::uint64_t gossip_backlog_deferred = 0;
  std::uint64_t anti_entropy_pushes = 0;
  // Counter entries sent: by gossip (per peer), to routed keys' owners, and
  // by owners to a routed key's origins and co-owners.
  std::uint64_t entries_gossiped = 0;
  std::uint64_t routed_entries_to_owners = 0;
  std::uint64_t routed_entries_forwarded = 0;
  std::uint64_t routed_newcomer_keys = 0;  // whole keys sent by owners to origins new to them
  std::uint64_t piggyback_trimmed = 0;
  std::uint64_t malformed_payloads = 0;
  std::uint64_t remote_tokens_charged = 0;
  std::uint64_t history_forgiven = 0;  // history beyond a key's burst, not charged
  std::uint64_t share_refused = 0;     // checks the algorithm allowed and a fair share did not
  std::uint64_t share_probes = 0;      // keys new to a node, probed
  std::uint64_t share_wake_epochs = 0;  // epochs sharing a burst's pool at the key's wake
  std::uint64_t share_log_epochs_cut = 0;  // a log's epochs ended where its room starts to free
  std::uint64_t share_single_crowd_epochs = 0;  // a log's epochs from the wake, one of a crowd
  std::uint64_t share_crowded_epochs = 0;  // epochs that found a key crowded by its origins
  std::uint64_t share_crowded_bursts = 0;  // wakes that found the burst before crowded
  std::uint64_t share_straggler_wakes = 0;  // wakes that kept a debt or credit past a straggler
  std::uint64_t share_crowds_disproved = 0;  // wakes that dropped a key's crowd marks
  std::uint64_t share_crowded_starts = 0;  // rules whose many new keys made their probes strict
  std::uint64_t share_keys_crowded = 0;    // keys a crowded start made crowded (gossiped)
  std::uint64_t share_asks = 0;            // refused keys asked for where routed
  std::uint64_t share_asks_merged = 0;     // peers' asks merged
  std::uint64_t share_crowds_told = 0;     // keys made dense by a peer's crowd news
  std::uint64_t share_idle_raise_capped = 0;  // epochs whose idle raise was held at its bound
  std::uint64_t share_sparse_raised = 0;      // epochs raised for a sparse asker's turn
  std::uint64_t share_sparse_raise_capped = 0;  // ... and held at its bound
  std::uint64_t share_contended_balance = 0;    // epochs counting a contended balance over
  std::uint64_t share_askers_floored = 0;     // epochs whose crowd was the askers' floor
  std::uint64_t share_debts_carried = 0;      // wakes carrying a forgiven debt
  std::uint64_t share_debt_carried_units = 0;  // units of forgiven debt carried
  std::uint64_t share_debts_capped = 0;        // forgiven debts held at their bound
  std::uint64_t share_credits_carried = 0;     // wakes crediting a lost shortfall
  std::uint64_t share_credit_carried_units = 0;  // units of lost shortfall credited
  std::uint64_t share_passes_thinned = 0;      // first requests a draw did not keep
  std::uint64_t remote_unknown_keys = 0;
  std::uint64_t key_table_full = 0;
  std::uint64_t clock_went_back = 0;
  std::uint64_t invalid_checks = 0;
  std::uint64_t suspicions = 0;
  std::uint64_t deaths = 0;
  std::uint64_t refutations = 0;
  std::uint64_t tables_sent = 0;  // whole membership tables (table sync)
  // Redis mode (core::StoreSyncStats summed over nodes).
  std::uint64_t store_batches = 0;
  std::uint64_t store_batches_failed = 0;
  std::uint64_t store_batches_timed_out = 0;
  std::uint64_t store_batches_full = 0;
  std::uint64_t store_keys_written = 0;
  std::uint64_t store_keys_read = 0;
  std::uint64_t store_commands = 0;
  std::uint64_t store_down = 0;
  std::uint64_t store_tokens_charged_standin = 0;
};

struct Series {
  TimeUs sample_us = 100'000;
  std::vector<std::uint64_t> admitted;  // tokens per sample, all nodes
  std::vector<std::uint64_t> ideal;
  std::vector<std::uint64_t> arrivals;
  std::vector<std::uint32_t> per_node;  // [node * samples + sample], admitted tokens
  std::size_t samples() const { return admitted.size(); }
};

// One key's worst window (see Results).
struct KeyWindowFigure {
  double value = 0;  // a multiple of the ceiling, or tokens over the ideal
  std::int64_t admitted = 0;
  std::int64_t ideal = 0;
  double ceiling = 0;  // the key's, per window
  std::string key;     // "stream/key index" or "stream"; empty: no window
  TimeUs at_us = 0;    // the window's start
};

struct Results {
  std::string scenario;
  std::string description;
  std::uint64_t seed = 0;
  std::uint64_t digest = 0;
  bool store_mode = false;  // Redis mode: nodes share through a store, not peers
  std::uint32_t nodes = 0;
  TimeUs duration_us = 0;
  TimeUs traffic_start_us = 0;  // first and last instants any stream runs
  TimeUs traffic_end_us = 0;
  double wall_seconds = 0;
  double limit_per_s = 0;
  std::vector<Partition> partitions;  // for the plot
  std::vector<Crash> crashes;

  std::uint64_t requests = 0;
  std::uint64_t resets = 0;                // [[reset]]s made on a live node
  std::uint64_t arrivals = 0;              // tokens asked for
  std::uint64_t admitted = 0;              // tokens the cluster admitted
  std::uint64_t ideal = 0;                 // tokens the perfect limiter admitted
  std::uint64_t fail_open = 0;             // tokens admitted by clients of a crashed node
  std::uint64_t over_run = 0;              // sum over keys of max(0, admitted - ideal)
  std::uint64_t under_run = 0;             // sum over keys of max(0, ideal - admitted)
  std::uint64_t denied_ideal_allowed = 0;  // requests
  std::uint64_t allowed_ideal_denied = 0;  // requests

  TimeUs window_us = 0;
  std::int64_t worst_over_window = 0;  // max over windows of (admitted - ideal), tokens
  TimeUs worst_over_at_us = 0;         // the window's start
  std::int64_t worst_under_window = 0;
  TimeUs worst_under_at_us = 0;
  // Absolute admissions per window (sliding by sample_us over the traffic):
  // the most in a window that starts within the first window of traffic
  // (cold start), the most and the fewest in a later one (the fewest only
  // among windows whose arrivals reach the limit and in which the perfect
  // limiter admitted at least half of it: -1 if none did).
  std::int64_t first_window_admitted = 0;
  std::int64_t worst_window_admitted = 0;
  TimeUs worst_window_at_us = 0;
  std::int64_t least_window_admitted = -1;
  TimeUs least_window_at_us = 0;
  // The fewest the perfect limiter admitted in a later window whose
  // arrivals reached the limit (-1 if none did): where the algorithm itself
  // admits less than half the limit (a sliding window under aligned bursts,
  // warming up while cold), the cluster's fewest above cannot reach half.
  std::int64_t ideal_least_window = -1;
  TimeUs ideal_least_window_at_us = 0;
  // Over the windows the fewest above counts, the one where the cluster
  // admitted the smallest share of what the perfect limiter admitted:
  // "no silence" against the algorithm itself, for an algorithm whose own
  // windows sit near half the limit (a sliding window under aligned bursts),
  // where the fewest in limits says little. Both counts 0 if none.
  std::int64_t least_window_vs_ideal_admitted = 0;  // the cluster's, in that window
  std::int64_t least_window_vs_ideal_ideal = 0;     // the perfect limiter's
  TimeUs least_window_vs_ideal_at_us = 0;
  // The same windows against the lower of the perfect limiter's window and
  // its rate around it (what it admitted over the window and half a window
  // either side, per window, where demand reached the limit in each of
  // those two windows; else its window): "no silence" without the phase.
  // A sliding window under aligned bursts at the window's start admits its
  // whole limit in one window and next to nothing in the next (its own
  // echo); a cluster that admits half the limit in each is no quieter than
  // the algorithm, though against the ideal's full window it reads 0.5
  // (docs/accuracy.md, guarantee 3). Both 0 if no window counted.
  std::int64_t least_window_vs_ideal_rate_admitted = 0;  // the cluster's, in that window
  double least_window_vs_ideal_rate_ideal = 0;           // the lower of the ideal's two
  TimeUs least_window_vs_ideal_rate_at_us = 0;
  // Per key (per stream when its keys share one limit; key_windows.h), in
  // the windows that start within a window of the key's first admission
  // (cold) and in the later ones: the most one key admitted in a window as a
  // multiple of its ceiling (what one perfect limiter can admit in a window:
  // capacity + rate x window), and the most one key admitted beyond the
  // perfect limiter in a window, tokens.
  KeyWindowFigure key_window_cold;
  KeyWindowFigure key_window_later;
  KeyWindowFigure key_over_cold;
  KeyWindowFigure key_over_later;
  std::int64_t peak_excess = 0;  // max over time of cumulative (admitted - ideal)
  TimeUs peak_excess_at_us = 0;
  std::int64_t final_excess = 0;

  std::vector<Convergence> convergence;
  std::vector<NodeResult> per_node;
  NetworkStats network;
  CoreTotals core;
  Series series;

  // admitted / ideal - 1 (0 when the ideal admitted nothing)
  double error_ratio() const {
    return ideal == 0 ? 0 : static_cast<double>(admitted) / static_cast<double>(ideal) - 1.0;
  }
  double limit_per_window() const { return limit_per_s * static_cast<double>(window_us) / 1e6; }
  // least_window_vs_ideal_admitted / _ideal; -1 where no window counted.
  double least_window_vs_ideal() const {
    return least_window_vs_ideal_ideal <= 0 ? -1
                                            : static_cast<double>(least_window_vs_ideal_admitted) /
                                                  static_cast<double>(least_window_vs_ideal_ideal);
  }
  // least_window_vs_ideal_rate_admitted / _ideal; -1 where no window
  // counted. Never below least_window_vs_ideal() (each window against at
  // most its own; none whose span around it runs past the traffic), and
  // where the ideal admits the same in every window about equal to it.
  double least_window_vs_ideal_rate() const {
    return least_window_vs_ideal_rate_ideal <= 0
               ? -1
               : static_cast<double>(least_window_vs_ideal_rate_admitted) /
                     least_window_vs_ideal_rate_ideal;
  }
};

}  // namespace rlimit::sim
