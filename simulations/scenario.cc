// The scenario loader: overrides are applied to the parsed TOML document
// first, so an overridden field is checked exactly like one in the file.
// Every key is checked; unknown keys are errors (a typo must not silently
// fall back to a default). The [[rule]] and [[exempt]] tables are handed to
// the daemon's own config loader, so a scenario's rules mean what they mean
// in rlimitd.toml.
#include "scenario.h"

#include <toml++/toml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config.h"
#include "core/duration.h"

namespace rlimit::sim {
namespace {

// Reads one table, remembering which keys were used so the rest can be
// reported as unknown.
class Reader {
 public:
  Reader(const toml::table& table, std::string path, std::string_view file,
         std::vector<std::string>& errors)
      : table_(table), path_(std::move(path)), file_(file), errors_(errors) {}

  void error(std::string_view key, const std::string& message, const toml::node* at = nullptr) {
    std::string where(file_);
    if (at != nullptr && at->source().begin.line > 0) {
      where += ":" + std::to_string(at->source().begin.line);
    }
    const std::string name =
        key.empty() ? path_ : (path_.empty() ? std::string(key) : path_ + "." + std::string(key));
    errors_.push_back(where + ": " + name + ": " + message);
  }

  const toml::node* node(std::string_view key) {
    used_.insert(std::string(key));
    return table_.get(key);
  }

  template <typename T>
  void integer(std::string_view key, T& out, std::int64_t low, std::int64_t high) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const auto v = n->value_exact<std::int64_t>();
    if (!v) return error(key, "must be an integer", n);
    if (*v < low || *v > high) {
      return error(key, "must be between " + std::to_string(low) + " and " + std::to_string(high),
                   n);
    }
    out = static_cast<T>(*v);
  }

  void number(std::string_view key, double& out, double low, double high) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const auto v = n->value<double>();  // integers are accepted as numbers
    if (!v || !n->is_number()) return error(key, "must be a number", n);
    if (!(*v >= low && *v <= high)) {
      std::ostringstream range;
      range << "must be between " << low << " and " << high;
      return error(key, range.str(), n);
    }
    out = *v;
  }

  void boolean(std::string_view key, bool& out) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const auto v = n->value_exact<bool>();
    if (!v) return error(key, "must be true or false", n);
    out = *v;
  }

  void string(std::string_view key, std::string& out) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const auto v = n->value_exact<std::string>();
    if (!v) return error(key, "must be a string", n);
    out = *v;
  }

  // A duration string ("250ms"); a leading '-' is allowed only if `signed_ok`.
  std::optional<TimeUs> parse_duration_node(std::string_view key, const toml::node& n,
                                            bool signed_ok) {
    const auto v = n.value_exact<std::string>();
    if (!v) {
      error(key, "must be a duration string such as \"250ms\" (the unit is required)", &n);
      return std::nullopt;
    }
    std::string_view text = *v;
    bool negative = false;
    if (signed_ok && !text.empty() && text.front() == '-') {
      negative = true;
      text.remove_prefix(1);
    }
    const core::DurationParse parsed = core::parse_duration(text);
    if (!parsed.us) {
      error(key, "\"" + *v + "\": " + parsed.error, &n);
      return std::nullopt;
    }
    return negative ? -*parsed.us : *parsed.us;
  }

  void duration(std::string_view key, TimeUs& out, TimeUs low_us, bool signed_ok = false) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const std::optional<TimeUs> v = parse_duration_node(key, *n, signed_ok);
    if (!v) return;
    if (*v < low_us) {
      return error(key, "must be at least " + core::format_duration(low_us), n);
    }
    out = *v;
  }

  template <typename F>
  void choice(std::string_view key, std::initializer_list<std::pair<std::string_view, F>> options,
              F& out) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    const auto v = n->value_exact<std::string>();
    std::string names;
    for (const auto& [name, value] : options) {
      if (v && *v == name) {
        out = value;
        return;
      }
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    error(key, "must be one of " + names, n);
  }

  // Reports every key that no getter asked for.
  void done() {
    for (const auto& [key, value] : table_) {
      if (!used_.contains(std::string(key.str()))) error(key.str(), "unknown key", &value);
    }
  }

  const std::string& path() const { return path_; }
  std::string_view file() const { return file_; }
  std::vector<std::string>& errors() { return errors_; }

 private:
  const toml::table& table_;
  std::string path_;
  std::string_view file_;
  std::vector<std::string>& errors_;
  std::set<std::string> used_;
};

// Iterates an array of tables, calling f(Reader&) for each.
template <typename F>
void each_table(Reader& parent, std::string_view key, F&& f) {
  const toml::node* n = parent.node(key);
  if (n == nullptr) return;
  const toml::array* array = n->as_array();
  if (array == nullptr)
    return parent.error(key, "must be an array of tables ([[" + std::string(key) + "]])", n);
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = array->get(i)->as_table();
    const std::string path = std::string(key) + "." + std::to_string(i);
    if (table == nullptr) {
      parent.error(path, "must be a table", array->get(i));
      continue;
    }
    Reader reader(*table, path, parent.file(), parent.errors());
    f(reader);
    reader.done();
  }
}

template <typename F>
void sub_table(Reader& parent, std::string_view key, F&& f) {
  const toml::node* n = parent.node(key);
  if (n == nullptr) return;
  const toml::table* table = n->as_table();
  if (table == nullptr) return parent.error(key, "must be a table", n);
  Reader reader(*table, std::string(key), parent.file(), parent.errors());
  f(reader);
  reader.done();
}

std::vector<std::uint32_t> node_list(Reader& r, std::string_view key, const toml::node& n) {
  std::vector<std::uint32_t> out;
  const toml::array* array = n.as_array();
  if (array == nullptr) {
    r.error(key, "must be an array of node indices", &n);
    return out;
  }
  for (const toml::node& e : *array) {
    const auto v = e.value_exact<std::int64_t>();
    if (!v || *v < 0) {
      r.error(key, "node indices are integers >= 0", &e);
      continue;
    }
    out.push_back(static_cast<std::uint32_t>(*v));
  }
  return out;
}

void read_cluster(Reader& r, ClusterParams& c) {
  core::ClusterOptions& o = c.options;
  core::MembershipOptions& m = o.membership;
  r.integer("nodes", c.nodes, 1, 100'000);
  r.integer("seeds", c.seeds, 1, 64);
  r.duration("gossip_interval", o.gossip_interval_us, 100);
  r.integer("fanout", o.fanout, 0, 1024);
  r.integer("mtu_bytes", c.mtu_bytes, 256, 65'000);
  r.integer("max_packets_per_round", o.max_packets_per_round, 1, 1'000'000);
  r.integer("retransmit_rounds", o.retransmit_rounds, 0, 1000);
  r.duration("anti_entropy_interval", o.anti_entropy_interval_us, 1000);
  r.integer("anti_entropy_entries", o.anti_entropy_entries, 1, 10'000'000);
  r.integer("owners_per_key", o.owners_per_key, 0, core::KeyOwners::kMaxOwners);
  r.integer("routed_max_origins", o.routed_max_origins, 1, 1'000'000);
  r.integer("routed_min_members", o.routed_min_members, 1, 1'000'000);
  r.duration("probe_interval", m.probe_interval_us, 1000);
  r.duration("probe_timeout", m.probe_timeout_us, 100);
  r.integer("indirect_probes", m.indirect_probes, 0, 64);
  r.duration("suspicion_timeout", m.suspicion_timeout_us, 1000);
  r.duration("dead_retention", m.dead_retention_us, 1000);
  r.duration("rejoin_interval", m.rejoin_interval_us, 0);
  r.integer("max_members", m.max_members, 2, 1'000'000);
  r.integer("max_piggyback", m.max_piggyback, 0, 1000);
  r.duration("table_sync_interval", m.table_sync_interval_us, 0);
  r.duration("tick", c.tick_us, 0);
  r.duration("sweep_interval", c.sweep_interval_us, 1000);
  r.boolean("fair_share", c.fair_share);
  r.choice<SyncMode>("mode", {{"gossip", SyncMode::kGossip}, {"redis", SyncMode::kRedis}}, c.mode);
  r.integer("sweep_batch", c.sweep_batch, 1, 100'000'000);
  o.max_payload_bytes = c.mtu_bytes - kEnvelopeBytes;
}

void read_network(Reader& r, NetworkParams& n) {
  r.number("loss", n.loss, 0, 1);
  r.duration("delay", n.delay_us, 0);
  r.duration("jitter", n.jitter_us, 0);
  r.number("duplicate", n.duplicate, 0, 1);
  r.number("reorder", n.reorder, 0, 1);
  r.duration("reorder_delay", n.reorder_delay_us, 0);
  r.integer("mtu", n.mtu_bytes, 64, 1'000'000);
}

void read_redis(Reader& r, RedisParams& p) {
  r.duration("sync_interval", p.options.sync_interval_us, 1000);
  r.integer("max_writes_per_batch", p.options.max_writes_per_batch, 1, 10'000'000);
  r.integer("max_reads_per_batch", p.options.max_reads_per_batch, 0, 10'000'000);
  r.duration("batch_timeout", p.options.batch_timeout_us, 1000);
  r.duration("standin_max", p.options.standin_max_us, 0);
  r.duration("latency", p.latency_us, 0);
  r.duration("jitter", p.jitter_us, 0);
  r.number("loss", p.loss, 0, 1);
  r.duration("timeout", p.timeout_us, 1000);
}

void read_clock(Reader& r, ClockParams& c) {
  r.duration("offset", c.offset_max_us, 0);
  r.number("drift", c.drift_max, 0, 0.5);
  if (const toml::node* n = r.node("offsets")) {
    if (const toml::array* a = n->as_array()) {
      for (const toml::node& e : *a) {
        if (auto v = r.parse_duration_node("offsets", e, true)) c.offsets_us.push_back(*v);
      }
    } else {
      r.error("offsets", "must be an array of durations (\"-5ms\", \"20ms\")", n);
    }
  }
  if (const toml::node* n = r.node("drifts")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) return r.error("drifts", "must be an array of numbers", n);
    for (const toml::node& e : *a) {
      const auto v = e.value<double>();
      if (!v || !e.is_number() || std::abs(*v) > 0.5) {
        r.error("drifts", "drifts are numbers in [-0.5, 0.5]", &e);
        continue;
      }
      c.drifts.push_back(*v);
    }
  }
}

void read_traffic(Reader& r, Traffic& t, std::size_t index) {
  t.name = "traffic" + std::to_string(index);
  r.string("name", t.name);
  r.choice<ArrivalKind>("arrival",
                        {{"constant", ArrivalKind::kConstant},
                         {"poisson", ArrivalKind::kPoisson},
                         {"bursts", ArrivalKind::kBursts}},
                        t.arrival);
  r.number("rate", t.rate_per_s, 0, 1e9);
  r.number("demand", t.demand, 0, 1e6);
  r.integer("cost", t.cost, 1, core::kMaxTokens);
  r.integer("keys", t.keys, 1, 100'000'000);
  r.choice<KeyDistribution>(
      "key_distribution",
      {{"uniform", KeyDistribution::kUniform}, {"zipf", KeyDistribution::kZipf}},
      t.key_distribution);
  r.number("zipf_s", t.zipf_s, 0, 10);
  r.integer("key_spread", t.key_spread, 0, 100'000);
  r.number("node_zipf", t.node_zipf, 0, 10);
  if (const toml::node* n = r.node("node_weights")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) {
      r.error("node_weights", "must be an array of numbers", n);
    } else {
      for (const toml::node& e : *a) {
        const auto v = e.value<double>();
        if (!v || !e.is_number() || *v < 0) {
          r.error("node_weights", "weights are numbers >= 0", &e);
          continue;
        }
        t.node_weights.push_back(*v);
      }
    }
  }
  r.duration("burst_on", t.burst_on_us, 1000);
  r.duration("burst_off", t.burst_off_us, 0);
  r.duration("hold", t.hold_us, 0);
  r.boolean("burst_aligned", t.burst_aligned);
  r.duration("start", t.start_us, 0);
  r.duration("end", t.end_us, 0);
  if (const toml::node* n = r.node("descriptors")) {
    const toml::table* table = n->as_table();
    if (table == nullptr) {
      r.error("descriptors", "must be a table of descriptor key = value template", n);
    } else {
      for (const auto& [key, value] : *table) {
        const auto v = value.value_exact<std::string>();
        if (!v) {
          r.error("descriptors." + std::string(key.str()), "must be a string", &value);
          continue;
        }
        t.descriptors.push_back({std::string(key.str()), *v});
      }
    }
  }
  sub_table(r, "inline", [&](Reader& in) {
    InlineTemplate tmpl;
    in.string("key", tmpl.key);
    in.integer("limit", tmpl.params.limit, 0, core::kMaxTokens);
    tmpl.params.period_us = 1'000'000;
    in.duration("period", tmpl.params.period_us, 1);
    tmpl.params.burst = tmpl.params.limit;
    in.integer("burst", tmpl.params.burst, 0, core::kMaxTokens);
    if (tmpl.key.empty()) in.error("key", "an inline limit needs a key");
    t.inline_limit = tmpl;
  });
  if (t.descriptors.empty() && !t.inline_limit) {
    r.error("", "a traffic stream needs descriptors or an inline limit");
  }
}

void read_report(Reader& r, ReportParams& p) {
  r.duration("sample", p.sample_us, 1000);
  r.duration("window", p.window_us, 1000);
  r.number("limit", p.limit_per_s, 0, 1e12);
  r.duration("probe_interval", p.probe_interval_us, 100);
  r.integer("probe_keys", p.probe_keys, 0, 1'000'000);
  r.number("converge_tokens", p.converge_tokens, 0, 1e12);
  r.duration("converge_max", p.converge_max_us, 1000);
  r.duration("plot_smooth", p.plot_smooth_us, 0);
  r.integer("plot_nodes", p.plot_nodes, 0, 64);
}

void read_swarm(Reader& r, const toml::table& table, std::vector<SwarmRange>& out) {
  for (const auto& [key, value] : table) {
    const std::string path(key.str());
    r.node(path);
    const toml::array* a = value.as_array();
    if (a == nullptr || a->size() != 2) {
      r.error(path, "must be [low, high]", &value);
      continue;
    }
    const toml::node& lo = *a->get(0);
    const toml::node& hi = *a->get(1);
    SwarmRange range;
    range.path = path;
    if (lo.is_integer() && hi.is_integer()) {
      range.kind = SwarmKind::kInteger;
      range.low = static_cast<double>(*lo.value<std::int64_t>());
      range.high = static_cast<double>(*hi.value<std::int64_t>());
    } else if (lo.is_number() && hi.is_number()) {
      range.kind = SwarmKind::kFloat;
      range.low = *lo.value<double>();
      range.high = *hi.value<double>();
    } else if (lo.is_string() && hi.is_string()) {
      range.kind = SwarmKind::kDuration;
      const auto l = r.parse_duration_node(path, lo, false);
      const auto h = r.parse_duration_node(path, hi, false);
      if (!l || !h) continue;
      range.low = static_cast<double>(*l);
      range.high = static_cast<double>(*h);
    } else {
      r.error(path, "both ends must be numbers or both duration strings", &value);
      continue;
    }
    if (range.high < range.low) {
      r.error(path, "low must not exceed high", &value);
      continue;
    }
    out.push_back(range);
  }
}

// The daemon's loader checks the rules; they are re-serialized alone, so its
// messages carry the position in that excerpt, which we drop.
void read_rules(const toml::table& root, std::string_view file, Scenario& s,
                std::vector<std::string>& errors) {
  toml::table doc;
  if (const toml::node* n = root.get("rule")) doc.insert("rule", *n);
  if (const toml::node* n = root.get("exempt")) doc.insert("exempt", *n);
  std::ostringstream text;
  text << doc;
  const config::LoadResult loaded = config::load_config(text.str(), file);
  for (const config::ConfigError& e : loaded.errors) {
    errors.push_back(std::string(file) + ": rules: " + e.message);
  }
  if (loaded.ok()) s.rules = loaded.config.rules;
}

void validate(Scenario& s, std::string_view file, std::vector<std::string>& errors) {
  auto error = [&](const std::string& message) {
    errors.push_back(std::string(file) + ": " + message);
  };
  const std::uint32_t n = s.cluster.nodes;
  if (s.cluster.seeds > n) s.cluster.seeds = n;
  if (s.cluster.options.membership.probe_timeout_us >
      s.cluster.options.membership.probe_interval_us) {
    error("cluster.probe_timeout must not exceed cluster.probe_interval");
  }
  for (std::size_t i = 0; i < s.partitions.size(); ++i) {
    const Partition& p = s.partitions[i];
    if (p.end_us <= p.start_us)
      error("partition." + std::to_string(i) + ": end must be after start");
    std::set<std::uint32_t> seen;
    for (const auto& group : p.groups) {
      for (std::uint32_t node : group) {
        if (node >= n)
          error("partition." + std::to_string(i) + ": node " + std::to_string(node) +
                " does not exist");
        if (!seen.insert(node).second)
          error("partition." + std::to_string(i) + ": node " + std::to_string(node) +
                " is in two groups");
      }
    }
  }
  for (std::size_t i = 0; i < s.crashes.size(); ++i) {
    const Crash& c = s.crashes[i];
    if (c.node >= n)
      error("crash." + std::to_string(i) + ": node " + std::to_string(c.node) + " does not exist");
    if (c.restart_us && *c.restart_us <= c.at_us)
      error("crash." + std::to_string(i) + ": restart must be after at");
  }
  for (std::size_t i = 0; i < s.resets.size(); ++i) {
    const KeyReset& reset = s.resets[i];
    const std::string where = "reset." + std::to_string(i) + ": ";
    if (reset.node >= n) error(where + "node " + std::to_string(reset.node) + " does not exist");
    if (reset.stream >= s.traffic.size()) {
      error(where + "stream " + std::to_string(reset.stream) + " does not exist");
    } else if (reset.key >= s.traffic[reset.stream].keys) {
      error(where + "key " + std::to_string(reset.key) + " is not one of the stream's keys");
    }
  }
  if (s.traffic.empty()) error("at least one [[traffic]] stream is needed");
  for (Traffic& t : s.traffic) {
    if (t.end_us < 0 || t.end_us > s.duration_us) t.end_us = s.duration_us;
    if (t.start_us >= t.end_us)
      error("traffic \"" + t.name + "\": start must be before end and the end of the run");
    if (t.key_spread > n) t.key_spread = n;
    if (t.node_weights.size() > n)
      error("traffic \"" + t.name + "\": more node_weights than nodes");
  }
  if (s.clock.offsets_us.size() > n || s.clock.drifts.size() > n)
    error("clock: more offsets or drifts than nodes");
  if (s.report.window_us < s.report.sample_us) s.report.window_us = s.report.sample_us;
}

// Applies "a.b.c=value" to the document.
bool apply_override(toml::table& root, const std::string& assignment, std::string& error) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "--set " + assignment + ": expected key.path=value";
    return false;
  }
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", text}};  // a bare word: a string
  }
  std::vector<std::string> parts;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = path.find('.', from);
    parts.push_back(path.substr(from, dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  toml::node* current = &root;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (toml::table* table = current->as_table()) {
      if (last) {
        table->insert_or_assign(part, *parsed.get("v"));
        return true;
      }
      toml::node* next = table->get(part);
      if (next == nullptr) next = &table->insert_or_assign(part, toml::table{}).first->second;
      current = next;
    } else if (toml::array* array = current->as_array()) {
      char* end = nullptr;
      const unsigned long index = std::strtoul(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || index >= array->size()) {
        error = "--set " + path + ": \"" + part + "\" is not an index of the array (size " +
                std::to_string(array->size()) + ")";
        return false;
      }
      if (last) {
        array->replace(array->begin() + static_cast<long>(index), *parsed.get("v"));
        return true;
      }
      current = array->get(index);
    } else {
      error = "--set " + path + ": \"" + part + "\" is inside a value, not a table";
      return false;
    }
  }
  return true;
}

}  // namespace

ScenarioLoad load_scenario(std::string_view text, std::string_view file_name,
                           const std::vector<std::string>& overrides) {
  ScenarioLoad result;
  toml::table root;
  try {
    root = toml::parse(text, file_name);
  } catch (const toml::parse_error& e) {
    result.errors.push_back(std::string(file_name) + ":" + std::to_string(e.source().begin.line) +
                            ": " + std::string(e.description()));
    return result;
  }
  for (const std::string& o : overrides) {
    std::string error;
    if (!apply_override(root, o, error)) result.errors.push_back(error);
  }
  if (!result.errors.empty()) return result;

  Scenario s;
  s.source = std::string(file_name);
  std::vector<std::string>& errors = result.errors;
  Reader r(root, "", file_name, errors);
  r.string("name", s.name);
  r.string("description", s.description);
  r.duration("duration", s.duration_us, 1000);
  r.choice<DownArrivals>("down_arrivals",
                         {{"lost", DownArrivals::kLost},
                          {"fail_open", DownArrivals::kFailOpen},
                          {"fail_closed", DownArrivals::kFailClosed}},
                         s.down_arrivals);
  sub_table(r, "cluster", [&](Reader& t) { read_cluster(t, s.cluster); });
  sub_table(r, "network", [&](Reader& t) { read_network(t, s.network); });
  sub_table(r, "redis", [&](Reader& t) { read_redis(t, s.redis); });
  each_table(r, "redis_outage", [&](Reader& t) {
    StoreOutage o;
    t.duration("start", o.start_us, 0);
    t.duration("end", o.end_us, 0);
    if (o.end_us <= o.start_us) t.error("end", "must be after start", nullptr);
    s.redis.outages.push_back(o);
  });
  sub_table(r, "clock", [&](Reader& t) { read_clock(t, s.clock); });
  sub_table(r, "report", [&](Reader& t) { read_report(t, s.report); });
  each_table(r, "partition", [&](Reader& t) {
    Partition p;
    t.duration("start", p.start_us, 0);
    t.duration("end", p.end_us, 0);
    t.boolean("one_way", p.one_way);
    if (const toml::node* n = t.node("groups")) {
      if (const toml::array* a = n->as_array()) {
        for (const toml::node& g : *a) p.groups.push_back(node_list(t, "groups", g));
      } else {
        t.error("groups", "must be an array of arrays of node indices", n);
      }
    }
    if (const toml::node* n = t.node("sizes")) {
      if (!p.groups.empty()) t.error("sizes", "give groups or sizes, not both", n);
      std::uint32_t next = 0;
      for (std::uint32_t size : node_list(t, "sizes", *n)) {
        std::vector<std::uint32_t> group;
        for (std::uint32_t k = 0; k < size; ++k) group.push_back(next++);
        p.groups.push_back(std::move(group));
      }
    }
    if (p.groups.empty()) t.error("", "a partition needs groups or sizes");
    s.partitions.push_back(std::move(p));
  });
  each_table(r, "reset", [&](Reader& t) {
    KeyReset reset;
    t.integer("node", reset.node, 0, 1'000'000);
    t.duration("at", reset.at_us, 0);
    t.integer("stream", reset.stream, 0, 1'000'000);
    t.integer("key", reset.key, 0, 1'000'000'000);
    s.resets.push_back(reset);
  });
  each_table(r, "crash", [&](Reader& t) {
    Crash c;
    t.integer("node", c.node, 0, 1'000'000);
    t.duration("at", c.at_us, 0);
    TimeUs restart = -1;
    t.duration("restart", restart, 0);
    if (restart >= 0) c.restart_us = restart;
    s.crashes.push_back(c);
  });
  each_table(r, "traffic", [&](Reader& t) {
    Traffic traffic;
    read_traffic(t, traffic, s.traffic.size());
    s.traffic.push_back(std::move(traffic));
  });
  r.node("rule");
  r.node("exempt");
  read_rules(root, file_name, s, errors);
  if (const toml::node* n = r.node("swarm")) {
    if (const toml::table* table = n->as_table()) {
      Reader t(*table, "swarm", file_name, errors);
      read_swarm(t, *table, s.swarm);
    } else {
      r.error("swarm", "must be a table of \"key.path\" = [low, high]", n);
    }
  }
  r.done();
  validate(s, file_name, errors);
  if (errors.empty()) result.scenario = std::move(s);
  return result;
}

ScenarioLoad load_scenario_file(const std::string& path,
                                const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ScenarioLoad result;
    result.errors.push_back(path + ": cannot read the file");
    return result;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_scenario(text.str(), path, overrides);
}

}  // namespace rlimit::sim
