#include "workload.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace rlimit::sim {
namespace {

constexpr std::string_view kKeyPlaceholder = "{key}";

std::vector<double> key_weights(const Traffic& t) {
  std::vector<double> w(t.keys, 1.0);
  if (t.key_distribution == KeyDistribution::kZipf) {
    for (std::uint32_t k = 0; k < t.keys; ++k) w[k] = 1.0 / std::pow(k + 1.0, t.zipf_s);
  }
  return w;
}

bool rule_is_per_key(const core::RuleSet& rules, std::string_view name) {
  for (const core::Rule& rule : rules.rules) {
    if (rule.name != name) continue;
    for (const core::DescriptorMatch& m : rule.match) {
      if (m.value.each) return true;
    }
  }
  return false;
}

}  // namespace

void Workload::Template::render(std::uint32_t key, std::string& out) const {
  out = prefix;
  if (has_key) {
    out += std::to_string(key);
    out += suffix;
  }
}

Workload::Workload(const Scenario& scenario, std::uint64_t seed, std::string& error) {
  const std::uint32_t nodes = scenario.cluster.nodes;
  auto make_template = [](const std::string& text) {
    Template t;
    const std::size_t at = text.find(kKeyPlaceholder);
    if (at == std::string::npos) {
      t.prefix = text;
    } else {
      t.has_key = true;
      t.prefix = text.substr(0, at);
      t.suffix = text.substr(at + kKeyPlaceholder.size());
    }
    return t;
  };

  core::Limiter scratch(core::LimiterOptions{}, scenario.rules);
  core::CheckOutput out;
  std::map<std::string, double> limits_by_source;
  for (std::uint32_t si = 0; si < scenario.traffic.size(); ++si) {
    const Traffic& t = scenario.traffic[si];
    Stream& s = streams_.emplace_back();
    s.traffic = &t;
    for (const DescriptorTemplate& d : t.descriptors) {
      s.descriptor_keys.push_back(make_template(d.key));
      s.descriptor_values.push_back(make_template(d.value));
    }
    if (t.inline_limit) s.inline_key = make_template(t.inline_limit->key);

    // The stream's limit: of the rules its first key matches, the one that
    // allows the fewest tokens over the stream's span (burst plus refill), so
    // a daily cap with a huge burst does not pass for a tight limit.
    StreamInfo& info = info_.emplace_back();
    fill(s, 0);
    core::CheckInput probe = input_;
    probe.cost = 0;
    scratch.check(probe, 0, out);
    const double span_s = static_cast<double>(t.end_us - t.start_us) / 1e6;
    double tightest = -1;
    double fewest = -1;
    for (const core::RuleVerdict& v : out.rules) {
      const double per_s =
          static_cast<double>(v.params.limit) * 1e6 / static_cast<double>(v.params.period_us);
      const double tokens = static_cast<double>(v.params.burst) + per_s * span_s;
      if (fewest >= 0 && tokens >= fewest) continue;
      fewest = tokens;
      tightest = per_s;
      info.key_params = v.params;
      info.key_capacity = v.capacity;
      const bool is_inline = t.inline_limit && v.name == inline_key_;
      info.per_key = is_inline ? s.inline_key->has_key : rule_is_per_key(scenario.rules, v.name);
      info.limit_source = is_inline ? "inline:" + t.inline_limit->key : std::string(v.name);
    }
    if (tightest >= 0) info.limit_per_s = tightest * (info.per_key ? t.keys : 1);
    info.rate_per_s = t.rate_per_s > 0 ? t.rate_per_s : t.demand * info.limit_per_s;
    if (t.rate_per_s <= 0 && tightest < 0) {
      error =
          "traffic \"" + t.name + "\" matches no rule, so demand has no meaning: give it a rate";
      return;
    }
    if (tightest >= 0) {
      double& l = limits_by_source[info.limit_source];
      l = std::max(l, info.limit_per_s);
    }

    // Per node: rate share, generator, burst phase.
    std::vector<double> weights(nodes, 1.0);
    for (std::uint32_t i = 0; i < nodes; ++i) {
      if (i < t.node_weights.size()) weights[i] = t.node_weights[i];
      if (t.node_zipf > 0) weights[i] /= std::pow(i + 1.0, t.node_zipf);
    }
    double total = 0;
    for (double w : weights) total += w;
    for (std::uint32_t i = 0; i < nodes; ++i) {
      s.node_rate_per_s.push_back(total > 0 ? info.rate_per_s * weights[i] / total : 0);
      s.rngs.emplace_back(derive_seed(seed, 1000 + si, i));
      const TimeUs cycle = t.burst_on_us + t.burst_off_us;
      s.phase_us.push_back(t.burst_aligned ? 0
                                           : static_cast<TimeUs>(s.rngs.back().uniform() *
                                                                 static_cast<double>(cycle)));
    }

    // Keys: cumulative weights, shared or per node.
    const std::vector<double> w = key_weights(t);
    if (t.key_spread == 0) {
      double sum = 0;
      for (double x : w) s.shared_keys.cumulative.push_back(sum += x);
    } else {
      s.node_keys.resize(nodes);
      for (std::uint32_t k = 0; k < t.keys; ++k) {
        for (std::uint32_t j = 0; j < t.key_spread; ++j) {
          KeyTable& table = s.node_keys[(k % nodes + j) % nodes];
          table.keys.push_back(k);
          const double before = table.cumulative.empty() ? 0 : table.cumulative.back();
          table.cumulative.push_back(before + w[k]);
        }
      }
    }
  }
  for (const auto& [source, limit] : limits_by_source) limit_per_s_ += limit;
  if (scenario.report.limit_per_s > 0) limit_per_s_ = scenario.report.limit_per_s;
}

TimeUs Workload::gap(Stream& s, std::uint32_t node, TimeUs now) {
  const Traffic& t = *s.traffic;
  const double rate = s.node_rate_per_s[node];
  Rng& rng = s.rngs[node];
  auto exponential_us = [&](double r) {
    return std::max<TimeUs>(1, std::llround(-std::log1p(-rng.uniform()) / r * 1e6));
  };
  switch (t.arrival) {
    case ArrivalKind::kConstant:
      return std::max<TimeUs>(1, std::llround(1e6 / rate));
    case ArrivalKind::kPoisson:
      return exponential_us(rate);
    case ArrivalKind::kBursts: {
      const TimeUs cycle = t.burst_on_us + t.burst_off_us;
      const double on_rate = rate * static_cast<double>(cycle) / static_cast<double>(t.burst_on_us);
      TimeUs at = now;
      for (int guard = 0; guard < 1'000'000; ++guard) {
        const TimeUs candidate = at + exponential_us(on_rate);
        const TimeUs origin = t.start_us + s.phase_us[node];
        const TimeUs pos = ((candidate - origin) % cycle + cycle) % cycle;
        if (pos < t.burst_on_us) return candidate - now;
        at = candidate - pos + cycle;  // the start of the next on period
      }
      return cycle;
    }
  }
  return 1;
}

TimeUs Workload::first(std::uint32_t stream, std::uint32_t node) {
  Stream& s = streams_[stream];
  const Traffic& t = *s.traffic;
  if (s.node_rate_per_s[node] <= 0) return -1;
  if (t.key_spread > 0 && s.node_keys[node].keys.empty()) return -1;
  TimeUs at = t.start_us;
  if (t.arrival == ArrivalKind::kConstant) {
    // A random phase, so the nodes' regular arrivals interleave.
    at += static_cast<TimeUs>(s.rngs[node].uniform() * static_cast<double>(gap(s, node, at)));
  } else {
    at += gap(s, node, at);
  }
  return at < t.end_us ? at : -1;
}

TimeUs Workload::next(std::uint32_t stream, std::uint32_t node, TimeUs now) {
  Stream& s = streams_[stream];
  const TimeUs at = now + gap(s, node, now);
  return at < s.traffic->end_us ? at : -1;
}

std::uint32_t Workload::pick_key(std::uint32_t stream, std::uint32_t node) {
  Stream& s = streams_[stream];
  const KeyTable& table = s.traffic->key_spread > 0 ? s.node_keys[node] : s.shared_keys;
  if (table.cumulative.size() == 1) return table.keys.empty() ? 0 : table.keys[0];
  const double u = s.rngs[node].uniform() * table.cumulative.back();
  auto it = std::upper_bound(table.cumulative.begin(), table.cumulative.end(), u);
  if (it == table.cumulative.end()) --it;
  const auto index = static_cast<std::size_t>(it - table.cumulative.begin());
  return table.keys.empty() ? static_cast<std::uint32_t>(index) : table.keys[index];
}

void Workload::fill(Stream& s, std::uint32_t key) {
  const std::size_t n = s.descriptor_keys.size();
  // Sized once per call before any pointer is taken, so the views stay valid.
  strings_.resize(2 * n);
  descriptors_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    s.descriptor_keys[i].render(key, strings_[2 * i]);
    s.descriptor_values[i].render(key, strings_[2 * i + 1]);
    descriptors_[i] = {strings_[2 * i], strings_[2 * i + 1]};
  }
  input_.descriptors = descriptors_;
  input_.cost = s.traffic->cost;
  input_.inline_limit = nullptr;
  if (s.inline_key) {
    s.inline_key->render(key, inline_key_);
    inline_.key = inline_key_;
    inline_.params = s.traffic->inline_limit->params;
    input_.inline_limit = &inline_;
  }
}

const core::CheckInput& Workload::input(std::uint32_t stream, std::uint32_t key) {
  fill(streams_[stream], key);
  return input_;
}

}  // namespace rlimit::sim
