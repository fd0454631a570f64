#include "shell/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "rlimit/v1/client.pb.h"
#include "shell/rules_service.h"

namespace rlimit::shell {
namespace {

constexpr MetricType kCounter = MetricType::kCounter;
constexpr MetricType kGauge = MetricType::kGauge;

constexpr StatusMetric counter(std::string_view family, std::string_view help) {
  return {family, MetricType::kCounter, help, {}, {}, 1};
}
constexpr StatusMetric gauge(std::string_view family, std::string_view help) {
  return {family, MetricType::kGauge, help, {}, {}, 1};
}
// One sample of a labelled family; the family's help goes on its first one.
constexpr StatusMetric labelled(std::string_view family, MetricType type, std::string_view help,
                                std::string_view label_name, std::string_view label_value) {
  return {family, type, help, label_name, label_value, 1};
}
constexpr StatusMetric scaled(std::string_view family, std::string_view help, double scale) {
  return {family, MetricType::kCounter, help, {}, {}, scale};
}

// Every status counter's metric. Order is free: families are emitted in the
// order status lists their first member.
const StatusMetric kStatusMetrics[] = {
    // core::LimiterStats
    counter("rlimit_checks_total", "Checks decided by the core, every mode and face."),
    counter("rlimit_allowed_total", "Checks allowed (exempt and unmatched included)."),
    counter("rlimit_denied_total", "Checks denied."),
    counter("rlimit_exempt_total", "Checks an exemption allowed without charging."),
    counter("rlimit_unmatched_total", "Checks no rule matched (allowed)."),
    counter("rlimit_invalid_total", "Checks the core found invalid."),
    counter("rlimit_key_table_full_total",
            "Checks that needed a new key while the key table held max_keys."),
    counter("rlimit_keys_created_total", "Keys created."),
    counter("rlimit_keys_evicted_total", "Idle keys evicted by the sweep."),
    counter("rlimit_clock_went_back_total", "Checks whose time was before a key's last refill."),
    counter("rlimit_peeks_total", "Checks in peek mode (also counted as allowed or denied)."),
    counter("rlimit_delayed_total",
            "Checks allowed with a wait (shaper, smooth limiters, reserve)."),
    counter("rlimit_over_limit_admitted_total",
            "Rule verdicts over the limit that a throttle mode (shadow, soft, elastic) admitted."),
    counter("rlimit_leases_released_total", "Concurrency leases released."),
    counter("rlimit_leases_unknown_total", "Releases or extensions of no live lease."),
    counter("rlimit_keys_reset_total", "Keys reset by reset requests."),
    counter("rlimit_resets_sent_total", "Key resets made here and sent to the cluster."),
    counter("rlimit_resets_applied_total", "Key resets from peers applied here."),
    counter("rlimit_remote_increases_total", "Peer counter entries that raised what we knew."),
    counter("rlimit_remote_tokens_charged_total", "Tokens charged into buckets for peers."),
    counter("rlimit_remote_unknown_keys_total",
            "Peer counter increases for keys of rules this node does not have."),
    counter("rlimit_remote_charges_dropped_total",
            "Peer charges dropped: no key could be made (key table full)."),
    counter("rlimit_ledger_keys_forgotten_total", "Ledger keys garbage-collected."),
    counter("rlimit_balances_raised_total", "Balance offers from peers that raised a bucket."),
    counter("rlimit_balance_tokens_raised_total", "Whole tokens balance offers added."),
    counter("rlimit_balance_offers_refused_total",
            "Balance offers refused (entries did not cover the offer)."),
    counter("rlimit_share_refused_total",
            "Rule verdicts the algorithm allowed and this node's fair share refused."),
    counter("rlimit_share_epochs_total", "Fair shares fixed."),
    counter("rlimit_share_probes_total", "Fair share epochs that probed a key new here."),
    counter("rlimit_share_untracked_total",
            "Checks not gated by a fair share because the ledger held max_keys."),
    counter("rlimit_share_wake_epochs_total",
            "Fair share epochs that shared a burst's pool as it stood at the key's wake."),
    counter("rlimit_share_log_epochs_cut_total",
            "Fair share epochs of a sliding log that ended where its room starts to free."),
    counter("rlimit_share_single_crowd_epochs_total",
            "Fair share epochs of a sliding log that shared the wake's pool as one of a crowd of "
            "single requests."),
    labelled("rlimit_share_crowded_total", kCounter,
             "Fair shares that found a key crowded and made demand on it dense, by what showed "
             "it: at least as many origins spending at about the same time as the pool holds (at "
             "an epoch), a burst that "
             "consumed three times its pool (at a wake), or, for a rule, many of its keys new "
             "at once (its probes turned strict).",
             "by", "origins"),
    labelled("rlimit_share_crowded_total", kCounter, "", "by", "new_keys"),
    counter("rlimit_share_keys_crowded_total",
            "Keys made crowded when many of a rule's keys were new at once (from 50 live "
            "nodes): dense for 60 s, gossiped rather than routed to owners (where keys are "
            "routed, only a sliding log's or window's)."),
    counter("rlimit_share_asks_total",
            "Keys this node's share refused with no entry of its own, where keys are routed: "
            "asked of their owners for their news."),
    counter("rlimit_share_crowds_told_total",
            "Keys made crowded for 1.5 s because a peer told of a crowd on them."),
    counter("rlimit_share_idle_raise_capped_total",
            "Fair share epochs whose raise for the bursts this node asks nothing in was held at "
            "its bound (1.5 x)."),
    counter("rlimit_share_sparse_raised_total",
            "Fair share epochs whose share was raised for this node's sparse asking on a busy "
            "key (by the time since its last epoch began, in news horizons; at a sliding "
            "log's wake, by the time the key was busy since then, in epochs of two horizons; "
            "on a fixed window's first epoch after a wake, by the time since the wake)."),
    counter("rlimit_share_sparse_raise_capped_total",
            "Fair share epochs whose sparse asker's raise was held at its bound (16 x)."),
    counter("rlimit_share_contended_balance_total",
            "Fair share epochs whose share counted a contended balance 4 times, 8 on a sliding "
            "window (a sliding log under dense demand or a sliding window, a balance below the "
            "epoch's refill, two on a window)."),
    counter("rlimit_share_askers_floored_total",
            "Fair share epochs whose crowd's chance was counted from the askers' floor (4/63 of "
            "the live nodes): this node asked in hardly any of the key's recent bursts."),
    counter("rlimit_share_debts_carried_total",
            "Wakes at which a key's fair share carried a debt its last burst ran up and the idle "
            "spell forgave at the cap."),
    counter("rlimit_share_debt_carried_units_total",
            "Units (tokens, requests) of forgiven debt carried into keys' next bursts."),
    counter("rlimit_share_debts_capped_total",
            "Forgiven debts and lost shortfalls held at their bound (a quarter of the "
            "capacity: FairShare::kMaxDebtX8)."),
    counter("rlimit_share_credits_carried_total",
            "Wakes at which a key's fair share credited the room its last burst left while "
            "refusing requests and the idle spell lost at the cap."),
    counter("rlimit_share_credit_carried_units_total",
            "Units (tokens, requests) of lost shortfall credited to keys' next bursts."),
    counter("rlimit_share_passes_thinned_total",
            "Fair share epochs whose first request beyond the share a draw did not keep (many "
            "more nodes spending on the key than its pool holds requests)."),
    // ShellCounters
    counter("rlimit_connections_accepted_total", "Unix socket connections accepted."),
    counter("rlimit_connections_rejected_total",
            "Unix socket connections closed at once: over max_connections."),
    gauge("rlimit_connections_open", "Unix socket connections open now."),
    counter("rlimit_accept_errors_total", "Unix socket accept failures."),
    counter("rlimit_read_errors_total", "Unix socket read failures (not clean closes)."),
    counter("rlimit_write_errors_total", "Unix socket write failures."),
    counter("rlimit_connections_force_closed_total",
            "Connections still busy after shutdown_grace, closed."),
    counter("rlimit_write_timeouts_total",
            "Connections closed: an answer not taken within write_timeout."),
    counter("rlimit_idle_timeouts_total",
            "Connections closed: nothing received within idle_timeout."),
    counter("rlimit_bytes_received_total", "Bytes read from Unix socket clients."),
    counter("rlimit_bytes_sent_total", "Bytes written to Unix socket clients."),
    counter("rlimit_frames_received_total", "Frames read from Unix socket clients."),
    counter("rlimit_check_requests_total", "Check requests (batches) received."),
    counter("rlimit_status_requests_total", "Status requests received."),
    counter("rlimit_members_requests_total", "Members requests received."),
    counter("rlimit_release_requests_total", "Lease release or extend requests received."),
    counter("rlimit_reset_requests_total", "Reset requests received (refused ones included)."),
    counter("rlimit_unsupported_version_total", "Frames of an unsupported protocol version."),
    counter("rlimit_malformed_frames_total", "Frames that did not decode."),
    counter("rlimit_frames_too_large_total", "Frames above max_frame_bytes."),
    counter("rlimit_unknown_message_types_total", "Frames of an unknown message type."),
    counter("rlimit_too_many_checks_total", "Batches above max_checks_per_frame."),
    counter("rlimit_invalid_checks_total", "Checks the shell rejected before the core."),
    counter("rlimit_responses_too_large_total",
            "Answers above max_response_bytes (an error was sent instead)."),
    counter("rlimit_truncated_frames_total", "Connections closed by the peer mid-frame."),
    counter("rlimit_session_failures_total", "Sessions ended by an exception."),
    counter("rlimit_leases_malformed_total", "Lease tokens that did not decode."),
    counter("rlimit_leases_forged_total", "Well-formed lease tokens this process did not issue."),
    counter("rlimit_resets_refused_total", "Reset requests refused (allow_reset = false)."),
    counter("rlimit_sweeps_total", "Sweeps run."),
    counter("rlimit_reloads_total", "Reloads that installed new rules."),
    counter("rlimit_reload_failures_total", "Reloads rejected (the old rules kept)."),
    gauge("rlimit_load_permille",
          "The daemon's CPU use in permille of one core, smoothed (what elastic rules read)."),
    counter("rlimit_busy_poll_hits_total", "Busy-poll windows that found work."),
    counter("rlimit_busy_poll_misses_total", "Busy-poll windows that ran out, then slept."),
    scaled("rlimit_busy_poll_cpu_seconds_total", "CPU time spent busy polling.", 1e-6),
    counter("rlimit_http_connections_accepted_total", "HTTP connections accepted."),
    counter("rlimit_http_connections_rejected_total",
            "HTTP connections closed at once: over [http] max_connections."),
    gauge("rlimit_http_connections_open", "HTTP connections open now."),
    counter("rlimit_http_requests_total", "HTTP requests read whole (every path)."),
    counter("rlimit_http_checks_total", "HTTP /v1/check requests decided."),
    counter("rlimit_http_denied_total", "HTTP checks answered with the deny status."),
    counter("rlimit_http_bad_requests_total", "HTTP 400 answers: a check that does not map."),
    counter("rlimit_http_not_found_total", "HTTP 404 and 405 answers."),
    counter("rlimit_http_too_large_total", "HTTP 413 and 431 answers."),
    counter("rlimit_http_timeouts_total",
            "HTTP connections closed: a request not whole within request_timeout."),
    counter("rlimit_http_malformed_total", "HTTP connections that sent bytes that are not HTTP."),
    // core::ClusterStats
    labelled("rlimit_cluster_packets_total", kCounter, "Peer payloads handled by the cluster node.",
             "direction", "out"),
    labelled("rlimit_cluster_bytes_total", kCounter,
             "Bytes of peer payloads handled by the cluster node.", "direction", "out"),
    labelled("rlimit_cluster_packets_total", kCounter, "", "direction", "in"),
    labelled("rlimit_cluster_bytes_total", kCounter, "", "direction", "in"),
    labelled("rlimit_peer_dropped_total", kCounter, "Peer input dropped, by cause.", "cause",
             "malformed_payload"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "foreign_cluster"),
    counter("rlimit_cluster_entries_sent_total", "Counter entries sent to peers."),
    counter("rlimit_cluster_entries_received_total", "Counter entries received from peers."),
    counter("rlimit_cluster_entries_applied_total", "Received counter entries that raised one."),
    counter("rlimit_cluster_tokens_charged_remote_total",
            "Tokens charged locally for consumption on peers."),
    counter("rlimit_gossip_rounds_total", "Gossip rounds run."),
    counter("rlimit_gossip_backlog_deferred_total",
            "Gossip rounds that left changes for a later round."),
    counter("rlimit_anti_entropy_pushes_total", "Anti-entropy slices pushed."),
    counter("rlimit_cluster_piggyback_trimmed_total",
            "Membership records left off a full payload."),
    counter("rlimit_cluster_balances_sent_total", "Keys sent with a balance (per peer)."),
    counter("rlimit_cluster_balances_received_total", "Balances received."),
    counter("rlimit_cluster_balances_raised_total", "Received balances that raised a bucket."),
    counter("rlimit_cluster_reset_floors_received_total", "Reset floors received."),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "replay_duplicate"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "replay_below_window"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "replay_old_incarnation"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "replay_stale"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "replay_future"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "unsequenced"),
    counter("rlimit_peer_unsequenced_accepted_total",
            "Peer messages without a sequence number taken (accept_unsequenced)."),
    counter("rlimit_peer_replay_senders_evicted_total",
            "Senders the replay window forgot: it held its bound of them."),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "misdirected"),
    counter("rlimit_cluster_entries_gossiped_total",
            "Counter entries sent by gossip to random peers (per peer)."),
    counter("rlimit_cluster_routed_entries_to_owners_total",
            "Counter entries of routed keys sent to the keys' owners."),
    counter("rlimit_cluster_routed_entries_forwarded_total",
            "Counter entries this node, as an owner, sent to a routed key's users and co-owners."),
    counter("rlimit_cluster_routed_newcomer_keys_total",
            "Routed keys this node, as an owner, sent whole to a node new to them."),
    // core::MembershipStats
    counter("rlimit_members_probes_sent_total", "SWIM probes sent."),
    counter("rlimit_members_indirect_probes_sent_total", "SWIM indirect probes sent."),
    counter("rlimit_members_acks_received_total", "SWIM acks received."),
    counter("rlimit_members_suspicions_total", "Members this node began to suspect."),
    counter("rlimit_members_deaths_total", "Members declared dead."),
    counter("rlimit_members_refutations_total", "Suspicions of this node it refuted."),
    counter("rlimit_members_reannouncements_total", "Times this node re-announced itself."),
    counter("rlimit_members_joins_sent_total", "Join messages sent to seeds."),
    counter("rlimit_members_rejoins_sent_total", "Rejoins through a seed not a live member."),
    counter("rlimit_members_over_bound_total", "Members not added: the table was full."),
    counter("rlimit_members_stale_updates_total", "Membership updates older than known."),
    counter("rlimit_members_tables_sent_total",
            "Whole membership tables sent to a member whose live set differed."),
    counter("rlimit_members_tables_not_sent_total",
            "Membership tables not sent: one was sent within table_sync_interval."),
    // fill_status's membership gauges
    labelled("rlimit_cluster_members", kGauge,
             "Cluster members this node knows, by state (itself alive).", "state", "alive"),
    labelled("rlimit_cluster_members", kGauge, "", "state", "suspect"),
    labelled("rlimit_cluster_members", kGauge, "", "state", "dead"),
    labelled("rlimit_cluster_members", kGauge, "", "state", "left"),
    counter("rlimit_ledger_history_forgiven_total",
            "Tokens of consumption from before this process started that were not charged."),
    labelled("rlimit_ledger_over_bound_total", kCounter,
             "Peer counter data the ledger refused at a bound, by bound.", "bound", "max_origins"),
    labelled("rlimit_ledger_over_bound_total", kCounter, "", "bound", "max_ledger_keys"),
    labelled("rlimit_ledger_over_bound_total", kCounter, "", "bound", "max_entries_per_key"),
    labelled("rlimit_share_crowded_total", kCounter, "", "by", "burst"),
    counter("rlimit_share_straggler_wakes_total",
            "Wakes whose news since the last held at most 5 units: that wake was a straggler's, "
            "and a debt or credit waiting for its epoch was kept through it."),
    counter("rlimit_share_crowds_disproved_total",
            "Wakes whose last burst spent at most an eighth of its pool, or ended 4 bursts in a "
            "row that each spent at most a quarter of the pool last seen here: no crowd's, and "
            "the key's crowd marks were dropped."),
    // PeerCounters
    labelled("rlimit_peer_packets_total", kCounter, "Peer datagrams or frames on the peer socket.",
             "direction", "in"),
    labelled("rlimit_peer_bytes_total", kCounter, "Bytes on the peer socket.", "direction", "in"),
    labelled("rlimit_peer_packets_total", kCounter, "", "direction", "out"),
    labelled("rlimit_peer_bytes_total", kCounter, "", "direction", "out"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "bad_mac"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "unknown_key"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "malformed"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "oversize"),
    counter("rlimit_peer_send_errors_total", "Peer sends the kernel refused."),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "send_buffer_full"),
    counter("rlimit_peer_resolve_failures_total", "Peer addresses that did not resolve."),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "unroutable"),
    labelled("rlimit_peer_dropped_total", kCounter, "", "cause", "queue_overflow"),
    counter("rlimit_peer_receive_errors_total", "Peer socket receive errors."),
    counter("rlimit_peer_connects_total", "Mesh: outgoing connections established."),
    counter("rlimit_peer_connect_failures_total", "Mesh: outgoing connection attempts failed."),
    counter("rlimit_peer_connections_accepted_total", "Mesh: incoming connections accepted."),
    counter("rlimit_peer_connections_rejected_total", "Mesh: incoming connections over the bound."),
    counter("rlimit_peer_disconnects_garbage_total", "Mesh: connections closed for bad input."),
    gauge("rlimit_peer_connections_open", "Mesh: peer connections open now, both directions."),
    // GrpcCounters
    counter("rlimit_grpc_calls_total", "gRPC ShouldRateLimit calls received."),
    counter("rlimit_grpc_descriptors_total", "gRPC descriptors checked."),
    counter("rlimit_grpc_ok_total", "gRPC answers with overall code OK."),
    counter("rlimit_grpc_over_limit_total", "gRPC answers with overall code OVER_LIMIT."),
    counter("rlimit_grpc_invalid_argument_total", "gRPC INVALID_ARGUMENT answers."),
    counter("rlimit_grpc_resource_exhausted_total",
            "gRPC RESOURCE_EXHAUSTED answers (batch too large)."),
    counter("rlimit_grpc_pending_full_total",
            "gRPC UNAVAILABLE answers: max_pending calls waiting."),
    counter("rlimit_grpc_shutting_down_total", "gRPC calls that arrived while stopping."),
    counter("rlimit_grpc_internal_errors_total", "gRPC INTERNAL answers."),
    gauge("rlimit_grpc_pending", "gRPC calls waiting for the event loop now."),
    // The rules API and rules across the cluster (shell/rules_service.h)
    gauge("rlimit_rules_version",
          "Version of the rules in force (0: this node's own config file)."),
    counter("rlimit_rules_validations_total", "Rules documents validated."),
    counter("rlimit_rules_applies_total", "Rule sets applied here through the rules API."),
    counter("rlimit_rules_applies_invalid_total",
            "Rules documents refused as invalid (apply or validate)."),
    counter("rlimit_rules_persist_failures_total",
            "Applies that failed: the rules state file could not be written."),
    counter("rlimit_rules_received_applied_total", "Rule sets from peers applied."),
    counter("rlimit_rules_received_refused_total",
            "Rule sets from peers refused (not valid here, or a wrong digest)."),
    counter("rlimit_rules_state_file_invalid_total",
            "Starts whose rules state file could not be used."),
    counter("rlimit_rules_http_unauthorized_total", "/v1/rules requests without the right token."),
    counter("rlimit_rules_http_requests_total", "/v1/rules requests answered."),
    counter("rlimit_rules_sync_adverts_newer_total", "Peer advertisements of newer rules."),
    counter("rlimit_rules_sync_transfers_started_total", "Rule set transfers started."),
    counter("rlimit_rules_sync_transfers_completed_total", "Rule set transfers completed."),
    counter("rlimit_rules_sync_transfers_abandoned_total",
            "Rule set transfers abandoned after their retries."),
    counter("rlimit_rules_sync_transfers_superseded_total",
            "Rule set transfers superseded by a newer version."),
    counter("rlimit_rules_sync_too_large_total", "Rule sets refused above max_rules_bytes."),
    counter("rlimit_rules_sync_requests_sent_total", "Rule chunk requests sent."),
    counter("rlimit_rules_sync_retries_total", "Rule chunk windows asked again."),
    counter("rlimit_rules_sync_requests_served_total", "Rule chunk requests served."),
    counter("rlimit_rules_sync_requests_unknown_total",
            "Rule chunk requests for a version this node does not hold."),
    counter("rlimit_rules_sync_chunks_sent_total", "Rule chunks sent."),
    counter("rlimit_rules_sync_chunks_received_total", "Rule chunks received."),
    counter("rlimit_rules_sync_chunks_duplicate_total", "Duplicate rule chunks."),
    counter("rlimit_rules_sync_chunks_stale_total",
            "Rule chunks not for the transfer in progress."),
    counter("rlimit_rules_sync_chunks_malformed_total",
            "Rule chunks that contradicted their transfer."),
    counter("rlimit_rules_sync_refused_total", "Received rule sets this node could not use."),
    // Redis mode (core::StoreSyncStats, RedisStoreStats)
    counter("rlimit_store_batches_total", "Redis mode: batches sent to the store."),
    counter("rlimit_store_batches_failed_total",
            "Redis mode: batches that failed, wholly or partly."),
    counter("rlimit_store_batches_timed_out_total",
            "Redis mode: batches unanswered within the batch timeout (written again)."),
    counter("rlimit_store_batches_full_total",
            "Redis mode: batches that left writes for the next (max_writes_per_batch)."),
    counter("rlimit_store_keys_written_total", "Redis mode: keys written (own counters)."),
    counter("rlimit_store_keys_read_total", "Redis mode: keys read in rotation."),
    counter("rlimit_store_writes_failed_total",
            "Redis mode: key writes that failed (written again)."),
    counter("rlimit_store_entries_received_total",
            "Redis mode: counter entries read from the store."),
    counter("rlimit_store_entries_applied_total", "Redis mode: entries that raised a counter."),
    counter("rlimit_store_tokens_charged_remote_total",
            "Redis mode: tokens charged for other nodes' consumption."),
    counter(
        "rlimit_store_tokens_charged_standin_total",
        "Redis mode: tokens charged as stand-ins (others' estimated use while the store failed)."),
    counter("rlimit_store_standin_origins_untracked_total",
            "Redis mode: origins not estimated: over [cluster] max_entries_per_key."),
    counter("rlimit_store_down_total",
            "Redis mode: changes from a store that answers to one that fails."),
    gauge("rlimit_store_healthy", "Redis mode: 1 while the last batch came back whole."),
    gauge("rlimit_store_dirty_keys", "Redis mode: keys waiting to be written."),
    gauge("rlimit_store_held_keys", "Redis mode: keys read in rotation."),
    gauge("rlimit_store_recent_origins", "Redis mode: other nodes seen spending lately."),
    counter("rlimit_redis_batches_refused_queue_full_total",
            "Redis mode: batches refused, one already waiting."),
    counter("rlimit_redis_commands_total", "Redis commands sent."),
    counter("rlimit_redis_round_trips_total", "Redis pipelines sent (one round trip each)."),
    labelled("rlimit_redis_bytes_total", kCounter, "RESP bytes to and from Redis.", "direction",
             "out"),
    labelled("rlimit_redis_bytes_total", kCounter, "", "direction", "in"),
    counter("rlimit_redis_connects_total", "Redis connection attempts."),
    counter("rlimit_redis_connect_failures_total", "Redis connection attempts that failed."),
    counter("rlimit_redis_connects_deferred_total",
            "Redis node's keys failed at once: its reconnect backoff had not passed."),
    counter("rlimit_redis_connections_lost_total", "Open Redis connections lost (error, timeout)."),
    counter("rlimit_redis_moved_total", "Redis Cluster MOVED replies."),
    counter("rlimit_redis_ask_total", "Redis Cluster ASK replies."),
    counter("rlimit_redis_noscript_total", "NOSCRIPT replies (the script sent again)."),
    counter("rlimit_redis_redirects_exhausted_total",
            "Redis commands failed after max_redirects redirections."),
    counter("rlimit_redis_slot_refreshes_total", "Redis Cluster slot maps installed."),
    counter("rlimit_redis_slot_refresh_failures_total", "Redis Cluster slot map refreshes failed."),
    counter("rlimit_redis_fields_skipped_total", "Redis hash fields that did not decode."),
};

// The status name of each entry of kStatusMetrics, same order.
constexpr std::string_view kStatusNames[] = {
    "checks", "allowed", "denied", "exempt", "unmatched", "invalid", "key_table_full",
    "keys_created", "keys_evicted", "clock_went_back", "peeks", "delayed", "over_limit_admitted",
    "leases_released", "leases_unknown", "keys_reset", "resets_sent", "resets_applied",
    "remote_increases", "remote_tokens_charged", "remote_unknown_keys", "remote_charges_dropped",
    "counter_keys_forgotten", "balances_raised", "balance_tokens_raised", "balance_offers_refused",
    "share_refused", "share_epochs", "share_probes", "share_untracked", "share_wake_epochs",
    "share_log_epochs_cut", "share_single_crowd_epochs", "share_crowded_epochs",
    "share_crowded_starts", "share_keys_crowded", "share_asks", "share_crowds_told",
    "share_idle_raise_capped", "share_sparse_raised", "share_sparse_raise_capped",
    "share_contended_balance", "share_askers_floored", "share_debts_carried",
    "share_debt_carried_units", "share_debts_capped", "share_credits_carried",
    "share_credit_carried_units", "share_passes_thinned",
    // ShellCounters
    "connections_accepted", "connections_rejected", "connections_open", "accept_errors",
    "read_errors", "write_errors", "connections_force_closed", "write_timeouts", "idle_timeouts",
    "bytes_received", "bytes_sent", "frames_received", "check_requests", "status_requests",
    "members_requests", "release_requests", "reset_requests", "unsupported_version",
    "malformed_frames", "frames_too_large", "unknown_message_types", "too_many_checks",
    "invalid_checks", "responses_too_large", "truncated_frames", "session_failures",
    "leases_malformed", "leases_forged", "resets_refused", "sweeps", "reloads", "reload_failures",
    "load_permille", "busy_poll_hits", "busy_poll_misses", "busy_poll_cpu_us",
    "http_connections_accepted", "http_connections_rejected", "http_connections_open",
    "http_requests", "http_checks", "http_denied", "http_bad_requests", "http_not_found",
    "http_too_large", "http_timeouts", "http_malformed",
    // ClusterStats
    "cluster_packets_out", "cluster_bytes_out", "cluster_packets_in", "cluster_bytes_in",
    "cluster_malformed_payloads", "cluster_foreign_cluster", "cluster_entries_sent",
    "cluster_entries_received", "cluster_entries_applied", "cluster_tokens_charged_remote",
    "gossip_rounds", "gossip_backlog_deferred", "anti_entropy_pushes", "cluster_piggyback_trimmed",
    "cluster_balances_sent", "cluster_balances_received", "cluster_balances_raised",
    "cluster_reset_floors_received", "peer_replay_duplicates", "peer_replay_below_window",
    "peer_replay_old_incarnation", "peer_replay_stale", "peer_replay_future",
    "peer_unsequenced_refused", "peer_unsequenced_accepted", "peer_replay_senders_evicted",
    "peer_misdirected", "cluster_entries_gossiped", "cluster_routed_entries_to_owners",
    "cluster_routed_entries_forwarded", "cluster_routed_newcomer_keys",
    // MembershipStats
    "members_probes_sent", "members_indirect_probes_sent", "members_acks_received",
    "members_suspicions", "members_deaths", "members_refutations", "members_reannouncements",
    "members_joins_sent", "members_rejoins_sent", "members_over_bound", "members_stale_updates",
    "members_tables_sent", "members_tables_not_sent", "members_alive", "members_suspect",
    "members_dead", "members_left", "ledger_history_forgiven", "ledger_origins_over_bound",
    "ledger_keys_over_bound", "ledger_entries_over_bound", "share_crowded_bursts",
    "share_straggler_wakes", "share_crowds_disproved",
    // PeerCounters
    "peer_packets_received", "peer_bytes_received", "peer_packets_sent", "peer_bytes_sent",
    "peer_bad_mac", "peer_unknown_key", "peer_malformed", "peer_oversize", "peer_send_errors",
    "peer_send_dropped", "peer_resolve_failures", "peer_unroutable_dropped", "peer_queue_overflow",
    "peer_receive_errors", "peer_connects", "peer_connect_failures", "peer_connections_accepted",
    "peer_connections_rejected", "peer_disconnects_garbage", "peer_connections_open",
    // GrpcCounters
    "grpc_calls", "grpc_descriptors", "grpc_ok", "grpc_over_limit", "grpc_invalid_argument",
    "grpc_resource_exhausted", "grpc_pending_full", "grpc_shutting_down", "grpc_internal_errors",
    "grpc_pending",
    // Rules API and rules sync
    "rules_version", "rules_validations", "rules_applies", "rules_applies_invalid",
    "rules_persist_failures", "rules_received_applied", "rules_received_refused",
    "rules_state_file_invalid", "rules_http_unauthorized", "rules_http_requests",
    "rules_sync_adverts_newer", "rules_sync_transfers_started", "rules_sync_transfers_completed",
    "rules_sync_transfers_abandoned", "rules_sync_transfers_superseded", "rules_sync_too_large",
    "rules_sync_requests_sent", "rules_sync_retries", "rules_sync_requests_served",
    "rules_sync_requests_unknown", "rules_sync_chunks_sent", "rules_sync_chunks_received",
    "rules_sync_chunks_duplicate", "rules_sync_chunks_stale", "rules_sync_chunks_malformed",
    "rules_sync_refused",
    // Redis mode
    "store_batches", "store_batches_failed", "store_batches_timed_out", "store_batches_full",
    "store_keys_written", "store_keys_read", "store_writes_failed", "store_entries_received",
    "store_entries_applied", "store_tokens_charged_remote", "store_tokens_charged_standin",
    "store_standin_origins_untracked", "store_down", "store_healthy", "store_dirty_keys",
    "store_held_keys", "store_recent_origins", "redis_batches_refused_queue_full", "redis_commands",
    "redis_round_trips", "redis_bytes_out", "redis_bytes_in", "redis_connects",
    "redis_connect_failures", "redis_connects_deferred", "redis_connections_lost", "redis_moved",
    "redis_ask", "redis_noscript", "redis_redirects_exhausted", "redis_slot_refreshes",
    "redis_slot_refresh_failures", "redis_fields_skipped"};
static_assert(std::size(kStatusNames) == std::size(kStatusMetrics),
              "one status name per StatusMetric");

// The help of a family is on its first entry; later entries of the family
// leave it empty.
std::string_view family_help(std::string_view family) {
  for (const StatusMetric& m : kStatusMetrics) {
    if (m.family == family && !m.help.empty()) return m.help;
  }
  return {};
}

void append_number(std::string& out, std::uint64_t value) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  out.append(buf, end);
}

// One collected sample of a status counter, before families are grouped.
struct Collected {
  std::string family;
  MetricType type = MetricType::kUntyped;
  std::string help;
  std::string_view label_name;
  std::string_view label_value;
  double scale = 1;
  std::uint64_t value = 0;
};

void write_histogram(MetricsWriter& w, const char* face, const LatencyHistogram& h) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le =
        i < LatencyHistogram::kBoundsNs.size()
            ? format_value(static_cast<double>(LatencyHistogram::kBoundsNs[i]) / 1e9)
            : std::string("+Inf");
    w.sample("rlimit_decision_seconds_bucket", {{"face", face}, {"le", le}}, cumulative);
  }
  w.sample("rlimit_decision_seconds_sum", {{"face", face}}, static_cast<double>(h.sum_ns) / 1e9);
  w.sample("rlimit_decision_seconds_count", {{"face", face}}, h.count);
}

}  // namespace

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kUntyped:
      break;
  }
  return "untyped";
}

const StatusMetric* metric_for_status(std::string_view status_name) {
  static const std::unordered_map<std::string_view, const StatusMetric*> by_name = [] {
    std::unordered_map<std::string_view, const StatusMetric*> map;
    for (std::size_t i = 0; i < std::size(kStatusNames); ++i) {
      map.emplace(kStatusNames[i], &kStatusMetrics[i]);
    }
    return map;
  }();
  const auto it = by_name.find(status_name);
  return it == by_name.end() ? nullptr : it->second;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  return std::string(buf, end);
}

void MetricsWriter::family(std::string_view name, MetricType type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += escape_help(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += metric_type_name(type);
  out_ += '\n';
}

void MetricsWriter::labels(std::initializer_list<Label> labels) {
  if (labels.size() == 0) return;
  out_ += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += name;
    out_ += "=\"";
    out_ += escape_label_value(value);
    out_ += '"';
  }
  out_ += '}';
}

void MetricsWriter::sample(std::string_view name, std::initializer_list<Label> labels,
                           double value) {
  out_ += name;
  this->labels(labels);
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

void MetricsWriter::sample(std::string_view name, std::initializer_list<Label> labels,
                           std::uint64_t value) {
  out_ += name;
  this->labels(labels);
  out_ += ' ';
  append_number(out_, value);
  out_ += '\n';
}

void write_metrics(const MetricsInput& in, std::string& out) {
  MetricsWriter w(out);
  const core::Limiter& limiter = in.limiter;

  // Every status counter, grouped into families in the order status lists
  // them: taken from fill_status itself, so a counter added there is never
  // missing here.
  v1::StatusResponse status;
  fill_status(in.status, limiter, in.counters, in.now, status);
  std::vector<Collected> collected;
  collected.reserve(static_cast<std::size_t>(status.counters_size()));
  for (const v1::Counter& counter : status.counters()) {
    const std::string_view name = counter.name();
    Collected& c = collected.emplace_back();
    c.value = counter.value();
    if (const StatusMetric* m = metric_for_status(name)) {
      c.family = m->family;
      c.type = m->type;
      c.help = family_help(m->family);
      c.label_name = m->label_name;
      c.label_value = m->label_value;
      c.scale = m->scale;
    } else {
      c.family = "rlimit_" + std::string(name);
      c.help = "Status counter " + std::string(name) + " (not yet described in metrics.cc).";
    }
  }

  std::vector<bool> written(collected.size(), false);
  for (std::size_t i = 0; i < collected.size(); ++i) {
    if (written[i]) continue;
    const Collected& head = collected[i];
    w.family(head.family, head.type, head.help);
    for (std::size_t j = i; j < collected.size(); ++j) {
      const Collected& c = collected[j];
      if (written[j] || c.family != head.family) continue;
      written[j] = true;
      const auto emit = [&](std::initializer_list<MetricsWriter::Label> labels) {
        if (c.scale == 1) {
          w.sample(c.family, labels, c.value);
        } else {
          w.sample(c.family, labels, static_cast<double>(c.value) * c.scale);
        }
      };
      if (c.label_name.empty()) {
        emit({});
      } else {
        emit({{c.label_name, c.label_value}});
      }
    }
  }

  // Per rule, then the inline limits.
  const std::vector<core::Rule>& rules = limiter.rules().rules;
  const std::vector<core::RuleCounters>& per_rule = limiter.rule_counters();
  const auto rule_family = [&](const char* name, const char* help, auto value_of) {
    w.family(name, kCounter, help);
    for (std::size_t r = 0; r < per_rule.size(); ++r) {
      const bool inline_limits = r >= rules.size();
      // Both arms views: a std::string arm would make the view dangle.
      const std::string_view rule_name =
          inline_limits ? std::string_view("<inline>") : std::string_view(rules[r].name);
      const std::string_view algorithm =
          inline_limits ? "token_bucket" : core::algorithm_name(rules[r].algorithm);
      w.sample(name, {{"rule", rule_name}, {"algorithm", algorithm}}, value_of(per_rule[r]));
    }
  };
  rule_family("rlimit_rule_checks_total",
              "Checks a rule decided (rule=\"<inline>\": inline limits). Kept across a reload "
              "while the rule's definition is unchanged.",
              [](const core::RuleCounters& c) { return c.checks(); });
  rule_family("rlimit_rule_allowed_total", "Checks a rule's verdict admitted.",
              [](const core::RuleCounters& c) { return c.allowed; });
  rule_family("rlimit_rule_denied_total", "Checks a rule's verdict refused.",
              [](const core::RuleCounters& c) { return c.denied; });
  rule_family("rlimit_rule_over_limit_total",
              "Checks over a rule's limit that its throttle mode admitted.",
              [](const core::RuleCounters& c) { return c.over_limit; });

  w.family("rlimit_decision_seconds", MetricType::kHistogram,
           "Time the event loop took to answer a request (decode, decide, encode), by face; "
           "frames read together count as their mean.");
  write_histogram(w, "unix", in.decision_times.unix_socket);
  write_histogram(w, "http", in.decision_times.http);
  write_histogram(w, "grpc", in.decision_times.grpc);

  const std::uint64_t keys = limiter.key_count();
  const std::uint64_t max_keys = limiter.options().max_keys;
  w.family("rlimit_keys", kGauge, "Keys held (token buckets and other algorithms' states).");
  w.sample("rlimit_keys", {}, keys);
  w.family("rlimit_max_keys", kGauge, "The key table's bound ([daemon] max_keys).");
  w.sample("rlimit_max_keys", {}, max_keys);
  w.family("rlimit_key_table_fill_ratio", kGauge, "Keys held / max_keys.");
  w.sample("rlimit_key_table_fill_ratio", {},
           max_keys == 0 ? 0.0 : static_cast<double>(keys) / static_cast<double>(max_keys));
  w.family("rlimit_rules", kGauge, "Rules in force.");
  w.sample("rlimit_rules", {}, static_cast<std::uint64_t>(rules.size()));
  w.family("rlimit_rules_digest", kGauge,
           "The first 52 bits of the SHA-256 of the canonical rule set: equal on nodes with "
           "the same rules.");
  w.sample("rlimit_rules_digest", {}, in.rules_digest);
  if (in.status.cluster != nullptr) {
    w.family("rlimit_ledger_keys", kGauge, "Keys whose per-origin counters this node keeps.");
    w.sample("rlimit_ledger_keys", {}, static_cast<std::uint64_t>(limiter.ledger().size()));
    w.family("rlimit_gossip_backlog_keys", kGauge,
             "Keys with changes still to be gossiped to peers.");
    w.sample("rlimit_gossip_backlog_keys", {},
             static_cast<std::uint64_t>(limiter.ledger().changed().size()));
  }
  w.family("rlimit_ready", kGauge, "1 when /readyz answers 200.");
  w.sample("rlimit_ready", {}, std::uint64_t{in.ready ? 1u : 0u});
  w.family("rlimit_uptime_seconds", kGauge, "Seconds since the daemon started.");
  w.sample("rlimit_uptime_seconds", {},
           static_cast<double>(std::max<core::TimeUs>(0, in.now - in.status.started_us)) / 1e6);
  if (in.status.rules != nullptr) {
    // The rule set as `rlimitctl members` shows it (the rules API's version,
    // origin and the document's SHA-256, its first 12 hex digits), beside
    // rlimit_rules_digest, which compares what the rules decide.
    const core::RulesVersion& rules_version = in.status.rules->current().version;
    static constexpr char kHex[] = "0123456789abcdef";
    std::string digest_hex;
    for (std::size_t i = 0; i < rules_version.digest.size() && digest_hex.size() < 12; ++i) {
      const auto byte = static_cast<unsigned char>(rules_version.digest[i]);
      digest_hex += kHex[byte >> 4];
      digest_hex += kHex[byte & 0xf];
    }
    const std::string version_text = std::to_string(rules_version.version);
    w.family("rlimit_rules_info", kGauge,
             "Always 1; the labels name the rule set in force as rlimitctl members shows it.");
    w.sample("rlimit_rules_info",
             {{"version", version_text}, {"origin", rules_version.origin}, {"digest", digest_hex}},
             std::uint64_t{1});
  }
  w.family("rlimit_build_info", kGauge, "Always 1; the labels say which build this is.");
  w.sample("rlimit_build_info",
           {{"version", in.version},
            {"node", in.status.node_id},
            {"cluster_mode", in.status.cluster_mode}},
           std::uint64_t{1});
}

}  // namespace rlimit::shell
