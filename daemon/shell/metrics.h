// The answer to GET /metrics: every counter the status request lists, the
// per-rule verdict counts, the decision-time histogram, keys and the key
// table's fill, cluster members by state, the gossip backlog, the rules'
// digest and build info, in Prometheus' text exposition format 0.0.4. Pure:
// live state in (read, never changed), text out. Not thread-safe: it reads
// the event loop's state, so call it on the loop.
//
// Names: a status counter `x` becomes `rlimit_x_total` (a counter) unless
// metric_for_status() maps it otherwise: gauges keep their name
// (rlimit_connections_open), a few become one labelled family
// (members_alive -> rlimit_cluster_members{state="alive"}, peer_bad_mac ->
// rlimit_peer_dropped_total{cause="bad_mac"}), microseconds become seconds.
// docs/monitoring/README.md lists the whole mapping.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "core/limiter.h"
#include "core/time.h"
#include "shell/counters.h"
#include "shell/latency_histogram.h"
#include "shell/status.h"

namespace rlimit::shell {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram, kUntyped };
const char* metric_type_name(MetricType type);  // "counter", "gauge", "histogram", "untyped"

// How one status counter is exposed.
struct StatusMetric {
  std::string_view family;  // "rlimit_checks_total"
  MetricType type = MetricType::kCounter;
  std::string_view help;
  std::string_view label_name;  // empty: no label
  std::string_view label_value;
  double scale = 1;  // the value is multiplied by this (microseconds -> seconds)
};
// The metric of a status counter as for_each_stat, for_each_counter,
// for_each_cluster_stat, for_each_membership_stat, for_each_peer_counter,
// for_each_grpc_counter and fill_status's members_* and
// ledger_history_forgiven name it; nullptr for a name it does not know
// (exposed untyped as rlimit_<name>, so nothing is hidden; metrics_test
// fails until it is described).
const StatusMetric* metric_for_status(std::string_view status_name);

// The format's escapes: in a label value \ " and newline; in HELP text \ and
// newline.
std::string escape_label_value(std::string_view value);
std::string escape_help(std::string_view help);
// A sample value as the format spells it: integers exactly, "+Inf", "NaN".
std::string format_value(double value);

// Writes families into `out`: family() once per family, then its samples.
class MetricsWriter {
 public:
  using Label = std::pair<std::string_view, std::string_view>;
  explicit MetricsWriter(std::string& out) : out_(out) {}
  void family(std::string_view name, MetricType type, std::string_view help);
  // `name` is the family's name, or for a histogram its _bucket/_sum/_count.
  void sample(std::string_view name, std::initializer_list<Label> labels, double value);
  void sample(std::string_view name, std::initializer_list<Label> labels, std::uint64_t value);

 private:
  void labels(std::initializer_list<Label> labels);
  std::string& out_;
};

struct MetricsInput {
  std::string_view version;  // RLIMIT_VERSION
  const core::Limiter& limiter;
  const ShellCounters& counters;
  const StatusContext& status;  // node, cluster, peer and gRPC counters
  const DecisionTimes& decision_times;
  std::uint64_t rules_digest = 0;  // rules_digest(limiter.rules())
  bool ready = false;              // what /readyz answers (health.h)
  core::TimeUs now = 0;
};

// Appends the exposition of `in` to `out`.
void write_metrics(const MetricsInput& in, std::string& out);

}  // namespace rlimit::shell
