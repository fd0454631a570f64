// Builds the answers to a status request (who this node is, its rules, and
// every counter: the core's LimiterStats, the shell's ShellCounters and, in a
// cluster, ClusterStats, MembershipStats and the transport's PeerCounters)
// and to a members request. Pure: the caller passes `now`. No Asio; not
// thread-safe (reads live state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/cluster_node.h"
#include "core/limiter.h"
#include "core/membership.h"
#include "core/time.h"
#include "shell/counters.h"

namespace rlimit::v1 {
class StatusResponse;
class MembersResponse;
class MemberInfo;
}  // namespace rlimit::v1

namespace rlimit::shell {

struct GrpcCounters;  // shell/grpc_face.h
class RedisService;   // shell/redis_service.h
class RulesService;   // shell/rules_service.h

// What status reports besides the limiter's own state. Owned by the server;
// config_source changes on reload.
struct StatusContext {
  std::string node_id;
  std::string config_source;  // file name, or "<built-in>"
  core::TimeUs started_us = 0;
  // Clustering: "none", "gossip" or "mesh". The pointers are set while the
  // cluster service runs and point into it.
  std::string cluster_mode = "none";
  const core::ClusterNode* cluster = nullptr;
  const PeerCounters* peer_counters = nullptr;
  // Redis mode: set while the service runs; its counters are store_*, redis_*.
  const RedisService* redis = nullptr;
  // Set while the gRPC face runs; its counters are named grpc_*.
  const GrpcCounters* grpc_counters = nullptr;
  // The rules in force (rules_version, rules_*; members' rules fields).
  const RulesService* rules = nullptr;
};

// Calls f(name, value) for every field of LimiterStats, in declaration order.
template <typename F>
void for_each_stat(const core::LimiterStats& s, F&& f) {
  // A new LimiterStats field must be listed here, or status would hide it.
  static_assert(sizeof(core::LimiterStats) == 49 * sizeof(std::uint64_t),
                "list every LimiterStats field in for_each_stat");
  f(std::string_view("checks"), s.checks);
  f(std::string_view("allowed"), s.allowed);
  f(std::string_view("denied"), s.denied);
  f(std::string_view("exempt"), s.exempt);
  f(std::string_view("unmatched"), s.unmatched);
  f(std::string_view("invalid"), s.invalid);
  f(std::string_view("key_table_full"), s.key_table_full);
  f(std::string_view("keys_created"), s.keys_created);
  f(std::string_view("keys_evicted"), s.keys_evicted);
  f(std::string_view("clock_went_back"), s.clock_went_back);
  f(std::string_view("peeks"), s.peeks);
  f(std::string_view("delayed"), s.delayed);
  f(std::string_view("over_limit_admitted"), s.over_limit_admitted);
  f(std::string_view("leases_released"), s.leases_released);
  f(std::string_view("leases_unknown"), s.leases_unknown);
  f(std::string_view("keys_reset"), s.keys_reset);
  f(std::string_view("resets_sent"), s.resets_sent);
  f(std::string_view("resets_applied"), s.resets_applied);
  f(std::string_view("remote_increases"), s.remote_increases);
  f(std::string_view("remote_tokens_charged"), s.remote_tokens_charged);
  f(std::string_view("remote_unknown_keys"), s.remote_unknown_keys);
  f(std::string_view("remote_charges_dropped"), s.remote_charges_dropped);
  f(std::string_view("counter_keys_forgotten"), s.counter_keys_forgotten);
  f(std::string_view("balances_raised"), s.balances_raised);
  f(std::string_view("balance_tokens_raised"), s.balance_tokens_raised);
  f(std::string_view("balance_offers_refused"), s.balance_offers_refused);
  f(std::string_view("share_refused"), s.share_refused);
  f(std::string_view("share_epochs"), s.share_epochs);
  f(std::string_view("share_probes"), s.share_probes);
  f(std::string_view("share_untracked"), s.share_untracked);
  f(std::string_view("share_wake_epochs"), s.share_wake_epochs);
  f(std::string_view("share_log_epochs_cut"), s.share_log_epochs_cut);
  f(std::string_view("share_single_crowd_epochs"), s.share_single_crowd_epochs);
  f(std::string_view("share_crowded_epochs"), s.share_crowded_epochs);
  f(std::string_view("share_crowded_starts"), s.share_crowded_starts);
  f(std::string_view("share_keys_crowded"), s.share_keys_crowded);
  f(std::string_view("share_asks"), s.share_asks);
  f(std::string_view("share_crowds_told"), s.share_crowds_told);
  f(std::string_view("share_idle_raise_capped"), s.share_idle_raise_capped);
  f(std::string_view("share_sparse_raised"), s.share_sparse_raised);
  f(std::string_view("share_sparse_raise_capped"), s.share_sparse_raise_capped);
  f(std::string_view("share_contended_balance"), s.share_contended_balance);
  f(std::string_view("share_askers_floored"), s.share_askers_floored);
  f(std::string_view("share_debts_carried"), s.share_debts_carried);
  f(std::string_view("share_debt_carried_units"), s.share_debt_carried_units);
  f(std::string_view("share_debts_capped"), s.share_debts_capped);
  f(std::string_view("share_credits_carried"), s.share_credits_carried);
  f(std::string_view("share_credit_carried_units"), s.share_credit_carried_units);
  f(std::string_view("share_passes_thinned"), s.share_passes_thinned);
}

// Calls f(name, value) for every field of ClusterStats, in declaration order.
template <typename F>
void for_each_cluster_stat(const core::ClusterStats& s, F&& f) {
  static_assert(sizeof(core::ClusterStats) == 31 * sizeof(std::uint64_t),
                "list every ClusterStats field in for_each_cluster_stat");
  f(std::string_view("cluster_packets_out"), s.packets_out);
  f(std::string_view("cluster_bytes_out"), s.bytes_out);
  f(std::string_view("cluster_packets_in"), s.packets_in);
  f(std::string_view("cluster_bytes_in"), s.bytes_in);
  f(std::string_view("cluster_malformed_payloads"), s.malformed_payloads);
  f(std::string_view("cluster_foreign_cluster"), s.foreign_cluster);
  f(std::string_view("cluster_entries_sent"), s.entries_sent);
  f(std::string_view("cluster_entries_received"), s.entries_received);
  f(std::string_view("cluster_entries_applied"), s.entries_applied);
  f(std::string_view("cluster_tokens_charged_remote"), s.tokens_charged_remote);
  f(std::string_view("gossip_rounds"), s.gossip_rounds);
  f(std::string_view("gossip_backlog_deferred"), s.gossip_backlog_deferred);
  f(std::string_view("anti_entropy_pushes"), s.anti_entropy_pushes);
  f(std::string_view("cluster_piggyback_trimmed"), s.piggyback_trimmed);
  f(std::string_view("cluster_balances_sent"), s.balances_sent);
  f(std::string_view("cluster_balances_received"), s.balances_received);
  f(std::string_view("cluster_balances_raised"), s.balances_raised);
  f(std::string_view("cluster_reset_floors_received"), s.reset_floors_received);
  f(std::string_view("peer_replay_duplicates"), s.replay_duplicates);
  f(std::string_view("peer_replay_below_window"), s.replay_below_window);
  f(std::string_view("peer_replay_old_incarnation"), s.replay_old_incarnation);
  f(std::string_view("peer_replay_stale"), s.replay_stale);
  f(std::string_view("peer_replay_future"), s.replay_future);
  f(std::string_view("peer_unsequenced_refused"), s.replay_unsequenced_refused);
  f(std::string_view("peer_unsequenced_accepted"), s.replay_unsequenced_accepted);
  f(std::string_view("peer_replay_senders_evicted"), s.replay_senders_evicted);
  f(std::string_view("peer_misdirected"), s.misdirected);
  f(std::string_view("cluster_entries_gossiped"), s.entries_gossiped);
  f(std::string_view("cluster_routed_entries_to_owners"), s.routed_entries_to_owners);
  f(std::string_view("cluster_routed_entries_forwarded"), s.routed_entries_forwarded);
  f(std::string_view("cluster_routed_newcomer_keys"), s.routed_newcomer_keys);
}

// Calls f(name, value) for every field of MembershipStats, in declaration
// order.
template <typename F>
void for_each_membership_stat(const core::MembershipStats& s, F&& f) {
  static_assert(sizeof(core::MembershipStats) == 13 * sizeof(std::uint64_t),
                "list every MembershipStats field in for_each_membership_stat");
  f(std::string_view("members_probes_sent"), s.probes_sent);
  f(std::string_view("members_indirect_probes_sent"), s.indirect_probes_sent);
  f(std::string_view("members_acks_received"), s.acks_received);
  f(std::string_view("members_suspicions"), s.suspicions);
  f(std::string_view("members_deaths"), s.deaths);
  f(std::string_view("members_refutations"), s.refutations);
  f(std::string_view("members_reannouncements"), s.reannouncements);
  f(std::string_view("members_joins_sent"), s.joins_sent);
  f(std::string_view("members_rejoins_sent"), s.rejoins_sent);
  f(std::string_view("members_over_bound"), s.members_over_bound);
  f(std::string_view("members_stale_updates"), s.stale_updates);
  f(std::string_view("members_tables_sent"), s.tables_sent);
  f(std::string_view("members_tables_not_sent"), s.tables_not_sent);
}

// Fills `out` (cleared first). In a cluster the counters also hold gauges of
// the membership: members_alive, members_suspect, members_dead, members_left
// (this node included, as alive).
void fill_status(const StatusContext& context, const core::Limiter& limiter,
                 const ShellCounters& counters, core::TimeUs now, v1::StatusResponse& out);

// Fills `out` (cleared first): the cluster's name and mode and every member
// this node knows, itself first. Without clustering: mode "none", no cluster
// name, and this node alone.
void fill_members(const StatusContext& context, core::TimeUs now, v1::MembersResponse& out);

// One member as rlimitctl members shows it: last_heard_ms_ago is -1 if it was
// never heard from directly, 0 for this node itself.
void fill_member_info(const core::Member& member, bool self, core::TimeUs now, v1::MemberInfo& out);

}  // namespace rlimit::shell
