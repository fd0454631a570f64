#include "shell/status.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "rlimit/v1/client.pb.h"

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
}

}  // namespace rlimit::shell
