#include "shell/status.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "rlimit/v1/client.pb.h"
#include "shell/grpc_face.h"
#include "shell/redis_service.h"
#include "shell/rules_service.h"

namespace rlimit::shell {

void fill_status(const StatusContext& context, const core::Limiter& limiter,
                 const ShellCounters& counters, core::TimeUs now, v1::StatusResponse& out) {
  out.Clear();
  out.set_node_id(context.node_id);
  out.set_version(RLIMIT_VERSION);
  out.set_uptime_ms(
      static_cast<std::uint64_t>(std::max<core::TimeUs>(0, now - context.started_us)) /
      core::kUsPerMs);
  out.set_keys(limiter.key_count());
  out.set_max_keys(limiter.options().max_keys);
  out.set_config_source(context.config_source);

  for (const core::Rule& rule : limiter.rules().rules) {
    v1::RuleInfo* info = out.add_rules();
    info->set_name(rule.name);
    info->set_algorithm(core::algorithm_name(rule.algorithm));
    info->set_limit(static_cast<std::uint64_t>(rule.params.limit));
    info->set_period_ms(static_cast<std::uint64_t>(rule.params.period_us / core::kUsPerMs));
    info->set_burst(static_cast<std::uint64_t>(rule.params.burst));
    info->set_match(rule.describe_match());
    info->set_overrides(static_cast<std::uint32_t>(rule.overrides.size()));
  }

  auto add_counter = [&out](std::string_view name, std::uint64_t value) {
    v1::Counter* counter = out.add_counters();
    counter->set_name(name.data(), name.size());
    counter->set_value(value);
  };
  for_each_stat(limiter.stats(), add_counter);
  for_each_counter(counters, add_counter);
  // The ledger's, in either replicated mode (peers' news or the store's).
  auto add_ledger_counters = [&] {
    // Tokens of consumption from before this process started that were not
    // charged: each key takes at most one burst of it (docs/cluster.md).
    add_counter("ledger_history_forgiven", limiter.ledger().history_forgiven());
    // What peers (or the store) sent that the ledger's bounds refused
    // ([cluster] max_origins, max_ledger_keys, max_entries_per_key).
    add_counter("ledger_origins_over_bound", limiter.ledger().origins_over_bound());
    add_counter("ledger_keys_over_bound", limiter.ledger().keys_over_bound());
    add_counter("ledger_entries_over_bound", limiter.ledger().entries_over_bound());
    // Fair shares' crowded bursts, seen at the keys' wakes (the ledger's).
    add_counter("share_crowded_bursts", limiter.ledger().crowded_bursts());
    // Wakes through which a window's debt was kept: the wake before was a
    // straggler's (FairShare::kMostStragglerUnits).
    add_counter("share_straggler_wakes", limiter.ledger().straggler_wakes());
    // Wakes that dropped a key's crowd marks: the burst before spent at most
    // an eighth of its pool (FairShare::kDisprovedCrowdPools), or ended a
    // run of bursts that each spent at most a quarter of the pool last seen
    // (kDisprovingBurstRun, kRunBurstPools).
    add_counter("share_crowds_disproved", limiter.ledger().crowds_disproved());
  };
  if (context.cluster != nullptr) {
    const core::Membership& membership = context.cluster->membership();
    for_each_cluster_stat(context.cluster->stats(), add_counter);
    for_each_membership_stat(membership.stats(), add_counter);
    std::uint64_t by_state[4] = {0, 0, 0, 0};
    for (const core::Member& member : membership.members()) {
      const auto index = static_cast<std::size_t>(member.state);
      if (index < 4) ++by_state[index];
    }
    add_counter("members_alive", by_state[static_cast<int>(core::MemberState::kAlive)]);
    add_counter("members_suspect", by_state[static_cast<int>(core::MemberState::kSuspect)]);
    add_counter("members_dead", by_state[static_cast<int>(core::MemberState::kDead)]);
    add_counter("members_left", by_state[static_cast<int>(core::MemberState::kLeft)]);
    add_ledger_counters();
  }
  if (context.peer_counters != nullptr) for_each_peer_counter(*context.peer_counters, add_counter);
  if (context.grpc_counters != nullptr) for_each_grpc_counter(*context.grpc_counters, add_counter);
  if (context.redis != nullptr) {
    context.redis->for_each_counter(add_counter);
    add_ledger_counters();
  }
  if (context.rules != nullptr) {
    add_counter("rules_version", context.rules->current().version.version);
    for_each_rules_counter(context.rules->counters(), add_counter);
  }
  if (context.cluster != nullptr) {
    for_each_rules_sync_stat(context.cluster->rules_sync().stats(), add_counter);
  }
}

void fill_member_info(const core::Member& member, bool self, core::TimeUs now,
                      v1::MemberInfo& out) {
  out.set_node_id(member.id);
  out.set_address(member.address);
  out.set_state(core::member_state_name(member.state));
  out.set_incarnation(member.incarnation);
  out.set_seq(member.seq);
  std::int64_t heard_ms_ago = -1;
  if (self) {
    heard_ms_ago = 0;
  } else if (member.last_heard_us != 0) {
    heard_ms_ago = std::max<core::TimeUs>(0, now - member.last_heard_us) / core::kUsPerMs;
  }
  out.set_last_heard_ms_ago(heard_ms_ago);
  out.set_self(self);
}

void fill_members(const StatusContext& context, core::TimeUs now, v1::MembersResponse& out) {
  out.Clear();
  out.set_mode(context.cluster_mode);
  // Each member's rules as it advertises them; ours as in force.
  auto add_rules = [](const core::RulesVersion* rules, v1::MemberInfo& info) {
    if (rules == nullptr) return;
    info.set_rules_version(rules->version);
    info.set_rules_origin(rules->origin);
    info.set_rules_digest(rules->digest);
  };
  const core::RulesVersion* own =
      context.rules != nullptr ? &context.rules->current().version : nullptr;
  if (context.cluster == nullptr) {
    core::Member self;
    self.id = context.node_id;
    v1::MemberInfo& info = *out.add_members();
    fill_member_info(self, /*self=*/true, now, info);
    add_rules(own, info);
    return;
  }
  out.set_cluster(context.cluster->options().cluster_name);
  const std::vector<core::Member>& members = context.cluster->membership().members();
  for (std::size_t i = 0; i < members.size(); ++i) {
    v1::MemberInfo& info = *out.add_members();
    fill_member_info(members[i], /*self=*/i == 0, now, info);
    add_rules(i == 0 ? own : context.cluster->rules_sync().advertised(members[i].id), info);
  }
}

}  // namespace rlimit::shell
